// The forward pass's online softmax on register tiles: one SoftmaxStat (common/softmax_state.h)
// per accumulator row a thread holds. Rows are spread over a quad of threads, so the block max is
// quad-reduced while l stays a per-thread partial sum until finish(). Scores arrive un-scaled;
// the softmax scale is folded into the exp2 argument (one FFMA + EX2 per score).
#pragma once
#include <cmath>

#include "common/softmax_state.h"
#include "cuda/attention/sm80/tensor_ops.h"

namespace flashkit::cuda::attn::sm80 {

template <int kRows_>
struct OnlineSoftmax {
  static constexpr int kRows = kRows_;
  SoftmaxStat stat[kRows];  // m: running max of scale * score (natural-log units)

  // s: this tile's raw scores as (rows, cols), overwritten by P = exp(scale*s - m_new);
  // o: the un-scaled output accumulator as (rows, cols), rescaled by exp(m_old - m_new).
  template <class S, class O>
  __device__ __forceinline__ void update(S& s, O& o, float scale, float scale_log2) {
    float alpha[kRows];
    update_stats(s, alpha, scale, scale_log2);
    rescale(o, alpha);
  }

  // The two halves of update() for kernels that rescale O later (sm90: while the previous tile's
  // P V is still in flight): the new stats and P in s, and each row's O factor in alpha.
  template <class S>
  __device__ __forceinline__ void update_stats(S& s, float (&alpha)[kRows], float scale,
                                               float scale_log2) {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      float mx = -INFINITY;
      CUTE_UNROLL
      for (int c = 0; c < size<1>(s); ++c) mx = fmaxf(mx, s(r, c));
      alpha[r] = online_update(stat[r], quad_max(mx) * scale);
      // A row that has seen only masked keys keeps m = -inf; exp2(-inf - 0) = 0 avoids NaN.
      float m_log2 = stat[r].m == -INFINITY ? 0.f : stat[r].m * float(M_LOG2E);
      float sum = 0.f;
      CUTE_UNROLL
      for (int c = 0; c < size<1>(s); ++c) {
        s(r, c) = exp2f(s(r, c) * scale_log2 - m_log2);
        sum += s(r, c);
      }
      stat[r].l += sum;
    }
  }
  template <class O>
  __device__ __forceinline__ static void rescale(O& o, const float (&alpha)[kRows]) {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      CUTE_UNROLL
      for (int c = 0; c < size<1>(o); ++c) o(r, c) *= alpha[r];
    }
  }

  // Completes the row sums over the quad, scales O by 1/l (0 for rows that saw no key) and
  // returns nothing; lse(r) then gives each row's natural-log logsumexp.
  template <class O>
  __device__ __forceinline__ void finish(O& o) {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      stat[r].l = quad_sum(stat[r].l);
      float inv = stat[r].l > 0.f ? 1.f / stat[r].l : 0.f;
      CUTE_UNROLL
      for (int c = 0; c < size<1>(o); ++c) o(r, c) *= inv;
    }
  }
  __device__ __forceinline__ float lse(int r) const { return stat_lse(stat[r]); }
};

}  // namespace flashkit::cuda::attn::sm80
