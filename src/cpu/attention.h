// The CPU attention backend (FlashAttention-2 on the CPU) that src/api/attention.cpp dispatches
// to after validation: forward in attention_forward.cpp, backward in attention_backward.cpp.
#pragma once
#include "api/attention_shape.h"
#include "flashkit/attention.h"

namespace flashkit::cpu {

void attention_forward(const AttentionShape& shape, const TensorView& q, const TensorView& k,
                       const TensorView& v, const TensorView& out, const TensorView& lse,
                       const AttentionOptions& opts);

void attention_backward(const AttentionShape& shape, const TensorView& q, const TensorView& k,
                        const TensorView& v, const TensorView& out, const TensorView& dout,
                        const TensorView& lse, const TensorView& dq, const TensorView& dk,
                        const TensorView& dv, const AttentionOptions& opts);

}  // namespace flashkit::cpu
