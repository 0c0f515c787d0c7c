// CUDA entry points of the decode family, called by src/api/decode.cpp and merge_states.cpp after
// validation (only when FLASHKIT_WITH_CUDA). Kernels live in this folder.
#pragma once
#include "common/decode_scores.h"
#include "flashkit/common.h"
#include "flashkit/plan.h"
#include "flashkit/tensor.h"

namespace flashkit::cuda {

// Uploads the plan on first use (outside graph capture), then launches the plan's schedule.
void decode(const TensorView& q, const TensorView& k_cache, const TensorView& v_cache,
            const TensorView& cache_seqlens, const TensorView& block_table, const TensorView& out,
            const TensorView& lse, const DecodePlan& plan, const DecodeScores& scores,
            Stream stream, const Workspace& workspace);

// SM count and co-resident decode CTAs per SM for this problem's kernel.
DeviceInfo decode_device_info(const DecodeProblem& problem, int device);

void merge_states(const TensorView& o_parts, const TensorView& lse_parts, const TensorView& out,
                  const TensorView& lse, Stream stream);

}  // namespace flashkit::cuda
