// The fp64 naive decode reference the CPU tests, the GPU tests and `flashkit check` compare to:
// a plain softmax over each row's visible keys, no tiling, no online rescaling.
#pragma once
#include <vector>

#include "flashkit/tensor.h"

namespace flashkit::cpu {

struct DecodeReference {
  std::vector<double> out;  // [batch, q_len, num_q_heads, hdim]
  std::vector<double> lse;  // [batch, num_q_heads, q_len]
};

// Same arguments and semantics as flashkit::decode (CPU tensors). With round_like_inputs, the
// scores, probabilities and outputs are rounded to q's dtype the way a naive low-precision
// implementation would: the yardstick of the tolerance rule in shared/DESIGN.md. softcap and
// window_left as in DecodeOptions.
DecodeReference reference_decode(const TensorView& q, const TensorView& k_cache,
                                 const TensorView& v_cache, const TensorView& cache_seqlens,
                                 const TensorView& block_table, float softmax_scale,
                                 bool round_like_inputs = false, double softcap = 0,
                                 int window_left = -1);

}  // namespace flashkit::cpu
