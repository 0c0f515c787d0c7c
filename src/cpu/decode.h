// CPU backend of decode and merge_states (called by src/api/ after validation).
#pragma once
#include "common/decode_scores.h"
#include "flashkit/plan.h"
#include "flashkit/tensor.h"

namespace flashkit::cpu {

// Runs the plan's schedule with OpenMP: every segment (a CTA's share of one tile) builds a
// partial softmax state, then each tile merges its segments in CTA order with merge_stats.
void decode(const TensorView& q, const TensorView& k_cache, const TensorView& v_cache,
            const TensorView& cache_seqlens, const TensorView& block_table, const TensorView& out,
            const TensorView& lse, const DecodePlan& plan, const DecodeScores& scores);

void merge_states(const TensorView& o_parts, const TensorView& lse_parts, const TensorView& out,
                  const TensorView& lse);

}  // namespace flashkit::cpu
