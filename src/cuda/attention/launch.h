// The CUDA attention entry points src/api/attention.cpp calls after validation (implemented in
// src/cuda/attention/). Arguments are already checked: same device, dtypes, shapes, strides,
// options ranges; `shape` holds the resolved sizes and softmax scale. Varlen calls carry
// opts.max_seqlen_q/k > 0 (shape.seqlen_q/k equal them); cu_seqlens are not read on the host.
#pragma once
#include <cstddef>

#include "api/attention_shape.h"
#include "flashkit/attention.h"

namespace flashkit::cuda {

void attention_forward(const AttentionShape& shape, const TensorView& q, const TensorView& k,
                       const TensorView& v, const TensorView& out, const TensorView& lse,
                       const AttentionOptions& opts);

void attention_backward(const AttentionShape& shape, const TensorView& q, const TensorView& k,
                        const TensorView& v, const TensorView& out, const TensorView& dout,
                        const TensorView& lse, const TensorView& dq, const TensorView& dk,
                        const TensorView& dv, const AttentionOptions& opts);

size_t attention_forward_workspace_bytes(const AttentionShape& shape,
                                         const AttentionOptions& opts);

size_t attention_backward_workspace_bytes(const AttentionShape& shape,
                                          const AttentionOptions& opts);

}  // namespace flashkit::cuda
