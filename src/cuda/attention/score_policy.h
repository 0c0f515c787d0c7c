// Score policies of the attention mainloops (sm80/fwd_mainloop.h, sm80/bwd_mainloop.h, and the
// Hopper forward sm90/fwd_mainloop.h, whose wgmma accumulator repeats m16n8's rows and columns):
// which (query block, key block) tiles can be skipped, which need element masks, and what happens
// to a score tile between S = Q K^T and the softmax (forward) or P / dS (backward), dropout included.
// PlainScores<causal> is the fast path (mask only); GeneralScores<kMods> adds the sliding window
// (run time, causal folded in) and the compile-time modifiers softcap, ALiBi, dropout and block
// mask, in the order include/flashkit/attention.h defines: softcap, ALiBi, masks, then dropout on
// P. Mirrors src/cpu/attention_policy.h.
#pragma once
#include <cmath>
#include <cstdint>
#include <cute/tensor.hpp>
#include <type_traits>

#include "common/philox.h"
#include "common/softmax_state.h"
#include "cuda/attention/kernels.h"
#include "cuda/attention/params.h"
#include "cuda/attention/seqlen.h"
#include "cuda/common/fast_tanh.h"

namespace flashkit::cuda::attn {

// Tile ranges [begin, end) of blocks one block of the other pass's dimension touches.
struct BlockRange {
  int begin, end;
};

// A walk's memory of its last block-mask ballot: bit k of `bits` says whether the block (or
// step) k positions past `base` in the walk's direction is live (bench/NOTES-attention.md
// "Block-sparse v4"). Policies without a block mask never touch it.
struct LiveCursor {
  int base = -(1 << 30);  // far from every position: the first lookup ballots
  unsigned bits = 0;
};

// The first of the positions i, i + kDir, i + 2 kDir, ... within the walk's range for which
// live(position) holds, else the position just past the range: up walks (kDir 1) cover
// [i, bound) and return bound when none is live, down walks (kDir -1) cover [bound, i] and return
// bound - 1. One warp ballot (a mask byte a lane) per 32 positions, remembered in `c`, so the
// positions in between cost a shift and a find-first-set. Every lane of the warp calls it.
// (Not unrolled: a 255-register kernel.)
template <int kDir, class Live>
__device__ __forceinline__ int next_live_in(int i, int bound, LiveCursor& c, const Live& live) {
  static_assert(kDir == 1 || kDir == -1, "a walk steps one position up or down");
#pragma unroll 1
  while (kDir > 0 ? i < bound : i >= bound) {
    if (kDir > 0 ? i < c.base || i >= c.base + 32 : i > c.base || i <= c.base - 32) {  // not kept
      const int j = i + kDir * int(threadIdx.x % 32);
      c.base = i;
      c.bits = __ballot_sync(~0u, (kDir > 0 ? j < bound : j >= bound) && live(j));
    }
    const unsigned rest = c.bits >> (kDir > 0 ? i - c.base : c.base - i);  // bit 0: position i
    if (rest) return kDir > 0 ? i + (__ffs(rest) - 1) : i - (__ffs(rest) - 1);
    i = c.base + kDir * 32;
  }
  return kDir > 0 ? bound : bound - 1;
}

__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
__device__ __forceinline__ int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

// One stage of a transpose of kWidth-bit fields across lanes, repeated in every kGroup-bit group
// of x (16: halves, 8: bytes; the dropout bit gathering below): lane index `idx` and its partner
// idx ^ kM (lane ^ lane_xor) swap the fields whose index has bit kM unlike their own index. After
// the stages kM = 1, 2, .. of a group of n lanes (n fields a group), field f of lane l holds what
// field l of lane f held.
template <int kWidth, int kM, int kGroup = 16>
__device__ __forceinline__ uint32_t transpose_fields(uint32_t x, int idx, int lane_xor) {
  static_assert(kGroup == 8 || kGroup == 16, "fields transposed within bytes or halves");
  constexpr int kShift = kM * kWidth;
  constexpr uint32_t kLowGroup = [] {  // fields with (f & kM) == 0 of one group
    uint32_t m = 0;
    for (int f = 0; f < kGroup / kWidth; ++f)
      if (!(f & kM)) m |= ((1u << kWidth) - 1) << (f * kWidth);
    return m;
  }();
  constexpr uint32_t kLow = kLowGroup * (kGroup == 16 ? 0x00010001u : 0x01010101u);
  const bool upper = idx & kM;
  const uint32_t got = __shfl_xor_sync(0xffffffffu, upper ? x << kShift : x >> kShift, lane_xor);
  return upper ? (x & ~kLow) | (got & kLow) : (x & kLow) | (got & ~kLow);
}

template <bool kCausal_>
struct PlainScores {
  static constexpr bool kCausal = kCausal_;
  static constexpr bool kPlain = true;        // masks only (tile shapes may assume it)
  static constexpr bool kSlimScores = true;   // no per-score modifier (see GeneralScores)
  static constexpr bool kRowOffsets = false;  // see GeneralScores::fwd_scores_rows
  static constexpr bool kNarrowKeys = false;  // forward key steps: the tile config's full width
  static constexpr bool kHasBlockMask = false;
  static constexpr bool kBoundedLogits = false;  // see GeneralScores::fwd_max_floor_log2
  struct Params {};
  static Params to_params(const AttnArguments&) { return {}; }

