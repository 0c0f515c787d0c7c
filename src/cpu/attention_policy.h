// The score-modifier/mask policy of one (sequence, head) for the CPU tile loop: which tiles can be
// skipped (causal / sliding window / block mask), the in-tile modifiers in the order the API
// defines them (softcap, then ALiBi, then masks), and the dropout keep-scales. Forward and backward
// both go through this one policy, so a mask rule is written once.
#pragma once
#include <cstdint>
#include <limits>

#include "api/attention_shape.h"
#include "common/philox.h"
#include "flashkit/attention.h"

namespace flashkit::cpu {

// Where sequence b lives: first token of q/k in the token dim and its lengths.
struct SeqSpan {
  int64_t q0 = 0, k0 = 0;
  int sq = 0, sk = 0;
};

inline SeqSpan seq_span(const AttentionShape& s, const AttentionOptions& o, int b) {
  if (!s.varlen) return {0, 0, s.seqlen_q, s.seqlen_k};
  const int32_t* cq = o.cu_seqlens_q.ptr<int32_t>();
  const int32_t* ck = o.cu_seqlens_k.ptr<int32_t>();
  return {cq[b], ck[b], cq[b + 1] - cq[b], ck[b + 1] - ck[b]};
}

enum class TileKind { skip, full, masked };

struct ScorePolicy {
  int64_t diag = 0;  // sk - sq: the key on query i's diagonal is i + diag (bottom-right aligned)
  int64_t left = 0, right = 0;  // query i sees keys [i + diag - left, i + diag + right]
  float softcap = 0.f;
  float alibi_slope = 0.f;
  const uint8_t* block_mask = nullptr;  // this (batch, head)'s [nq, nk] blocks
  int64_t bm_row = 0, bm_col = 0;
  int bq = 1, bk = 1;
  bool dropout = false;
  uint32_t drop_threshold = 0;
  float keep_scale = 1.f;
  uint64_t seed = 0, offset = 0;
  int batch = 0, head = 0, heads = 1;

  ScorePolicy(const AttentionShape& s, const AttentionOptions& o, const SeqSpan& seq, int b,
              int h) {
    constexpr int64_t kUnbounded = std::numeric_limits<int32_t>::max();
    diag = static_cast<int64_t>(seq.sk) - seq.sq;
    left = o.window_left < 0 ? kUnbounded : o.window_left;
    right = o.window_right < 0 ? kUnbounded : o.window_right;
    if (o.causal && right > 0) right = 0;
    softcap = o.softcap;
    if (o.alibi_slopes.defined()) {
      const TensorView& a = o.alibi_slopes;
      alibi_slope = a.ndim == 1 ? a.ptr<float>()[h * a.stride[0]]
                                : a.ptr<float>()[b * a.stride[0] + h * a.stride[1]];
    }
    if (o.block_mask.defined()) {
      const TensorView& m = o.block_mask;
      block_mask = m.ptr<uint8_t>() + (m.shape[0] == 1 ? 0 : b * m.stride[0]) +
                   (m.shape[1] == 1 ? 0 : h * m.stride[1]);
      bm_row = m.stride[2];
      bm_col = m.stride[3];
      bq = o.block_mask_block_q;
      bk = o.block_mask_block_k;
    }
    dropout = o.dropout_p > 0.f;
    drop_threshold = dropout_threshold(o.dropout_p);
    keep_scale = static_cast<float>(dropout_keep_scale(drop_threshold));  // p quantised
    seed = o.dropout_seed;
    offset = o.dropout_offset;
    batch = b;
    head = h;
    heads = s.heads;
  }

  int64_t first_key(int64_t i) const { return i + diag - left; }
  int64_t last_key(int64_t i) const { return i + diag + right; }

  // Rows [r0, r0+nr) x keys [c0, c0+nc): skipped when no query sees any key, full when every query
  // sees every key (only the modifiers apply), else masked element by element.
  TileKind classify(int r0, int nr, int c0, int nc) const {
    const int64_t r1 = r0 + nr - 1, c1 = c0 + nc - 1;
    if (c0 > last_key(r1) || c1 < first_key(r0)) return TileKind::skip;
    bool full = first_key(r1) <= c0 && c1 <= last_key(r0);
    if (block_mask) {
      bool any = false, all = true;
      for (int64_t bi = r0 / bq; bi <= r1 / bq; ++bi)
        for (int64_t bj = c0 / bk; bj <= c1 / bk; ++bj) {
          bool on = block_mask[bi * bm_row + bj * bm_col] != 0;
          any |= on;
          all &= on;
        }
      if (!any) return TileKind::skip;
      full &= all;
    }
    return full ? TileKind::full : TileKind::masked;
  }

  // S (nr x nc, leading dim ld) holds scale * q.k on entry and the final scores on return.
  // With softcap, `tanh_out` (same layout) receives tanh(scale * q.k / softcap) for the backward.
  void apply(float* S, int ld, int r0, int nr, int c0, int nc, TileKind kind,
             float* tanh_out = nullptr) const;

  // Z[r][j] = keep ? keep_scale : 0 for the tile (only when dropout is on); mask_out (u8, may be
  // null) receives the keep bits with row stride mask_ld.
  void dropout_scales(float* Z, int ld, int r0, int nr, int c0, int nc, uint8_t* mask_out,
                      int64_t mask_ld) const;
};

}  // namespace flashkit::cpu
