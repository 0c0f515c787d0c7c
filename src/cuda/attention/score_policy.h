// Score policies of the attention mainloops (sm80/fwd_mainloop.h, sm80/bwd_mainloop.h): which
// (query block, key block) tiles can be skipped, which need element masks, and what happens to a
// score tile between S = Q K^T and the softmax (forward) or P / dS (backward). PlainScores<causal>
// is the fast path (mask only); GeneralScores handles sliding window + softcap + ALiBi with
// runtime parameters (causal folds into the window), in the order include/flashkit/attention.h
// defines: softcap, then ALiBi, then masks. Mirrors src/cpu/attention_policy.h.
#pragma once
#include <cmath>
#include <cstdint>
#include <cute/tensor.hpp>

#include "cuda/attention/params.h"
#include "cuda/attention/seqlen.h"

namespace flashkit::cuda::attn {

// Tile ranges [begin, end) of blocks one block of the other pass's dimension touches.
struct BlockRange {
  int begin, end;
};

// tanh as 1 - 2 / (e^{2|x|} + 1): absolute error ~1e-7 everywhere, which is what the softmax
// sees (softcap * t). The build's --use_fast_math turns tanhf into tanh.approx.f32, whose 2^-11
// relative error would shift a score by up to 5e-4 * softcap (0.015 at Gemma's softcap 30).
__device__ __forceinline__ float tanh_abs_accurate(float x) {
  const float e = __expf(2.f * fabsf(x));  // inf past |x| ~ 44: the quotient is then 0, t = 1
  return copysignf(1.f - __fdividef(2.f, e + 1.f), x);
}

__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
__device__ __forceinline__ int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

template <bool kCausal_>
struct PlainScores {
  static constexpr bool kCausal = kCausal_;
  static constexpr bool kFoldsScale = false;  // the softmax applies the scale
  struct Params {};
  static Params to_params(const AttnArguments&) { return {}; }

  int seqlen_q, seqlen_k, diag;  // diag = sk - sq: row i's diagonal key is i + diag
  __device__ __forceinline__ PlainScores(const Params&, const SeqBounds& sb, int, int)
      : seqlen_q(sb.seqlen_q), seqlen_k(sb.seqlen_k), diag(sb.seqlen_k - sb.seqlen_q) {}

  // Forward: key blocks of query block m, and the first one that needs an element mask (the
  // causal diagonal or the partial last block); blocks run last to first so masked ones come first.
  template <int kBlockM, int kBlockN>
  __device__ __forceinline__ BlockRange key_blocks(int m_block) const {
    int n_blocks = ceil_div(seqlen_k, kBlockN);
    if constexpr (!kCausal) return {0, n_blocks};
    int last_key = min(m_block * kBlockM + kBlockM, seqlen_q) - 1 + diag;  // of the last row
    return {0, last_key < 0 ? 0 : min(n_blocks, last_key / kBlockN + 1)};
  }
  template <int kBlockM, int kBlockN>
  __device__ __forceinline__ bool fwd_needs_mask(int m_block, int n_block) const {
    int n_blocks = ceil_div(seqlen_k, kBlockN);
    int n_mask = seqlen_k % kBlockN ? n_blocks - 1 : n_blocks;
    if constexpr (kCausal) {
      int first_row_keys = m_block * kBlockM + diag + 1;  // keys the block's first row sees
      n_mask = min(n_mask, first_row_keys <= 0 ? 0 : first_row_keys / kBlockN);
    }
    return n_block >= n_mask;
  }

  // s: raw scores q.k of the tile at (row0, col0) as (rows, cols); coord gives each element's
  // (row, col) within the tile. Masked scores become -inf; the softmax scales the rest.
  template <class S, class Coord>
  __device__ __forceinline__ void fwd_scores(S& s, const Coord& coord, int row0, int col0,
                                             bool mask, float) const {
    if (!mask) return;
    CUTE_UNROLL
    for (int i = 0; i < cute::size(s); ++i) {
      int row = row0 + cute::get<0>(coord(i));
      int col = col0 + cute::get<1>(coord(i));
      if (col >= seqlen_k || (kCausal && col > row + diag)) s(i) = -INFINITY;
    }
  }

  // Backward: query blocks touching key block n (bottom-right causal: row i sees keys
  // j <= i + diag). Their start is non-decreasing in n and they always end at the last block, so
  // the key blocks adding into any dQ block are a prefix 0..J (first_key_block = 0).
  template <int kBlockM, int kBlockN>
  __device__ __forceinline__ BlockRange query_blocks(int n_block) const {
    int m_end = ceil_div(seqlen_q, kBlockM);
    if constexpr (!kCausal) return {0, m_end};
    int first_row = n_block * kBlockN - diag;
    return {first_row <= 0 ? 0 : first_row / kBlockM, m_end};
  }
  template <int kBlockM, int kBlockN>
  __device__ __forceinline__ int first_key_block(int) const {
    return 0;
  }
  template <int kBlockM, int kBlockN>
  __device__ __forceinline__ bool bwd_needs_mask(int m_block, int n_block) const {
    return (n_block + 1) * kBlockN > seqlen_k ||
           (kCausal && (n_block + 1) * kBlockN - 1 > m_block * kBlockM + diag);
  }

