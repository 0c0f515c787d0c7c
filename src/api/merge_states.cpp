// merge_states (include/flashkit/decode.h): shape/dtype/device checks, then the CPU loop or the
// CUDA kernel (the same kernel split-KV decode uses for its merge).
#include "api/validate.h"
#include "cpu/decode.h"
#include "flashkit/decode.h"
#ifdef FLASHKIT_WITH_CUDA
#include "cuda/decode/launch.h"
#endif

namespace flashkit {

using namespace detail;

void merge_states(const TensorView& o_parts, const TensorView& lse_parts, const TensorView& out,
                  const TensorView& lse, Stream stream) {
  check_defined(o_parts, "o_parts");
  check_dtype(o_parts, "o_parts", {DType::f32, DType::f16, DType::bf16});
  if (o_parts.ndim < 3 || o_parts.ndim > 6)
    fail("o_parts: expected [P, d0, ..., dk, hdim] with 1 to 4 leading dims, got ", o_parts.shape_str());
  if (o_parts.shape[0] < 1) fail("o_parts: expected at least one part, got ", o_parts.shape_str());
  check_last_dim_contiguous(o_parts, "o_parts");
  check_nonnegative_strides(o_parts, "o_parts");
  const int lead = o_parts.ndim - 2;
  check_defined(lse_parts, "lse_parts");
  check_dtype(lse_parts, "lse_parts", {DType::f32});
  check_same_device(lse_parts, "lse_parts", o_parts, "o_parts");
  bool ok = lse_parts.ndim == lead + 1;
  for (int i = 0; ok && i <= lead; ++i) ok = lse_parts.shape[i] == o_parts.shape[i];
  if (!ok)
    fail("lse_parts: expected o_parts' shape without hdim (", o_parts.shape_str(), " minus the last), got ",
         lse_parts.shape_str());
  check_nonnegative_strides(lse_parts, "lse_parts");
  check_defined(out, "out");
  check_dtype(out, "out", {DType::f32, DType::f16, DType::bf16});
  check_same_device(out, "out", o_parts, "o_parts");
  ok = out.ndim == lead + 1;
  for (int i = 0; ok && i <= lead; ++i) ok = out.shape[i] == o_parts.shape[i + 1];
  if (!ok) fail("out: expected o_parts' shape without P (", o_parts.shape_str(), " minus the first), got ",
                out.shape_str());
  check_last_dim_contiguous(out, "out");
  check_nonnegative_strides(out, "out");
  check_no_overlap(out, "out", o_parts, "o_parts");
  check_no_overlap(out, "out", lse_parts, "lse_parts");
  if (lse.data) {
    check_dtype(lse, "lse", {DType::f32});
    check_same_device(lse, "lse", o_parts, "o_parts");
    ok = lse.ndim == lead;
    for (int i = 0; ok && i < lead; ++i) ok = lse.shape[i] == out.shape[i];
    if (!ok) fail("lse: expected out's shape without hdim, got ", lse.shape_str());
    check_nonnegative_strides(lse, "lse");
    check_no_overlap(lse, "lse", o_parts, "o_parts");
    check_no_overlap(lse, "lse", lse_parts, "lse_parts");
    check_no_overlap(lse, "lse", out, "out");
  }
  if (o_parts.device == Device::cpu) {
    if (stream) fail("stream: expected none for CPU tensors, got a CUDA stream");
    cpu::merge_states(o_parts, lse_parts, out, lse);
    return;
  }
#ifdef FLASHKIT_WITH_CUDA
  cuda::merge_states(o_parts, lse_parts, out, lse, stream);
#else
  fail("o_parts: is on cuda, but flashkit was built without CUDA");
#endif
}

}  // namespace flashkit