  int seqlen_q, seqlen_k, diag;  // diag = sk - sq: row i's diagonal key is i + diag
  __device__ __forceinline__ PlainScores(const Params&, const SeqBounds& sb, int, int, float)
      : seqlen_q(sb.seqlen_q), seqlen_k(sb.seqlen_k), diag(sb.seqlen_k - sb.seqlen_q) {}

  // Every tile in the ranges below is computed; no dropout.
  template <int kBlockM, int kBlockN>
  __device__ __forceinline__ int prev_live(int, int n, int, LiveCursor&) const {
    return n;
  }
  template <int kBlockM, int kBlockN, class MAt>
  __device__ __forceinline__ int next_live_query(int i, int, const MAt&, int, LiveCursor&) const {
    return i;
  }
  template <int kBlockM, int kBlockN>
  __device__ __forceinline__ bool live(int, int) const {
    return true;
  }
  template <class S, class Coord>
  __device__ __forceinline__ void fwd_dropout(S&, const Coord&, int, int) const {}
  __device__ __forceinline__ float fwd_out_scale() const { return 1.f; }
  __device__ __forceinline__ float fwd_max_floor_log2() const { return INFINITY; }
  __device__ __forceinline__ float fwd_unit_scale() const { return 1.f; }

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

  // The forward's key order: loop position n computes key block n (last to first).
  template <int kBlockM, int kBlockN>
  __device__ __forceinline__ int key_order(int, const BlockRange&, int n) const {
    return n;
  }

  // s: raw scores q.k of the tile at (row0, col0) as (rows, cols); coord gives each element's
  // (row, col) within the tile. Masked scores become -inf; the softmax scales the rest (kUnit: see
  // GeneralScores).
  template <bool kUnit = false, class S, class Coord>
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
  // the key blocks adding into any dQ block are a prefix 0..J: key block n is the n-th to add.
  template <int kBlockM, int kBlockN>
  __device__ __forceinline__ BlockRange query_blocks(int n_block) const {
    int m_end = ceil_div(seqlen_q, kBlockM);
    if constexpr (!kCausal) return {0, m_end};
    int first_row = n_block * kBlockN - diag;
    return {first_row <= 0 ? 0 : first_row / kBlockM, m_end};
  }
  template <int kBlockM, int kBlockN>
  __device__ __forceinline__ int dq_turn(int, int n_block) const {
    return n_block;
  }
  template <int kBlockM, int kBlockN>
  __device__ __forceinline__ bool bwd_needs_mask(int m_block, int n_block) const {
    return (n_block + 1) * kBlockN > seqlen_k ||
           (kCausal && (n_block + 1) * kBlockN - 1 > m_block * kBlockM + diag);
  }

  // s: raw scores -> P = exp(scale s - lse); dp: dP -> dS = P (dP - D), the gradient w.r.t. the
  // scaled score. lse_log2 / d_row hold each of the thread's rows' LSE (log2 units) and D. The
  // two halves are also called apart (the sm90 backward overlaps each with a GEMM).
  // kKeysAlongM: the tile is held transposed (GeneralScores::keep_bits_t; unused here).
  static constexpr bool kSplitProbs = true;  // bwd_p / bwd_ds may run apart
  struct NoBits {};                          // what bwd_p hands bwd_ds: nothing
  template <bool kKeysAlongM = false, class S, class Coord, class Rows>
  __device__ __forceinline__ void bwd_probs(S& s, S& dp, const Coord& coord, int row0, int col0,
                                            bool mask, float, float scale_log2,
                                            const Rows& lse_log2, const Rows& d_row) const {
    bwd_p(s, coord, row0, col0, mask, scale_log2, lse_log2);
    bwd_ds(s, dp, d_row);
  }
  template <bool kKeysAlongM = false, class S, class Coord, class Rows>
  __device__ __forceinline__ NoBits bwd_p(S& s, const Coord& coord, int row0, int col0, bool mask,
                                          float scale_log2, const Rows& lse_log2) const {
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
        s(r, c) = exp2f(x);
      }
    }
    return {};
  }
  template <bool kKeysAlongM = false, class S, class Coord, class Rows>
  __device__ __forceinline__ void bwd_ds(S& p, S& dp, const Coord&, const Rows& d_row,
                                         NoBits) const {
    bwd_ds(p, dp, d_row);
  }
  template <class S, class Rows>
  static __device__ __forceinline__ void bwd_ds(const S& p, S& dp, const Rows& d_row) {
    CUTE_UNROLL
    for (int r = 0; r < cute::size<0>(p); ++r) {
      CUTE_UNROLL
      for (int c = 0; c < cute::size<1>(p); ++c) dp(r, c) = p(r, c) * (dp(r, c) - d_row[r]);
    }
  }
};