  // s: raw scores -> P = exp(scale s - lse); dp: dP -> dS = P (dP - D), the gradient w.r.t. the
  // scaled score. lse_log2 / d_row hold each of the thread's rows' LSE (log2 units) and D.
  template <class S, class Coord, class Rows>
  __device__ __forceinline__ void bwd_probs(S& s, S& dp, const Coord& coord, int row0, int col0,
                                            bool mask, float, float scale_log2,
                                            const Rows& lse_log2, const Rows& d_row) const {
    CUTE_UNROLL
    for (int r = 0; r < cute::size<0>(s); ++r) {
      CUTE_UNROLL
      for (int c = 0; c < cute::size<1>(s); ++c) {
        float x = s(r, c) * scale_log2 - lse_log2[r];
        if (mask) {
          int row = row0 + cute::get<0>(coord(r, c));
          int col = col0 + cute::get<1>(coord(r, c));
          if (col >= seqlen_k || (kCausal && col > row + diag)) x = -INFINITY;
        }
        float pr = exp2f(x);
        s(r, c) = pr;
        dp(r, c) = pr * (dp(r, c) - d_row[r]);
      }
    }
  }
};

// Sliding window + softcap + ALiBi, each possibly off, with runtime parameters. Query i sees keys
// [i + diag - left, i + diag + right] (bottom-right aligned; causal caps right at 0).
struct GeneralScores {
  static constexpr bool kCausal = false;     // causal is window_right = 0 here
  static constexpr bool kFoldsScale = true;  // fwd_scores returns final scores; softmax scale 1
  struct Params {
    int window_left, window_right;  // -1: unbounded (causal already folded into right)
    float softcap;                  // 0: off
    const float* alibi;             // null: off
    int64_t alibi_batch_stride, alibi_head_stride;
  };
  static Params to_params(const AttnArguments& a) {
    const int right = a.causal ? 0 : a.window_right;  // causal caps the window at the diagonal
    return {a.window_left, right, a.softcap, a.alibi_slopes, a.alibi_batch_stride,
            a.alibi_head_stride};
  }

  // 32-bit fields (widened where summed): this object stays live through the key loop, next to
  // the O accumulator at the register limit.
  static constexpr int kUnbounded = INT32_MAX;
  int seqlen_q, seqlen_k;
  int diag, left, right;
  float softcap, inv_softcap, slope;

  __device__ __forceinline__ GeneralScores(const Params& p, const SeqBounds& sb, int b, int h)
      : seqlen_q(sb.seqlen_q),
        seqlen_k(sb.seqlen_k),
        diag(sb.seqlen_k - sb.seqlen_q),
        left(p.window_left < 0 ? kUnbounded : p.window_left),
        right(p.window_right < 0 ? kUnbounded : p.window_right),
        softcap(p.softcap),
        inv_softcap(p.softcap > 0.f ? 1.f / p.softcap : 0.f),
        slope(p.alibi ? p.alibi[b * p.alibi_batch_stride + h * p.alibi_head_stride] : 0.f) {}

  // Visible (row, key) pairs with row in [r0, r1] and key in [c0, c1] exist iff the key span
  // [r0 + diag - left, r1 + diag + right] (contiguous: every row's window holds >= 1 key) meets
  // [c0, c1]; rows and keys clamped to the sequence. The forward and backward ranges below both
  // use this one predicate, so the deterministic dQ order (first_key_block) matches the loops.
  template <int kBlockM, int kBlockN>
  __device__ __forceinline__ BlockRange key_blocks(int m_block) const {
    const int64_t r0 = int64_t(m_block) * kBlockM;
    const int64_t r1 = min64(r0 + kBlockM, seqlen_q) - 1;
    const int64_t first = max64(0, r0 + diag - left);
    const int64_t last = min64(seqlen_k - 1, r1 + diag + right);
    if (first > last) return {0, 0};
    return {int(first / kBlockN), int(last / kBlockN) + 1};
  }
  template <int kBlockM, int kBlockN>
  __device__ __forceinline__ BlockRange query_blocks(int n_block) const {
    const int64_t c0 = int64_t(n_block) * kBlockN;
    const int64_t c1 = min64(c0 + kBlockN, seqlen_k) - 1;
    const int64_t first = max64(0, c0 - diag - right);
    const int64_t last = min64(seqlen_q - 1, c1 - diag + left);
    if (first > last) return {0, 0};
    return {int(first / kBlockM), int(last / kBlockM) + 1};
  }
  // The first key block adding into dQ block m: the key blocks of m are contiguous, so key block
  // n is the (n - first)-th to add in deterministic mode.
  template <int kBlockM, int kBlockN>
  __device__ __forceinline__ int first_key_block(int m_block) const {
    return key_blocks<kBlockM, kBlockN>(m_block).begin;
  }

