// The Hopper forward's online softmax on a warpgroup's register tile (a thread holds kRows rows
// of the 64 x kBlockN accumulator, each spread over a quad). Same interface and results as
// sm80::OnlineSoftmax, but the running max is kept in log2 units of the scaled score (the
// rescale factor is one FADD + EX2) and three knobs shape the work a key block costs, each
// measured in bench/NOTES-attention.md ("sm90 forward v6"):
//   kTree  — the row max and row sum as four interleaved partial chains instead of one serial
//            chain of kBlockN / 4 dependent FMNMX / FADD (latency on the softmax's critical path);
//   kPoly  — kPoly of every 8 columns take exp2 from a degree-3 polynomial on the FMA pipe
//            instead of MUFU.EX2 (the multi-function unit does 4 lanes a clock per scheduler, so
//            64 exponentials a thread are 512 cycles of it per key block at hdim 128);
//   kLazy  — O and l are rescaled only when a row's max grows by more than kLazy (log2 units):
//            until then P is computed against the stale max (so P <= 2^kLazy, exact after the
//            final O / l), and a warp whose rows all kept their max skips the 64 FMULs of O.
#pragma once
#include <cmath>
#include <cstdint>

#include "common/softmax_state.h"
#include "cuda/attention/sm80/tensor_ops.h"

namespace flashkit::cuda::attn::sm90 {

// 2^x for x <= 0 on the FMA/ALU pipes: x = j + f with j = floor(x), f in [0, 1); 2^f from a
// degree-3 polynomial (max relative error 7.5e-5, a relative-error minimax fit, below the 2^-8 / 2^-11 rounding
// P gets on its way to the P V product), 2^j added to the exponent field. x is clamped at
// -126: 2^f's polynomial is 0.99993 at f = 0, whose exponent field (126) plus j must stay >= 0
// (at -127 it wrapped into the sign bit: NaN). The smallest results are subnormals that the FTZ
// arithmetic downstream (the row sum) treats as 0, so masked scores (-inf) still give P ~ 0.
__device__ __forceinline__ float exp2_poly(float x) {
  constexpr float kMagic = 12582912.f;  // 1.5 * 2^23: adding it rounds to an integer in the low bits
  x = fmaxf(x, -126.f);
  const float t = __fadd_rd(x, kMagic);  // kMagic + floor(x)
  const float f = x - (t - kMagic);      // in [0, 1)
  float p = fmaf(fmaf(fmaf(7.8024194e-2f, f, 2.2606722e-1f), f, 6.9583374e-1f), f, 9.9992520e-1f);
  // (bits(t) << 23) is floor(x) << 23 modulo 2^32 (kMagic's own bits shift out).
  return __int_as_float(__float_as_int(p) + int(uint32_t(__float_as_int(t)) << 23));
}

template <int kRows_, bool kTree = false, int kPoly = 0, int kLazy = 0>
struct FwdSoftmax {
  static constexpr int kRows = kRows_;
  static_assert(kPoly >= 0 && kPoly <= 8, "kPoly: columns of every 8");
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
        const float x = s(r, c) * scale_log2 - m_use;
        s(r, c) = (c & 7) < kPoly ? exp2_poly(x) : exp2f(x);
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