// Sliding window (+ causal folded in) and the modifiers in kMods (kernels.h's mods:: bits; each
// one alone or all together are compiled, the all-in-one policy tests each at run time). The
// window is always a run-time option: it costs nothing past the edge tiles. Query i sees keys
// [i + diag - left, i + diag + right] (bottom-right aligned; causal caps right at 0). Scores stay
// in the plain path's units (the softmax multiplies by scale): softcap returns
// (softcap / scale) tanh(scale s / softcap), ALiBi subtracts (slope / scale) |i + diag - j|.
template <unsigned kMods>
struct GeneralScores {
  static constexpr bool kCausal = false;  // causal is window_right = 0 here
  static constexpr bool kPlain = false;
  // Per-score state small enough for hdim 64's three-warpgroup forward tile (tile_config.h):
  // masks only, softcap alone (its tanh needs no state across scores) or ALiBi alone.
  static constexpr bool kSlimScores =
      kMods == 0 || kMods == mods::kSoftcap || kMods == mods::kAlibi;
  static constexpr bool kHasSoftcap = kMods & mods::kSoftcap, kHasAlibi = kMods & mods::kAlibi;
  static constexpr bool kHasDropout = kMods & mods::kDropout;
  static constexpr bool kHasBlockMask = kMods & mods::kBlockSparse;
  static constexpr bool kRowOffsets = kHasAlibi;  // the sm90 forward calls fwd_scores_rows
  // Softcap alone bounds every scaled score (see fwd_max_floor_log2).
  static constexpr bool kBoundedLogits = kMods == mods::kSoftcap;
  // Forward key steps of half the plain width where the modifiers' registers would spill
  // (sm80/fwd_launch.h; ptxas numbers in bench/NOTES-attention.md).
  static constexpr bool kNarrowKeys =
      kMods == mods::kSoftcap || kMods == mods::kDropout || kMods == mods::kAll;
  struct Params {
    int window_left, window_right;  // -1: unbounded (causal already folded into right)
    float softcap;                  // 0: off
    const float* alibi;             // null: off
    int64_t alibi_batch_stride, alibi_head_stride;
    const uint8_t* block_mask;  // null: off; u8 [b|1, h|1, nq, nk] with these element strides
    int64_t bm_batch_stride, bm_head_stride;
    int bm_row_stride, bm_col_stride, bm_block_q, bm_block_k;
    uint64_t seed, offset;  // dropout (common/philox.h); threshold 0: off
    uint32_t drop_threshold;
    float keep_scale;  // 256 / (256 - threshold): 1 / (1 - p) of the quantised p
    int heads;
  };
  static Params to_params(const AttnArguments& a) {
    const int right = a.causal ? 0 : a.window_right;  // causal caps the window at the diagonal
    return {a.window_left,      right,
            a.softcap,          a.alibi_slopes,
            a.alibi_batch_stride, a.alibi_head_stride,
            a.block_mask,       a.bm_batch_stride,
            a.bm_head_stride,   int(a.bm_row_stride),
            int(a.bm_col_stride), a.bm_block_q,
            a.bm_block_k,       a.dropout_seed,
            a.dropout_offset,   a.dropout_threshold,
            a.dropout_keep_scale, a.heads};
  }

  // 32-bit fields (widened where summed): this object stays live through the key loop, next to
  // the O accumulator at the register limit. Fields of modifiers not in kMods are never read.
  static constexpr int kUnbounded = INT32_MAX;
  int seqlen_q, seqlen_k;
  int diag, left, right;
  float cap_in, cap_out;  // scale / softcap and softcap / scale (cap_in 0: off)
  float slope;            // ALiBi slope / scale (0: off)
  const uint8_t* bmask;   // this (batch, head)'s block grid (null: off)
  const Params* p;
  int bh;  // batch * heads + head: the dropout counter's third word

  __device__ __forceinline__ GeneralScores(const Params& pr, const SeqBounds& sb, int b, int h,
                                           float scale)
      : seqlen_q(sb.seqlen_q),
        seqlen_k(sb.seqlen_k),
        diag(sb.seqlen_k - sb.seqlen_q),
        left(pr.window_left < 0 ? kUnbounded : pr.window_left),
        right(pr.window_right < 0 ? kUnbounded : pr.window_right),
        cap_in(kHasSoftcap && pr.softcap > 0.f ? scale / pr.softcap : 0.f),
        cap_out(kHasSoftcap ? pr.softcap / scale : 0.f),
        slope(kHasAlibi && pr.alibi
                  ? pr.alibi[b * pr.alibi_batch_stride + h * pr.alibi_head_stride] / scale
                  : 0.f),
        bmask(kHasBlockMask && pr.block_mask
                  ? pr.block_mask + b * pr.bm_batch_stride + h * pr.bm_head_stride
                  : nullptr),
        p(&pr),
        bh(b * pr.heads + h) {}

  __device__ __forceinline__ bool dropout_on() const {
    return kHasDropout && p->drop_threshold != 0u;
  }

  // Visible (row, key) pairs with row in [r0, r1] and key in [c0, c1] exist iff the key span
  // [r0 + diag - left, r1 + diag + right] (contiguous: every row's window holds >= 1 key) meets
  // [c0, c1]; rows and keys clamped to the sequence. The forward and backward ranges below both
  // use this one predicate, so the deterministic dQ order (dq_turn) matches the loops.
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

