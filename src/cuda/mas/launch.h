// CUDA entry points of MAS, called by src/api/mas.cpp after validation (FLASHKIT_WITH_CUDA only).
// The kernels (src/cuda/mas/mas.cu) read the lengths on the device; bad lengths are reported
// through MasOptions::status, never by a host sync.
#pragma once
#include "flashkit/mas.h"

namespace flashkit::cuda {

void monotonic_alignment_search(const TensorView& value, const TensorView& text_lengths,
                                const TensorView& mel_lengths, const TensorView& path,
                                const TensorView& durations, const MasOptions& opts);

void monotonic_alignment_search_fused(const TensorView& z, const TensorView& m,
                                      const TensorView& logs, const TensorView& text_lengths,
                                      const TensorView& mel_lengths, const TensorView& path,
                                      const TensorView& durations, const MasOptions& opts);

}  // namespace flashkit::cuda
