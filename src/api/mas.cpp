// monotonic_alignment_search: every argument check, then dispatch by device to src/cpu/mas.cpp
// (the CUDA kernel is not written yet). On the CPU the lengths are read and checked here too
// (range, tx <= ty), so nothing is written unless every item has a monotonic path.
#include "flashkit/mas.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "api/validate.h"
#include "cpu/mas.h"

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

void check_lengths_tensor(const TensorView& t, const char* name, const TensorView& value) {
  check_defined(t, name);
  check_same_device(t, name, value, "value");
  check_dtype(t, name, {DType::i32});
  check_shape(t, name, {value.shape[0]});
  check_nonnegative_strides(t, name);
}

// Host copies of the lengths, each checked: 0 <= tx <= T, 0 <= ty <= S and tx <= ty.
void read_lengths(const TensorView& text_lengths, const TensorView& mel_lengths,
                  const TensorView& value, std::vector<int32_t>& tx, std::vector<int32_t>& ty) {
  const int64_t B = value.shape[0], T = value.shape[1], S = value.shape[2];
  tx.resize(B);
  ty.resize(B);
  for (int64_t b = 0; b < B; ++b) {
    tx[b] = text_lengths.ptr<const int32_t>()[b * text_lengths.stride[0]];
    ty[b] = mel_lengths.ptr<const int32_t>()[b * mel_lengths.stride[0]];
    if (tx[b] < 0 || tx[b] > T)
      fail("text_lengths[", b, "]: expected 0..", T, " (value's dim 1), got ", tx[b]);
    if (ty[b] < 0 || ty[b] > S)
      fail("mel_lengths[", b, "]: expected 0..", S, " (value's dim 2), got ", ty[b]);
    if (tx[b] > ty[b])
      fail("text_lengths[", b, "]: expected <= mel_lengths[", b, "] (", ty[b], "), got ", tx[b],
           ": no monotonic path");
  }
}

}  // namespace

void monotonic_alignment_search(const TensorView& value, const TensorView& text_lengths,
                                const TensorView& mel_lengths, const TensorView& path,
                                const TensorView& durations, const MasOptions& opts) {
  check_defined(value, "value");
  check_ndim(value, "value", 3);
  check_dtype(value, "value", {DType::f32, DType::f16, DType::bf16});
  check_nonnegative_strides(value, "value");
  const int64_t B = value.shape[0], T = value.shape[1], S = value.shape[2];
  check_lengths_tensor(text_lengths, "text_lengths", value);
  check_lengths_tensor(mel_lengths, "mel_lengths", value);
  if (std::isnan(opts.neg)) fail("neg: expected a number (e.g. -1e9 or -inf), got nan");
  if (!path.defined() && !durations.defined())
    fail("path: expected a path and/or a durations output, got neither");
  if (path.defined()) {
    check_defined(path, "path");
    check_same_device(path, "path", value, "value");
    check_dtype(path, "path",
                {DType::f32, DType::f16, DType::bf16, DType::i32, DType::u8, DType::bool8});
    check_shape(path, "path", {B, T, S});
    check_nonnegative_strides(path, "path");
    check_no_self_overlap(path, "path");
    check_no_overlap(path, "path", value, "value");
    check_no_overlap(path, "path", text_lengths, "text_lengths");
    check_no_overlap(path, "path", mel_lengths, "mel_lengths");
  }
  if (durations.defined()) {
    check_defined(durations, "durations");
    check_same_device(durations, "durations", value, "value");
    check_dtype(durations, "durations", {DType::i32});
    check_shape(durations, "durations", {B, T});
    check_nonnegative_strides(durations, "durations");
    check_no_self_overlap(durations, "durations");
    check_no_overlap(durations, "durations", value, "value");
    check_no_overlap(durations, "durations", text_lengths, "text_lengths");
    check_no_overlap(durations, "durations", mel_lengths, "mel_lengths");
    if (path.defined()) check_no_overlap(durations, "durations", path, "path");
  }
  if (B == 0) return;

  if (value.device == Device::cpu) {
    std::vector<int32_t> tx, ty;
    read_lengths(text_lengths, mel_lengths, value, tx, ty);
    cpu::monotonic_alignment_search(value, tx.data(), ty.data(), path, durations, opts.neg);
    return;
  }
  fail("value: expected a CPU tensor (MAS on CUDA is not implemented yet), got a cuda tensor");
}

}  // namespace flashkit
