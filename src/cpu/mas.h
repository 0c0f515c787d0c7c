// The CPU backend of monotonic_alignment_search (src/cpu/mas.cpp), called by src/api/mas.cpp
// after validation: lengths are host-readable and already checked (0 <= tx <= ty, tx <= T, ty <=
// S).
#pragma once
#include <cstdint>

#include "flashkit/tensor.h"

namespace flashkit::cpu {

// value [B, T, S] f32/f16/bf16, any strides; path [B, T, S] and/or durations int32 [B, T]
// (an undefined view is skipped). tx / ty: B host-readable lengths each.
void monotonic_alignment_search(const TensorView& value, const int32_t* tx, const int32_t* ty,
                                const TensorView& path, const TensorView& durations, float neg);

// The fused-likelihood variant: z [B, C, S], m / logs [B, C, T] (one float dtype, any strides);
// each item's likelihood [tx, ty] is built in per-thread scratch (src/common/mas_likelihood.h).
void monotonic_alignment_search_fused(const TensorView& z, const TensorView& m,
                                      const TensorView& logs, const int32_t* tx, const int32_t* ty,
                                      const TensorView& path, const TensorView& durations,
                                      float neg);

}  // namespace flashkit::cpu