  // False when the block mask drops tile (m, n): both passes then skip it entirely. On CUDA the
  // mask's blocks are multiples of 128 rows and columns (dispatch.cu checks), so every kernel tile
  // lies inside one mask block: one byte decides it, and a kept tile needs no element mask.
  template <int kBlockM, int kBlockN>
  __device__ __forceinline__ bool live(int m_block, int n_block) const {
    if constexpr (!kHasBlockMask) return true;
    return !bmask || bmask[(m_block * kBlockM / p->bm_block_q) * p->bm_row_stride +
                           (n_block * kBlockN / p->bm_block_k) * p->bm_col_stride];
  }
  // The last live key block <= n (>= begin), or begin - 1 when none is (next_live_in: one
  // ballot of 32 mask bytes per 32 blocks of the walk down the row, kept in `c`).
  template <int kBlockM, int kBlockN>
  __device__ __forceinline__ int prev_live(int m_block, int n, int begin, LiveCursor& c) const {
    if constexpr (kHasBlockMask) {
      if (!bmask) return n;
      return next_live_in<-1>(n, begin, c,
                              [&](int j) { return live<kBlockM, kBlockN>(m_block, j); });
    }
    return n;
  }
  // Backward: the first step >= i (of count) whose query block m_at(step) is live for key block
  // n, count when none is (the same walk, up the column's steps).
  template <int kBlockM, int kBlockN, class MAt>
  __device__ __forceinline__ int next_live_query(int i, int count, const MAt& m_at, int n_block,
                                                 LiveCursor& c) const {
    if constexpr (kHasBlockMask) {
      if (!bmask) return i;
      return next_live_in<1>(i, count, c,
                             [&](int j) { return live<kBlockM, kBlockN>(m_at(j), n_block); });
    }
    return i;
  }
  // Deterministic dQ: key block n is the turn-th to add into dQ block m (live blocks of m's
  // contiguous key range, in order).
  template <int kBlockM, int kBlockN>
  __device__ __forceinline__ int dq_turn(int m_block, int n_block) const {
    const int first = key_blocks<kBlockM, kBlockN>(m_block).begin;
    if constexpr (!kHasBlockMask) return n_block - first;
    int turn = 0;
#pragma unroll 1
    for (int n = first; n < n_block; ++n) turn += live<kBlockM, kBlockN>(m_block, n);
    return turn;
  }

  // A tile needs element masks when a valid row misses a key of it (window edge, key past the end).
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