  // A tile needs no mask when every valid row sees every key of it and no key is past the end.
  template <int kBlockM, int kBlockN>
  __device__ __forceinline__ bool needs_mask(int m_block, int n_block) const {
    const int64_t r0 = int64_t(m_block) * kBlockM;
    const int64_t r1 = min64(r0 + kBlockM, seqlen_q) - 1;
    const int64_t c0 = int64_t(n_block) * kBlockN, c1 = c0 + kBlockN - 1;
    return !(r1 + diag - left <= c0 && c1 <= r0 + diag + right && c1 < seqlen_k);
  }
  template <int kBlockM, int kBlockN>
  __device__ __forceinline__ bool fwd_needs_mask(int m_block, int n_block) const {
    return needs_mask<kBlockM, kBlockN>(m_block, n_block);
  }
  template <int kBlockM, int kBlockN>
  __device__ __forceinline__ bool bwd_needs_mask(int m_block, int n_block) const {
    return needs_mask<kBlockM, kBlockN>(m_block, n_block);
  }

  // Row `row`'s visible keys as tile columns [lo, hi] (the tile starts at key col0), clamped to
  // [0, kClamp] / [-1, kClamp] (kClamp > any tile width) so the per-element compares stay in int.
  __device__ __forceinline__ void visible_cols(int row, int col0, int& lo, int& hi) const {
    constexpr int64_t kClamp = 1 << 20;
    const int64_t l = int64_t(row) + diag - left - col0;
    const int64_t h = min64(int64_t(row) + diag + right, int64_t(seqlen_k) - 1) - col0;
    lo = int(l < 0 ? 0 : (l > kClamp ? kClamp : l));
    hi = int(h < -1 ? -1 : (h > kClamp ? kClamp : h));
  }

  // scale * q.k -> softcap -> ALiBi (-slope |i + diag - j|). Returns tanh of the capped argument
  // in `t` (the backward's chain factor 1 - t^2), 0 without softcap.
  __device__ __forceinline__ float modify(float qk, float scale, int dist, float& t) const {
    float x = qk * scale;
    t = 0.f;
    if (softcap > 0.f) {
      t = tanh_abs_accurate(x * inv_softcap);
      x = softcap * t;
    }
    return x - slope * fabsf(float(dist));
  }

  // s: raw scores q.k -> final scores (scale, softcap, ALiBi, then -inf where masked). One pass
  // per modifier behind a uniform branch: short live ranges next to the O accumulator.
  template <class S, class Coord>
  __device__ __forceinline__ void fwd_scores(S& s, const Coord& coord, int row0, int col0,
                                             bool mask, float scale) const {
    if (softcap > 0.f) {
      const float in_scale = scale * inv_softcap;
      CUTE_UNROLL
      for (int i = 0; i < cute::size(s); ++i) s(i) = softcap * tanh_abs_accurate(s(i) * in_scale);
    } else {
      CUTE_UNROLL
      for (int i = 0; i < cute::size(s); ++i) s(i) *= scale;
    }
    if (slope != 0.f) {
      CUTE_UNROLL
      for (int r = 0; r < cute::size<0>(s); ++r) {
        const int dist0 = int(int64_t(row0 + cute::get<0>(coord(r, 0))) + diag - col0);
        CUTE_UNROLL
        for (int c = 0; c < cute::size<1>(s); ++c)
          s(r, c) -= slope * fabsf(float(dist0 - cute::get<1>(coord(r, c))));
      }
    }
    if (!mask) return;
    CUTE_UNROLL
    for (int r = 0; r < cute::size<0>(s); ++r) {
      int lo, hi;
      visible_cols(row0 + cute::get<0>(coord(r, 0)), col0, lo, hi);
      CUTE_UNROLL
      for (int c = 0; c < cute::size<1>(s); ++c) {
        const int col = cute::get<1>(coord(r, c));
        if (col < lo || col > hi) s(r, c) = -INFINITY;
      }
    }
  }

  // Backward: s: raw scores -> P = exp(final score - lse); dp: dP -> dS = P (dP - D) (1 - t^2),
  // the gradient w.r.t. scale * q.k (ALiBi is a constant shift; softcap's derivative is 1 - t^2).
  template <class S, class Coord, class Rows>
  __device__ __forceinline__ void bwd_probs(S& s, S& dp, const Coord& coord, int row0, int col0,
                                            bool mask, float scale, float,
                                            const Rows& lse_log2, const Rows& d_row) const {
    CUTE_UNROLL
    for (int r = 0; r < cute::size<0>(s); ++r) {
      const int row = row0 + cute::get<0>(coord(r, 0));
      const int dist0 = int(int64_t(row) + diag - col0);
      int lo = 0, hi = 0;
      if (mask) visible_cols(row, col0, lo, hi);
      CUTE_UNROLL
      for (int c = 0; c < cute::size<1>(s); ++c) {
        const int col = cute::get<1>(coord(r, c));
        float t;
        float x = modify(s(r, c), scale, dist0 - col, t) * float(M_LOG2E) - lse_log2[r];
        if (mask && (col < lo || col > hi)) x = -INFINITY;
        const float pr = exp2f(x);
        s(r, c) = pr;
        dp(r, c) = pr * (dp(r, c) - d_row[r]) * (1.f - t * t);
      }
    }
  }
};

}  // namespace flashkit::cuda::attn
