// The forward kernels' online softmax on register tiles (sm80 and sm90): one SoftmaxStat
// (common/softmax_state.h) per accumulator row a thread holds, the running max in log2 units of
// the scaled score (online_update_log2), so the softmax scale folds into the exp2 argument (one
// FFMA + EX2 a score) and a rescale factor is one FADD + EX2. Rows are spread over a quad of
// threads: the block max is quad-reduced, l stays a per-thread partial sum until finish(). Two
// knobs shape the work a key block costs (bench/NOTES-attention.md "sm90 forward v6"; the sm90
// hdim 128 / 256 kernels use both, by measurement, the others neither):
//   kTree  — the row max and row sum as four interleaved partial chains instead of one serial
//            chain of cols dependent FMNMX / FADD (latency on the softmax's critical path);
//   kLazy  — O and l are rescaled only when a row's max grows by more than kLazy (log2 units),
//            and a warp whose rows all kept their max skips O's FMULs;
//   kSkip  — with kLazy = 0: that skip alone (exact: every alpha of the warp is 1).
#pragma once
#include <cmath>

#include "common/softmax_state.h"
#include "cuda/attention/sm80/tensor_ops.h"

namespace flashkit::cuda::attn {

template <int kRows_, bool kTree = false, int kLazy = 0, bool kSkip = false>
struct OnlineSoftmax {
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

  // Row r's max over the thread's columns (the quad not yet reduced).
  template <class S>
  static __device__ __forceinline__ float thread_row_max(const S& s, int r) {
    return row_reduce(s, r, -INFINITY, [](float a, float b) { return fmaxf(a, b); });
  }
  // Row r of s becomes P = exp2(scale_log2 s - m), and l takes its sum.
  template <class S>
  __device__ __forceinline__ void exp_row(S& s, int r, float scale_log2, float m) {
    CUTE_UNROLL
    for (int c = 0; c < cute::size<1>(s); ++c) s(r, c) = exp2f(s(r, c) * scale_log2 - m);
    stat[r].l += row_reduce(s, r, 0.f, [](float a, float b) { return a + b; });
  }

  // s: this tile's raw scores as (rows, cols), overwritten by P = exp2(scale_log2 s - m);
  // o: the un-scaled output accumulator as (rows, cols), rescaled by exp2(m_old - m_new).
  template <class S, class O>
  __device__ __forceinline__ void update(S& s, O& o, float scale_log2) {
    float alpha[kRows];
    update_stats(s, alpha, scale_log2);
    rescale(o, alpha);
  }

  // The two halves of update() for kernels that rescale O later (sm90: while the previous tile's
  // P V is still in flight): the new stats and P in s, and each row's O factor in alpha.
  template <class S>
  __device__ __forceinline__ void update_stats(S& s, float (&alpha)[kRows], float scale_log2) {
    update_stats<false>(s, alpha, scale_log2, nullptr);
  }
  // kOff: the tile's scores are s(r, c) + off[r] (a per-thread row offset, e.g. ALiBi's row part
  // from GeneralScores::fwd_scores_rows): added to the thread's row max before the quad max and
  // folded into the exp2 FFMA, so it costs two instructions a row, none a score.
  template <bool kOff, class S>
  __device__ __forceinline__ void update_stats(S& s, float (&alpha)[kRows], float scale_log2,
                                               const float* off) {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      float tmax = thread_row_max(s, r);
      if constexpr (kOff) tmax += off[r];
      const float mx = sm80::quad_max(tmax) * scale_log2;
      alpha[r] = online_update_log2(stat[r], mx, float(kLazy));
      // A row that has seen only masked keys keeps m = -inf; exp2(-inf - 0) = 0 avoids NaN.
      float m_use = stat[r].m == -INFINITY ? 0.f : stat[r].m;
      if constexpr (kOff) m_use -= off[r] * scale_log2;
      exp_row(s, r, scale_log2, m_use);
    }
  }
  // The softmax of bounded scores (a policy's fwd_max_floor_log2): the row max is taken on the
  // tile's first key block only, never below floor, and kept for every later block, so those
  // need no row max, O and l are never rescaled, and each score's exponential waits only for its
  // own score (no quad reduction on the chain). A row whose max lies in that first block keeps
  // its P = 1 exact there, as the running max does (a row of one key gives O = V exactly).
  template <class S>
  __device__ __forceinline__ void update_bounded(S& s, float scale_log2, float floor, bool first) {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      if (first) stat[r].m = fmaxf(sm80::quad_max(thread_row_max(s, r)) * scale_log2, floor);
      exp_row(s, r, scale_log2, stat[r].m);
    }
  }
  template <class O>
  __device__ __forceinline__ static void rescale(O& o, const float (&alpha)[kRows]) {
    if constexpr (kLazy > 0 || kSkip) {
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
  // Completes the row sums over the quad and scales O by 1 / l (0 for rows that saw no key);
  // lse(r) then gives each row's natural-log logsumexp.
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
  __device__ __forceinline__ float lse(int r) const { return stat_lse_log2(stat[r]); }
};

}  // namespace flashkit::cuda::attn
