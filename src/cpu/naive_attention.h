// The naive fp32 attention forward `flashkit bench attention` compares the FA2 CPU path with:
// per (batch, head) the whole seqlen_q x seqlen_k score matrix in memory, softmax, then P V, in
// plain loops the compiler vectorises, threads over (batch, head). Dense contiguous fp32 only.
#pragma once
#include "flashkit/tensor.h"

namespace flashkit::cpu {

// q [b, sq, h, d], k/v [b, sk, kv_heads, d], out like q; scale 1/sqrt(d); causal bottom-right.
void naive_attention_forward_f32(const TensorView& q, const TensorView& k, const TensorView& v,
                                 const TensorView& out, bool causal);

}  // namespace flashkit::cpu
