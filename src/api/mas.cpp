// monotonic_alignment_search: every argument check, then dispatch by device to src/cpu/mas.cpp
// (the CUDA kernel is not written yet). On the CPU the lengths are read and checked here too
// (range, tx <= ty), so nothing is written unless every item has a monotonic path.
#include "flashkit/mas.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

#include "api/validate.h"
#include "common/half.h"
#include "cpu/mas.h"
#ifdef FLASHKIT_WITH_CUDA
#include "cuda/mas/launch.h"
#endif

namespace flashkit {
namespace {

using namespace detail;

// An output whose elements alias each other (a zero stride, or strides that interleave) would
// make the result depend on write order: refused. Sufficient test: sorted by stride, each dim's
// stride passes the whole extent of the smaller ones.
void check_no_self_overlap(const TensorView& t, const char* name) {
  int order[kMaxDims];
  for (int i = 0; i < t.ndim; ++i) {  // insertion sort by stride (at most kMaxDims dims)
    int j = i;
    for (; j > 0 && t.stride[order[j - 1]] > t.stride[i]; --j) order[j] = order[j - 1];
    order[j] = i;
  }
  int64_t extent = 0;  // largest element offset reached by the dims so far
  for (int i = 0; i < t.ndim; ++i) {
    const int d = order[i];
    if (t.shape[d] <= 1) continue;
    if (t.stride[d] <= extent)
      fail(name, ": expected strides that do not alias elements, got stride ", t.stride[d],
           " in dim ", d, " of shape ", t.shape_str());
    extent += (t.shape[d] - 1) * t.stride[d];
  }
}

// Host copies of the lengths, each checked: 0 <= tx <= T, 0 <= ty <= S and tx <= ty. `t_dim` /
// `s_dim` say where T and S came from, for the messages.
void read_lengths(const TensorView& text_lengths, const TensorView& mel_lengths, int64_t B,
                  int64_t T, int64_t S, const char* t_dim, const char* s_dim,
                  std::vector<int32_t>& tx, std::vector<int32_t>& ty) {
  tx.resize(B);
  ty.resize(B);
  // int32 [B], or a mask line [B, n] whose sum (truncated, like astype(int32)) is the length.
  auto length = [](const TensorView& t, int64_t b) -> int32_t {
    if (t.ndim == 1) return t.ptr<const int32_t>()[b * t.stride[0]];
    double sum = 0;
    for (int64_t i = 0; i < t.shape[1]; ++i)
      sum += load_as_float(t.data, t.dtype, b * t.stride[0] + i * t.stride[1]);
    return static_cast<int32_t>(sum);
  };
  for (int64_t b = 0; b < B; ++b) {
    tx[b] = length(text_lengths, b);
    ty[b] = length(mel_lengths, b);
    if (tx[b] < 0 || tx[b] > T)
      fail("text_lengths[", b, "]: expected 0..", T, " (", t_dim, "), got ", tx[b]);
    if (ty[b] < 0 || ty[b] > S)
      fail("mel_lengths[", b, "]: expected 0..", S, " (", s_dim, "), got ", ty[b]);
    if (tx[b] > ty[b])
      fail("text_lengths[", b, "]: expected <= mel_lengths[", b, "] (", ty[b], "), got ", tx[b],
           ": no monotonic path");
  }
}

// Lengths, options and outputs, shared by both entry points; `ref` is the first input (its
// device is the op's), `inputs` every input the outputs must not overlap.
void check_common(const TensorView& ref, const char* ref_name, int64_t B, int64_t T, int64_t S,
                  std::initializer_list<std::pair<const TensorView*, const char*>> inputs,
                  const TensorView& text_lengths, const TensorView& mel_lengths,
                  const TensorView& path, const TensorView& durations, const MasOptions& opts) {
  auto lengths = [&](const TensorView& t, const char* name, int64_t line) {
    check_defined(t, name);
    check_same_device(t, name, ref, ref_name);
    if (t.ndim == 2) {
      check_shape(t, name, {B, line});  // a mask line: any dtype
    } else {
      check_dtype(t, name, {DType::i32});
      check_shape(t, name, {B});
    }
    check_nonnegative_strides(t, name);
  };
  lengths(text_lengths, "text_lengths", T);
  lengths(mel_lengths, "mel_lengths", S);
  if (std::isnan(opts.neg)) fail("neg: expected a number (e.g. -1e9 or -inf), got nan");
  if (!path.defined() && !durations.defined())
    fail("path: expected a path and/or a durations output, got neither");
  auto output = [&](const TensorView& t, const char* name) {
    check_defined(t, name);
    check_same_device(t, name, ref, ref_name);
    check_nonnegative_strides(t, name);
    check_no_self_overlap(t, name);
    for (auto [in, in_name] : inputs) check_no_overlap(t, name, *in, in_name);
    check_no_overlap(t, name, text_lengths, "text_lengths");
    check_no_overlap(t, name, mel_lengths, "mel_lengths");
  };
  if (path.defined()) {
    check_dtype(path, "path",
                {DType::f32, DType::f16, DType::bf16, DType::i32, DType::u8, DType::bool8});
    check_shape(path, "path", {B, T, S});
    output(path, "path");
  }
  if (durations.defined()) {
    check_dtype(durations, "durations", {DType::i32});
    check_shape(durations, "durations", {B, T});
    output(durations, "durations");
    if (path.defined()) check_no_overlap(durations, "durations", path, "path");
  }
  if (opts.status.defined()) {
    check_same_device(opts.status, "status", ref, ref_name);
    check_dtype(opts.status, "status", {DType::i32});
    check_shape(opts.status, "status", {1});
    output(opts.status, "status");
    if (path.defined()) check_no_overlap(opts.status, "status", path, "path");
    if (durations.defined()) check_no_overlap(opts.status, "status", durations, "durations");
  }
}

void check_float_input(const TensorView& t, const char* name, int ndim) {
  check_defined(t, name);
  check_ndim(t, name, ndim);
  check_dtype(t, name, {DType::f32, DType::f16, DType::bf16});
  check_nonnegative_strides(t, name);
}

void cpu_status_ok(const MasOptions& opts) {
  if (opts.status.defined()) *opts.status.ptr<int32_t>() = -1;
}

}  // namespace

void monotonic_alignment_search(const TensorView& value, const TensorView& text_lengths,
                                const TensorView& mel_lengths, const TensorView& path,
                                const TensorView& durations, const MasOptions& opts) {
  check_float_input(value, "value", 3);
  const int64_t B = value.shape[0], T = value.shape[1], S = value.shape[2];
  check_common(value, "value", B, T, S, {{&value, "value"}}, text_lengths, mel_lengths, path,
               durations, opts);
  if (value.device == Device::cpu) {
    std::vector<int32_t> tx, ty;
    read_lengths(text_lengths, mel_lengths, B, T, S, "value's dim 1", "value's dim 2", tx, ty);
    if (B > 0)
      cpu::monotonic_alignment_search(value, tx.data(), ty.data(), path, durations, opts.neg);
    cpu_status_ok(opts);
    return;
  }
#ifdef FLASHKIT_WITH_CUDA
  cuda::monotonic_alignment_search(value, text_lengths, mel_lengths, path, durations, opts);
#else
  fail("value: expected a CPU tensor (this flashkit was built without CUDA), got a cuda tensor");
#endif
}

void monotonic_alignment_search_fused(const TensorView& z, const TensorView& m,
                                      const TensorView& logs, const TensorView& text_lengths,
                                      const TensorView& mel_lengths, const TensorView& path,
                                      const TensorView& durations, const MasOptions& opts) {
  check_float_input(z, "z", 3);
  check_float_input(m, "m", 3);
  check_float_input(logs, "logs", 3);
  const int64_t B = z.shape[0], C = z.shape[1], S = z.shape[2], T = m.shape[2];
  check_shape(m, "m", {B, C, -1});
  check_same_shape(logs, "logs", m, "m");
  check_same_dtype(m, "m", z, "z");
  check_same_dtype(logs, "logs", z, "z");
  check_same_device(m, "m", z, "z");
  check_same_device(logs, "logs", z, "z");
  check_common(z, "z", B, T, S, {{&z, "z"}, {&m, "m"}, {&logs, "logs"}}, text_lengths, mel_lengths,
               path, durations, opts);
  if (z.device == Device::cpu) {
    std::vector<int32_t> tx, ty;
    read_lengths(text_lengths, mel_lengths, B, T, S, "m's dim 2", "z's dim 2", tx, ty);
    if (B > 0)
      cpu::monotonic_alignment_search_fused(z, m, logs, tx.data(), ty.data(), path, durations,
                                            opts.neg);
    cpu_status_ok(opts);
    return;
  }
#ifdef FLASHKIT_WITH_CUDA
  cuda::monotonic_alignment_search_fused(z, m, logs, text_lengths, mel_lengths, path, durations,
                                         opts);
#else
  fail("z: expected a CPU tensor (this flashkit was built without CUDA), got a cuda tensor");
#endif
}

}  // namespace flashkit
