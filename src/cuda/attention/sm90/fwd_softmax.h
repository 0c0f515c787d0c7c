// The Hopper forward's online softmax on a warpgroup's register tile (a thread holds kRows rows
// of the 64 x kBlockN accumulator, each spread over a quad). Same interface and results as
// sm80::OnlineSoftmax, but the running max is kept in log2 units of the scaled score (the
// rescale factor is one FADD + EX2) and two knobs shape the work a key block costs, each
// measured in bench/NOTES-attention.md ("sm90 forward v6"; the hdim 128 / 256 kernels use both, the
// hdim 64 kernel with three consumer warpgroups neither, by measurement):
//   kTree  — the row max and row sum as four interleaved partial chains instead of one serial
//            chain of kBlockN / 4 dependent FMNMX / FADD (latency on the softmax's critical path);
//   kLazy  — O and l are rescaled only when a row's max grows by more than kLazy (log2 units):
//            until then P is computed against the stale max (so P <= 2^kLazy, exact after the
//            final O / l), and a warp whose rows all kept their max skips the 64 FMULs of O.
#pragma once
#include <cmath>

#include "common/softmax_state.h"
#include "cuda/attention/sm80/tensor_ops.h"

namespace flashkit::cuda::attn::sm90 {

template <int kRows_, bool kTree = false, int kLazy = 0>
struct FwdSoftmax {
  static constexpr int kRows = kRows_;
  SoftmaxStat stat[kRows];  // m: running (possibly stale) max of scale * score in log2 units

  template <class S, class F>
  static __device__ __forceinline__ float row_reduce(const S& s, int r, float init, F f) {
    constexpr int kCols = decltype(cute::size<1>(s))::value;
    if constexpr (kTree && kCols % 4 == 0) {
      float a[4] = {init, init, init, init};
      CUTE_UNROLL
      for (int c = 0; c < kCols; ++c) a[c & 3] = f(a[c & 3], s(r, c));
      return f(f(a[0], a[1]), f(a[2], a[3]));
    } else {
      float a = init;
      CUTE_UNROLL
      for (int c = 0; c < kCols; ++c) a = f(a, s(r, c));
      return a;
    }
  }

  // s: raw scores (rows, cols) -> P; alpha: each row's factor for O (applied by rescale()).
  template <class S>
  __device__ __forceinline__ void update_stats(S& s, float (&alpha)[kRows], float,
                                               float scale_log2) {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const float mx =
          sm80::quad_max(row_reduce(s, r, -INFINITY, [](float a, float b) { return fmaxf(a, b); })) *
          scale_log2;
      const float m_old = stat[r].m;
      bool grow = mx > m_old;
      if constexpr (kLazy > 0) grow = mx > m_old + float(kLazy) || m_old == -INFINITY;
      const float m_new = grow ? mx : m_old;
      // exp2(-inf) = 0 for the first live block; a row with no live key yet keeps alpha 1.
      alpha[r] = grow && m_new != -INFINITY ? exp2f(m_old - m_new) : 1.f;
      stat[r].l *= alpha[r];
      stat[r].m = m_new;
      // A row that has seen only masked keys keeps m = -inf; exp2(-inf - 0) = 0 avoids NaN.
      const float m_use = m_new == -INFINITY ? 0.f : m_new;
      CUTE_UNROLL
      for (int c = 0; c < cute::size<1>(s); ++c) {
        s(r, c) = exp2f(s(r, c) * scale_log2 - m_use);
      }
      stat[r].l += row_reduce(s, r, 0.f, [](float a, float b) { return a + b; });
    }
  }
  template <class O>
  __device__ __forceinline__ static void rescale(O& o, const float (&alpha)[kRows]) {
    if constexpr (kLazy > 0) {
      bool any = false;
      CUTE_UNROLL
      for (int r = 0; r < kRows; ++r) any |= alpha[r] != 1.f;
      if (!__any_sync(0xffffffffu, any)) return;
    }
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      CUTE_UNROLL
      for (int c = 0; c < cute::size<1>(o); ++c) o(r, c) *= alpha[r];
    }
  }
  // Row sums over the quad, O scaled by 1 / l (0 for rows that saw no key).
  template <class O>
  __device__ __forceinline__ void finish(O& o) {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      stat[r].l = sm80::quad_sum(stat[r].l);
      const float inv = stat[r].l > 0.f ? 1.f / stat[r].l : 0.f;
      CUTE_UNROLL
      for (int c = 0; c < cute::size<1>(o); ++c) o(r, c) *= inv;
    }
  }
  // Natural-log logsumexp of row r (-inf if it saw no key).
  __device__ __forceinline__ float lse(int r) const {
    return stat[r].l > 0.f ? (stat[r].m + log2f(stat[r].l)) * float(M_LN2) : -INFINITY;
  }
};

}  // namespace flashkit::cuda::attn::sm90