  // The forward's key order (loop positions n run kr.end - 1 down to kr.begin). Plain: block n.
  // ALiBi (without a block mask, whose skip scan walks blocks last to first): from the block of
  // the query block's diagonal outward, rightwards then leftwards, so that each row meets its
  // largest bias (0, on the diagonal) first and later blocks rarely raise its max; last to first,
  // the blocks right of the diagonal raised it by slope * 128 a block, past the lazy rescale's
  // 2^8 at slopes over ~0.04, so O was rescaled on most of them.
  template <int kBlockM, int kBlockN>
  __device__ __forceinline__ int key_order(int m_block, const BlockRange& kr, int n) const {
    if constexpr (kHasAlibi && !kHasBlockMask) {
      if (slope == 0.f) return n;
      const int64_t diag_key = int64_t(m_block) * kBlockM + diag;  // the first row's diagonal
      const int d = int(min64(max64(diag_key / kBlockN, kr.begin), kr.end - 1));
      const int p = kr.end - 1 - n;  // 0 for the first block computed
      return p < kr.end - d ? d + p : d - 1 - (p - (kr.end - d));
    } else {
      return n;
    }
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

  // -inf where the window hides (row, col).
  template <class S, class Coord>
  __device__ __forceinline__ void apply_masks(S& s, const Coord& coord, int row0, int col0) const {
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

  // s: raw scores q.k -> softcap -> ALiBi -> masks, in the softmax's unscaled units. One pass per
  // modifier: short live ranges next to the O accumulator. kUnit (softcap alone, the sm90
  // forward): softcap leaves t = tanh(scale s / softcap) and the softmax multiplies its scale by
  // fwd_unit_scale(), one FMUL a score fewer.
  template <bool kUnit = false, class S, class Coord>
  __device__ __forceinline__ void fwd_scores(S& s, const Coord& coord, int row0, int col0,
                                             bool mask, float) const {
    static_assert(!kUnit || kBoundedLogits, "unit scores are softcap's alone");
    softcap_scores<kUnit>(s);
    if (kHasAlibi && slope != 0.f) alibi_per_element(s, coord, row0, col0);
    if (mask) apply_masks(s, coord, row0, col0);
  }
  // With softcap alone every scaled score is softcap * t, |t| <= 1 (masks only add -inf), so the
  // forward softmax may keep the max of a tile's first key block for all of them
  // (OnlineSoftmax::update_bounded; bench/NOTES-attention.md "Softcap v10"): the floor of that
  // max in log2 units, or +inf where the bound gives none (softcap off, or > 55.4: the running
  // max then). ALiBi's bias is unbounded below, so softcap + ALiBi keeps the running max.
  __device__ __forceinline__ float fwd_max_floor_log2() const {
    if constexpr (kBoundedLogits) return softcap_max_floor_log2(p->softcap);
    return INFINITY;
  }
  __device__ __forceinline__ float fwd_unit_scale() const {
    return kHasSoftcap && cap_in != 0.f ? cap_out : 1.f;
  }
  template <bool kUnit = false, class S>
  __device__ __forceinline__ void softcap_scores(S& s) const {
    if (kHasSoftcap && cap_in != 0.f) {
      CUTE_UNROLL
      for (int i = 0; i < cute::size(s); ++i)
        s(i) = kUnit ? tanh_fast(s(i) * cap_in) : cap_out * tanh_fast(s(i) * cap_in);
    }
  }

  // ALiBi, -slope |dist| with dist = row + diag - col, per score. Distances as this thread's
  // first column's plus a compile-time column offset: an FADD and an FFMA per score (no I2F,
  // which issues at the MUFU rate like the softmax's exp).
  template <class S, class Coord>
  __device__ __forceinline__ void alibi_per_element(S& s, const Coord& coord, int row0,
                                                    int col0) const {
    const int col_base = cute::get<1>(coord(0, 0));
    CUTE_UNROLL
    for (int r = 0; r < cute::size<0>(s); ++r) {
      const float dist0 = float(row0 + cute::get<0>(coord(r, 0)) + diag - col0 - col_base);
      CUTE_UNROLL
      for (int c = 0; c < cute::size<1>(s); ++c)
        s(r, c) -= slope * fabsf(dist0 - float(cute::get<1>(coord(r, c)) - col_base));
    }
  }

  // fwd_scores for a softmax that takes a per-row offset (OnlineSoftmax::update_stats with
  // off): scores + off[r] are the modified scores. On an unmasked tile that lies wholly on one
  // side of the diagonal (or whose window keeps only that side visible, e.g. causal), ALiBi's
  // |dist| is linear: -slope |D_r - k| = sgn slope k - sgn slope D_r with D_r the distance at the
  // thread's first column and k a compile-time column offset, so each score takes one FFMA (an
  // immediate k) and the row part goes to off[r], which the softmax adds to the row max and folds
  // into its exp2 FFMA. Masked tiles and tiles crossing the diagonal take the per-element form
  // with the masks (off 0): one tile-uniform branch, the plain loop's shape (masks or not).
  template <int kBlockM, int kBlockN, class S, class Coord, int kR>
  __device__ __forceinline__ void fwd_scores_rows(S& s, const Coord& coord, int row0, int col0,
                                                  bool mask, float scale,
                                                  float (&off)[kR]) const {
    static_assert(kR == decltype(cute::size<0>(s))::value, "one offset per row of the tile");
    CUTE_UNROLL
    for (int r = 0; r < kR; ++r) off[r] = 0.f;
    if (!kHasAlibi || slope == 0.f) return fwd_scores(s, coord, row0, col0, mask, scale);
    softcap_scores(s);
    const bool below = right <= 0 || col0 + kBlockN - 1 <= row0 + diag;  // every dist >= 0
    const bool above = left <= 0 || col0 >= row0 + kBlockM - 1 + diag;   // every dist <= 0
    if (!mask && (below || above)) {
      const float sl = below ? slope : -slope;
      const int col_base = cute::get<1>(coord(0, 0));
      CUTE_UNROLL
      for (int r = 0; r < kR; ++r) {
        off[r] = -sl * float(row0 + cute::get<0>(coord(r, 0)) + diag - col0 - col_base);
        CUTE_UNROLL
        for (int c = 0; c < cute::size<1>(s); ++c)
          s(r, c) = fmaf(sl, float(cute::get<1>(coord(r, c)) - col_base), s(r, c));
      }
    } else {
      alibi_per_element(s, coord, row0, col0);
      if (mask) apply_masks(s, coord, row0, col0);
    }
  }

  // Keep bits of the thread's tile elements, bit r * cols + c for element (r, c). A Philox call
  // (common/philox.h: the CPU's draws bit for bit) decides 16 columns of one row, two
  // neighbouring n8 atoms, of which the m16n8 accumulator gives lane q of a quad four (columns
  // 2q, 2q + 1 of each atom). Where the thread's atoms 2a and 2a + 1 are such neighbours (warps
  // side by side along M only: the sm90 forward, the sm80 forward), its elements 4a .. 4a + 3 of
  // a row are one call's nibble: half g of the word (elements 16g .. 16g + 15) is four calls,
  // the same four for the whole quad; lane q draws the call of nibble q (element 16g + 4q) in the
  // order that puts lane f's nibble in field f (KeepOrder::kPairs), and a 4 x 4 transpose of
  // 4-bit fields within each half (2 xor shuffles per 32 bits) hands every lane its nibble of
  // each call: elements / 16 calls a thread. Where warps sit side by side along N too (the sm80
  // backward's S tile), an atom's neighbour belongs to another warp: each byte of the word
  // (elements 8b .. 8b + 7, four atoms' column pairs) takes four calls, lane q the call of atom
  // 4b + q, of which it keeps that atom's 8 bits, and a 4 x 4 transpose of 2-bit fields within
  // each byte: elements / 8 calls. Elements a thread: 16, 32 or 64 in the tile configs that
  // instantiate dropout (sm80 forward 16-64, sm80 backward 16-64, sm90 forward 64); a dropout
  // instantiation of any other shape fails to compile.
  template <class S, class Coord>
  __device__ __forceinline__ auto keep_bits(const S& s, const Coord& coord, int row0,
                                            int col0) const {
    constexpr int kCols = decltype(cute::size<1>(s))::value;
    constexpr int kElems = decltype(cute::size(s))::value;
    // Only dropout instantiations draw bits (the others never call this: dropout_on()).
    static_assert(!kHasDropout || (kElems <= 64 && kElems % 8 == 0 && kCols % 2 == 0),
                  "dropout needs whole bytes of m16n8 column pairs, at most 64 a thread");
    using Bits = std::conditional_t<(kElems <= 32), uint32_t, uint64_t>;
    const uint32_t thr = p->drop_threshold;
    const int q = int(threadIdx.x % 4);
    // The (row, column) of this thread's element i0 + step * q, the one whose call lane q of
    // the quad draws (unrolled over q: compile-time element indices).
    auto drawn = [&](int i0, int step) {
      int rc[2] = {0, 0};
      CUTE_UNROLL
      for (int j = 0; j < 4; ++j) {
        const int i = i0 + step * j;
        if (q == j) {
          rc[0] = row0 + cute::get<0>(coord(i / kCols, i % kCols));
          rc[1] = col0 + cute::get<1>(coord(i / kCols, i % kCols));
        }
      }
      return cute::make_tuple(rc[0], rc[1]);
    };
    Bits keep = 0;
    if constexpr (kElems % 16 == 0 && kCols % 4 == 0) {
      // Atoms 2a and 2a + 1 neighbours (element 2 is atom 1's first column pair)?
      if (cute::get<1>(coord(0, 2)) - cute::get<1>(coord(0, 0)) == 8) {
        CUTE_UNROLL
        for (int w = 0; w < (kElems + 31) / 32; ++w) {  // 32 bits (two calls a lane) at a time
          uint32_t word = 0;
          CUTE_UNROLL
          for (int g = 2 * w; g < 2 * w + 2 && g < kElems / 16; ++g) {
            const auto [row, col] = drawn(16 * g, 4);  // element 16g + 4q's
            const Philox4 d = dropout_draws(p->seed, p->offset, bh, 0, 1, row, col >> 4);
            word |= dropout_keep16_as<KeepOrder::kPairs>(d, thr) << (16 * (g % 2));
          }
          // Field f of lane q's half holds lane f's nibble -> field q of lane f's half.
          word = transpose_fields<4, 1>(word, q, 1);
          word = transpose_fields<4, 2>(word, q, 2);
          keep |= Bits(word) << (32 * w);
        }
        return keep;
      }
    }
    if constexpr (kElems % 8 == 0 && kCols % 2 == 0) {
      CUTE_UNROLL
      for (int w = 0; w < (kElems + 31) / 32; ++w) {  // 32 bits (four calls a lane) at a time
        uint32_t word = 0;
        CUTE_UNROLL
        for (int b = 4 * w; b < 4 * w + 4 && b < kElems / 8; ++b) {
          const auto [row, col] = drawn(8 * b, 2);  // element 8b + 2q's
          const Philox4 d = dropout_draws(p->seed, p->offset, bh, 0, 1, row, col >> 4);
          word |= ((dropout_keep16(d, thr) >> (col & 8)) & 0xFFu) << (8 * (b % 4));
        }
        // Field f of lane q's byte holds lane f's bits -> field q of lane f's byte.
        word = transpose_fields<2, 1, 8>(word, q, 1);
        word = transpose_fields<2, 2, 8>(word, q, 2);
        keep |= Bits(word) << (32 * w);
      }
    }
    return keep;
  }

  // Forward dropout on P (after the softmax summed it into l): dropped entries become 0; the
  // keep scale of the kept ones is applied once to O (fwd_out_scale).
  template <class S, class Coord>
  __device__ __forceinline__ void fwd_dropout(S& s, const Coord& coord, int row0, int col0) const {
    if (!dropout_on()) return;
    const auto keep = keep_bits(s, coord, row0, col0);
    CUTE_UNROLL
    for (int i = 0; i < cute::size<0>(s) * cute::size<1>(s); ++i)
      if (!((keep >> i) & 1)) s(i / cute::size<1>(s), i % cute::size<1>(s)) = 0.f;
  }
  __device__ __forceinline__ float fwd_out_scale() const {
    return dropout_on() ? p->keep_scale : 1.f;
  }

  // Keep bits of a tile held transposed, keys along the wgmma's M (the sm90 backward's S^T): a
  // thread of the 64 x N accumulator holds keys k, k + 8 (k = 16 warp + i, i = lane / 4) and
  // queries q + {0, 1} + 8 j (q = 2 (lane % 4)). A Philox call decides the 16 keys 16 warp .. + 15
  // of one query, which the 8 lanes i = 0..7 of one lane % 4 hold, two each (keys i, i + 8).
  // Half h of the word holds the thread's elements of query pairs j = 4h .. 4h + 3 (16 of them:
  // 8 queries x 2 keys); lane i draws the call of query q + (i & 1) + 8 (4h + (i >> 1)) in the
  // order that puts lane f's two keys in 2-bit field f (KeepOrder::kInterleaved), and an 8 x 8
  // transpose of 2-bit fields within each half (3 xor shuffles per 32 bits) gives each lane its
  // keys' bits of each: field src of half h = the query lane src drew, i.e. bit 4 j + 2 (query
  // offset & 1) + (key offset >> 3) (bit_t below). Calls per thread: elements / 16.
  template <class S, class Coord>
  __device__ __forceinline__ auto keep_bits_t(const S& s, const Coord& coord, int row0,
                                              int col0) const {
    constexpr int kElems = decltype(cute::size(s))::value;
    static_assert(!kHasDropout || (kElems % 16 == 0 && kElems <= 64),
                  "dropout needs whole halves of query quads, at most 64 a thread");
    using Bits = std::conditional_t<(kElems <= 32), uint32_t, uint64_t>;
    const uint32_t thr = p->drop_threshold;
    const int i = int(threadIdx.x / 4 % 8);
    const int q = row0 + cute::get<0>(coord(0, 0));
    const int k16 = (col0 + cute::get<1>(coord(0, 0))) >> 4;
    Bits keep = 0;
    if constexpr (kElems % 16 == 0) {
      CUTE_UNROLL
      for (int w = 0; w < (kElems + 31) / 32; ++w) {  // 32 bits at a time, as in keep_bits
        uint32_t word = 0;
        CUTE_UNROLL
        for (int h = 2 * w; h < 2 * w + 2 && h < kElems / 16; ++h) {
          const int row = q + (i & 1) + 8 * (4 * h + (i >> 1));
          const Philox4 d = dropout_draws(p->seed, p->offset, bh, 0, 1, row, k16);
          word |= dropout_keep16_as<KeepOrder::kInterleaved>(d, thr) << (16 * (h % 2));
        }
        // Field f of lane i's half: lane f's two keys -> field i of lane f's half (lanes 4 apart).
        word = transpose_fields<2, 1>(word, i, 4);
        word = transpose_fields<2, 2>(word, i, 8);
        word = transpose_fields<2, 4>(word, i, 16);
        keep |= Bits(word) << (32 * w);
      }
    }
    return keep;
  }

  // The bit of element (r, c) in keep_bits_t's word.
  template <class Coord>
  static __device__ __forceinline__ int bit_t(const Coord& coord, int r, int c) {
    const int qo = cute::get<0>(coord(r, c)) - cute::get<0>(coord(0, 0));
    const int ko = cute::get<1>(coord(r, c)) - cute::get<1>(coord(0, 0));
    return 4 * (qo >> 3) + 2 * (qo & 1) + (ko >> 3);
  }

  // The thread's dropout bits of the tile in keep_bits' (m16n8) or keep_bits_t's (kKeysAlongM)
  // pattern, and the bit of element (r, c) in them. 0 when dropout is off.
  template <bool kKeysAlongM, class S, class Coord>
  __device__ __forceinline__ auto bwd_keep(const S& s, const Coord& coord, int row0,
                                           int col0) const {
    decltype(keep_bits(s, coord, row0, col0)) keep = 0;
    if (dropout_on()) {
      if constexpr (kKeysAlongM) keep = keep_bits_t(s, coord, row0, col0);
      else keep = keep_bits(s, coord, row0, col0);
    }
    return keep;
  }
  template <bool kKeysAlongM, class S, class Coord>
  static __device__ __forceinline__ int keep_bit(const S&, const Coord& coord, int r, int c) {
    if constexpr (kKeysAlongM) return bit_t(coord, r, c);
    else return r * decltype(cute::size<1>(std::declval<S>()))::value + c;
  }

  // P (before dropout) of the tile's scores s in place, and softcap's t of each in t_of (a
  // callable (r, c, t); t = 0 when off). ALiBi's distance: one base per tile plus each element's
  // compile-time (row - col) offset. `mask`: a bool, or std::true_type / std::false_type from a
  // caller that branches once per tile (the sm90 backward at block_m 64): with a run-time mask
  // ptxas keeps two compares and a select per score on every tile, masked or not.
  template <class S, class Coord, class Rows, class Mask, class TOf>
  __device__ __forceinline__ void bwd_p_with(S& s, const Coord& coord, int row0, int col0,
                                             Mask mask, float scale_log2, const Rows& lse_log2,
                                             TOf&& t_of) const {
    const int row_base = cute::get<0>(coord(0, 0)), col_base = cute::get<1>(coord(0, 0));
    const float dist_base = float(row0 + row_base + diag - col0 - col_base);
    CUTE_UNROLL
    for (int r = 0; r < cute::size<0>(s); ++r) {
      const int row = row0 + cute::get<0>(coord(r, 0));
      int lo = 0, hi = 0;
      if (mask) visible_cols(row, col0, lo, hi);
      CUTE_UNROLL
      for (int c = 0; c < cute::size<1>(s); ++c) {
        const int col = cute::get<1>(coord(r, c));
        float x = s(r, c), t = 0.f;
        if (kHasSoftcap && cap_in != 0.f) {
          t = tanh_fast(x * cap_in);
          x = cap_out * t;
        }
        if constexpr (kHasAlibi) {
          const int off = (cute::get<0>(coord(r, c)) - row_base) - (col - col_base);
          x -= slope * fabsf(dist_base + float(off));
        }
        x = x * scale_log2 - lse_log2[r];
        if (mask && (col < lo || col > hi)) x = -INFINITY;
        s(r, c) = exp2f(x);
        t_of(r, c, t);
      }
    }
  }

  // Backward: s: raw scores -> P with dropout, Pd = P z (z = keep ? keep_scale : 0); dp: dO V^T ->
  // dS = P (dP z - D) (1 - t^2), the gradient w.r.t. scale * q.k (ALiBi is a constant shift;
  // softcap's derivative is 1 - t^2 with t = tanh of the capped argument). kKeysAlongM: the tile
  // is held transposed (keep_bits_t's pattern) instead of in m16n8's (keep_bits').
  template <bool kKeysAlongM = false, class S, class Coord, class Mask, class Rows>
  __device__ __forceinline__ void bwd_probs(S& s, S& dp, const Coord& coord, int row0, int col0,
                                            Mask mask, float, float scale_log2,
                                            const Rows& lse_log2, const Rows& d_row) const {
    if constexpr (kSplitProbs) {
      bwd_ds<kKeysAlongM>(s, dp, coord, d_row,
                          bwd_p<kKeysAlongM>(s, coord, row0, col0, mask, scale_log2, lse_log2));
    } else {  // softcap: dS takes each score's 1 - t^2, computed beside P
      const auto keep = bwd_keep<kKeysAlongM>(s, coord, row0, col0);
      const float z = kHasDropout ? p->keep_scale : 1.f;
      bwd_p_with(s, coord, row0, col0, mask, scale_log2, lse_log2, [&](int r, int c, float t) {
        float g = dp(r, c);
        if (dropout_on()) g = (keep >> keep_bit<kKeysAlongM>(s, coord, r, c)) & 1 ? g * z : 0.f;
        dp(r, c) = s(r, c) * (g - d_row[r]) * (1.f - t * t);
      });
      drop_p<kKeysAlongM>(s, coord, keep);
    }
  }
  // The two halves apart, where no per-score state but the dropout bits passes between them (no
  // softcap): the sm90 backward computes P^T while dP^T's GEMM runs.
  static constexpr bool kSplitProbs = !kHasSoftcap;
  template <bool kKeysAlongM = false, class S, class Coord, class Mask, class Rows>
  __device__ __forceinline__ auto bwd_p(S& s, const Coord& coord, int row0, int col0, Mask mask,
                                        float scale_log2, const Rows& lse_log2) const {
    const auto keep = bwd_keep<kKeysAlongM>(s, coord, row0, col0);
    bwd_p_with(s, coord, row0, col0, mask, scale_log2, lse_log2, [](int, int, float) {});
    return keep;
  }
  template <bool kKeysAlongM = false, class S, class Coord, class Rows, class Keep>
  __device__ __forceinline__ void bwd_ds(S& s, S& dp, const Coord& coord, const Rows& d_row,
                                         Keep keep) const {
    const float z = kHasDropout ? p->keep_scale : 1.f;
    CUTE_UNROLL
    for (int r = 0; r < cute::size<0>(s); ++r) {
      CUTE_UNROLL
      for (int c = 0; c < cute::size<1>(s); ++c) {
        float g = dp(r, c);
        if (dropout_on()) g = (keep >> keep_bit<kKeysAlongM>(s, coord, r, c)) & 1 ? g * z : 0.f;
        dp(r, c) = s(r, c) * (g - d_row[r]);
      }
    }
    drop_p<kKeysAlongM>(s, coord, keep);
  }
  // P -> Pd = P z for dV (dS used the undropped P).
  template <bool kKeysAlongM, class S, class Coord, class Keep>
  __device__ __forceinline__ void drop_p(S& s, const Coord& coord, Keep keep) const {
    if (!dropout_on()) return;
    const float z = p->keep_scale;
    CUTE_UNROLL
    for (int r = 0; r < cute::size<0>(s); ++r)
      CUTE_UNROLL
      for (int c = 0; c < cute::size<1>(s); ++c)
        s(r, c) = (keep >> keep_bit<kKeysAlongM>(s, coord, r, c)) & 1 ? s(r, c) * z : 0.f;
  }
};

// f(mask) with plain scores; the general policies branch once per tile to f(true_type) or
// f(false_type), a masked and an unmasked copy of their element loop (a run-time mask there cost
// ~200 instructions a thread on every tile of the sm90 backward, and at block_m 128 the block-mask
// kernel ~45% over plain: bench/NOTES-attention.md v4). The sm80 backward keeps the bool: two
// copies tripled its spills at 255 registers.
template <class Policy, class F>
__device__ __forceinline__ auto by_mask(bool mask, F&& f) {
  if constexpr (Policy::kPlain)
    return f(mask);
  else
    return mask ? f(std::true_type{}) : f(std::false_type{});
}

}  // namespace flashkit::cuda::attn
