// The one softmax state: a partial attention result over some set of keys is (m, l, O) with
// m = max score, l = sum exp(s - m), O = sum exp(s - m) v (un-scaled). Two partials over disjoint
// key sets merge associatively. Used by the CPU tile loop, decode split-KV/Lean reductions,
// merge_states and (through the same functions) the CUDA kernels, so there is one definition.
#pragma once
#include <cmath>

#include "common/hd.h"

namespace flashkit {

// Scalar part of a softmax state; the O accumulator lives with the caller because its layout
// differs per backend (a row in memory on the CPU, registers spread over a warp on the GPU).
struct SoftmaxStat {
  float m = -INFINITY;
  float l = 0.f;
};

// Factors to rescale two O accumulators by when merging states a and b.
struct MergeScales {
  SoftmaxStat merged;
  float scale_a;
  float scale_b;
};

// Merge two stats. A state that has seen no key (m == -inf) contributes nothing; two such states
// merge to an empty state without producing NaN.
FK_HD MergeScales merge_stats(SoftmaxStat a, SoftmaxStat b) {
  MergeScales r;
  float m = a.m > b.m ? a.m : b.m;
  if (m == -INFINITY) {
    r.merged = SoftmaxStat{};
    r.scale_a = 0.f;
    r.scale_b = 0.f;
    return r;
  }
  r.scale_a = expf(a.m - m);
  r.scale_b = expf(b.m - m);
  r.merged.m = m;
  r.merged.l = a.l * r.scale_a + b.l * r.scale_b;
  return r;
}

// Natural-log logsumexp of the scores a stat has seen (-inf if none, +inf never).
FK_HD float stat_lse(SoftmaxStat s) { return s.l > 0.f ? s.m + logf(s.l) : -INFINITY; }

// A finished (O / l, lse) pair seen as a stat whose O accumulator is O itself: m = lse, l = 1.
FK_HD SoftmaxStat stat_from_lse(float lse) {
  SoftmaxStat s;
  s.m = lse;
  s.l = lse == -INFINITY ? 0.f : 1.f;
  return s;
}

// Fold a new block of scores into the state: m_new = max(m, block_max); returns the factor the
// running O must be multiplied by before the block's exp(s - m_new) v is added.
FK_HD float online_update(SoftmaxStat& s, float block_max) {
  float m_new = s.m > block_max ? s.m : block_max;
  float alpha = (m_new == -INFINITY) ? 1.f : expf(s.m - m_new);
  s.l *= alpha;
  s.m = m_new;
  return alpha;
}

// online_update with m and the block max in log2 units of the scaled score (the GPU kernels fold
// the softmax scale into exp2): returns exp2(m_old - m_new). lazy > 0 moves m only when the block
// max exceeds it by more than `lazy` (or m is still -inf): exps taken against the stale m are then
// at most 2^lazy, and the final O / l is the same (the factor cancels), but O's rescale is skipped.
FK_HD float online_update_log2(SoftmaxStat& s, float block_max, float lazy = 0.f) {
  const bool grow = block_max > s.m + lazy || (lazy > 0.f && s.m == -INFINITY);
  const float m_new = grow ? block_max : s.m;
  // exp2(-inf) = 0 for the first live block; a row with no live key yet keeps alpha 1.
  const float alpha = grow && m_new != -INFINITY ? exp2f(s.m - m_new) : 1.f;
  s.l *= alpha;
  s.m = m_new;
  return alpha;
}

// For scores whose scaled values lie in [-b, b] (log2 units; masked ones -inf): the lowest max a
// softmax may hold, or +inf where the bound gives none. A row that takes m = max(its first key
// block's max, b - 40) and keeps it for every later block computes each later P = exp2(x - m) in
// (0, 2^40] (no overflow of l or O), and its largest P, its own max's, is >= 2^(40 - 2b) >= 2^-120
// (no ex2.approx flush, below 2^-126) when b <= 80: any m gives the same O and LSE, so the
// running max and O's rescale can go after the first block. b = softcap log2 e: softcap <= 55.4.
// P must be fp32 or bf16 (fp32's exponent range); fp16's 65504 cannot hold 2^40.
FK_HD float bounded_max_floor_log2(float b) { return b > 0.f && b <= 80.f ? b - 40.f : INFINITY; }
// Softcap's bound: scale * score' = softcap * t, |t| <= 1, so b = softcap log2 e. The floor the
// Hopper forward keeps, and (finite or not) the dispatch's test of whether it may run there.
FK_HD float softcap_max_floor_log2(float softcap) {
  return bounded_max_floor_log2(softcap * 1.4426950408889634f);
}

// Natural-log logsumexp of a stat kept in log2 units (-inf if it saw no key).
FK_HD float stat_lse_log2(SoftmaxStat s) {
  return s.l > 0.f ? (s.m + log2f(s.l)) * 0.69314718055994530942f : -INFINITY;
}

}  // namespace flashkit
