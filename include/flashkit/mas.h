// Monotonic alignment search (Glow-TTS / VITS), exact: paths identical to the Cython
// `maximum_path` for every input, see shared/DESIGN.md "MAS semantics".
// value: log-likelihoods [B, T_text, S_mel] (fp32/fp16/bf16, any strides — pass a transposed view
// for the VITS [B, S, T] layout). text_lengths / mel_lengths: int32 [B] on value's device, or
// a mask line each, [B, T] and [B, S] of any dtype (e.g. mask[:, :, 0] and mask[:, 0, :]): the
// length is the line's sum truncated to an integer, as glow-tts / vits compute it from the mask
// (`mask.sum(1)[:, 0]`), so a drop-in needs no reduction kernels of its own.
#pragma once
#include <limits>

#include "flashkit/common.h"
#include "flashkit/tensor.h"

namespace flashkit {

struct MasOptions {
  // Value of the forbidden cells (the Cython code's max_neg_val). -1e9 is the glow-tts/vits
  // default; -1e32 and -inf are also common. NaN is refused.
  float neg = -1e9f;
  // Allow the GPU kernel to use `value` as scratch (it is left modified). Default: untouched.
  // The CPU backend never writes `value`, so there this is a permission it does not need.
  bool in_place = false;
  // Optional int32 [1] on value's device. The CUDA kernels read the lengths on the device and
  // cannot throw without a sync, so they report here: -1 if every item had valid lengths, else
  // the smallest item index with tx > ty or a length out of range (its path and durations rows
  // are written as zeros). The CPU throws instead (nothing written) and also writes -1 here.
  // The Python API checks it for you (one sync) unless told check=False.
  TensorView status;
  Stream stream = nullptr;
  Workspace workspace;
};

// path (optional): [B, T, S], dtype f32/f16/bf16/i32/u8/bool8, any non-overlapping strides; 1 on
// the path, 0 elsewhere, including outside [0, tx) x [0, ty). durations (optional): int32 [B, T],
// frames per text token (the path's row sums; 0 past tx). At least one of the two must be given.
// Lengths: 0 <= tx <= T, 0 <= ty <= S, tx <= ty (tx > ty has no monotonic path: an Error naming
// the item). An item with tx == 0 gets an all-zero path (the Cython code writes out of bounds).
// On the CPU every check runs before any output is written.
void monotonic_alignment_search(const TensorView& value, const TensorView& text_lengths,
                                const TensorView& mel_lengths, const TensorView& path,
                                const TensorView& durations, const MasOptions& opts = {});

// Fused likelihood: the same search on value[b, x, y] = sum_c -1/2 log 2pi - logs[b,c,x]
// - 1/2 e^{-2 logs[b,c,x]} (z[b,c,y] - m[b,c,x])^2 (Glow-TTS's logp, VITS's neg_cent), computed on
// the fly so that no [B, T, S] buffer exists. z: [B, C, S]; m, logs: [B, C, T]; one float dtype,
// any strides. The likelihood is evaluated with the same fp32 operations on the CPU and the GPU
// (src/common/mas_likelihood.h), so both give the same paths. CUDA: C <= 256.
void monotonic_alignment_search_fused(const TensorView& z, const TensorView& m,
                                      const TensorView& logs, const TensorView& text_lengths,
                                      const TensorView& mel_lengths, const TensorView& path,
                                      const TensorView& durations, const MasOptions& opts = {});

}  // namespace flashkit
