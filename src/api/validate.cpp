// Implementations of the shared argument checks (validate.h).
#include "api/validate.h"

#include <cstdint>

namespace flashkit::detail {

const char* device_name(Device d) { return d == Device::cpu ? "cpu" : "cuda"; }

static std::string shape_of(std::initializer_list<int64_t> s) {
  std::string r = "[";
  bool first = true;
  for (int64_t v : s) {
    r += first ? "" : ", ";
    if (v < 0) r += '*'; else append(r, v);
    first = false;
  }
  return r + "]";
}

void check_defined(const TensorView& t, const char* name) {
  if (t.data == nullptr) fail(name, ": expected a tensor, got none (null data)");
}

void check_dtype(const TensorView& t, const char* name, std::initializer_list<DType> allowed) {
  for (DType d : allowed)
    if (t.dtype == d) return;
  std::string list;
  for (DType d : allowed) list += (list.empty() ? "" : " or ") + std::string(dtype_name(d));
  fail(name, ": expected dtype ", list, ", got ", dtype_name(t.dtype));
}

void check_same_dtype(const TensorView& t, const char* name, const TensorView& ref,
                      const char* ref_name) {
  if (t.dtype != ref.dtype)
    fail(name, ": expected dtype ", dtype_name(ref.dtype), " like ", ref_name, ", got ",
         dtype_name(t.dtype));
}

void check_same_device(const TensorView& t, const char* name, const TensorView& ref,
                       const char* ref_name) {
  if (t.device != ref.device || (t.device == Device::cuda && t.device_id != ref.device_id))
    fail(name, ": expected device ", device_name(ref.device), ":", ref.device_id, " like ",
         ref_name, ", got ", device_name(t.device), ":", t.device_id);
}

void check_ndim(const TensorView& t, const char* name, int ndim) {
  if (t.ndim != ndim) fail(name, ": expected ", ndim, " dims, got ", t.ndim, " ", t.shape_str());
}

void check_shape(const TensorView& t, const char* name, std::initializer_list<int64_t> expected) {
  bool ok = t.ndim == static_cast<int>(expected.size());
  int d = 0;
  for (int64_t e : expected) {
    if (ok && e >= 0 && t.shape[d] != e) ok = false;
    ++d;
  }
  if (!ok) fail(name, ": expected shape ", shape_of(expected), ", got ", t.shape_str());
}

void check_same_shape(const TensorView& t, const char* name, const TensorView& ref,
                      const char* ref_name) {
  bool ok = t.ndim == ref.ndim;
  for (int d = 0; ok && d < t.ndim; ++d) ok = t.shape[d] == ref.shape[d];
  if (!ok)
    fail(name, ": expected shape ", ref.shape_str(), " like ", ref_name, ", got ", t.shape_str());
}

void check_last_dim_contiguous(const TensorView& t, const char* name) {
  if (t.ndim > 0 && t.shape[t.ndim - 1] > 1 && t.stride[t.ndim - 1] != 1)
    fail(name, ": expected a contiguous last dim (stride 1), got stride ", t.stride[t.ndim - 1]);
}

void check_contiguous(const TensorView& t, const char* name) {
  if (!t.is_contiguous()) fail(name, ": expected a contiguous tensor, got shape ", t.shape_str(),
                               " with non-row-major strides");
}

void check_nonnegative_strides(const TensorView& t, const char* name) {
  for (int d = 0; d < t.ndim; ++d)
    if (t.stride[d] < 0) fail(name, ": expected non-negative strides, got ", t.stride[d],
                              " in dim ", d);
}

void check_aligned(const TensorView& t, const char* name, size_t bytes) {
  if (reinterpret_cast<uintptr_t>(t.data) % bytes != 0)
    fail(name, ": expected a pointer aligned to ", bytes, " bytes, got ", t.data);
}

static void extent(const TensorView& t, uintptr_t& lo, uintptr_t& hi) {
  int64_t last = 0;
  for (int d = 0; d < t.ndim; ++d) last += (t.shape[d] - 1) * t.stride[d];
  lo = reinterpret_cast<uintptr_t>(t.data);
  hi = lo + static_cast<uintptr_t>((last + 1) * static_cast<int64_t>(dtype_size(t.dtype)));
}

void check_no_overlap(const TensorView& out, const char* out_name, const TensorView& in,
                      const char* in_name) {
  if (!out.data || !in.data || out.numel() == 0 || in.numel() == 0) return;
  if (out.device != in.device) return;
  uintptr_t a0, a1, b0, b1;
  extent(out, a0, a1);
  extent(in, b0, b1);
  if (a0 < b1 && b0 < a1) fail(out_name, ": expected memory separate from ", in_name,
                               ", got an overlapping buffer");
}

}  // namespace flashkit::detail
