// The exactness oracle for MAS: a line-by-line transcription of glow-tts's Cython
// `maximum_path_each` (scalar, in place on an fp32 copy). Tests and the CLI compare every backend
// to it with zero tolerance; see shared/DESIGN.md "MAS semantics".
#pragma once
#include <cstdint>
#include <vector>

#include "flashkit/tensor.h"

namespace flashkit::ref {

// value: [B, T, S] any float dtype, any strides, on the CPU; lengths: B each, tx <= ty.
// Returns the path as int32 [B, T, S], row-major (the Cython `paths` array).
std::vector<int32_t> monotonic_alignment_search(const TensorView& value,
                                                const int32_t* text_lengths,
                                                const int32_t* mel_lengths, float neg);

}  // namespace flashkit::ref
