// Naive attention references: the full seqlen_q x seqlen_k score matrix per (batch, head), every
// AttentionOptions feature, written straight from the definitions in include/flashkit/attention.h
// (independent of the tiled code). Used by the C++ tests, the `flashkit` CLI and the GPU tests.
// Inputs: q/k/v/dout of any float dtype on the CPU, dense or varlen (cu_seqlens in opts).
// Outputs: CPU TensorViews of f64, f32, f16 or bf16 with out's / lse's / q's / k's shapes.
#pragma once
#include "flashkit/attention.h"

namespace flashkit::cpu {

// `precision` f64 is the reference proper (fp64 throughout). f32/f16/bf16 emulate a framework's
// math path in that dtype: S, P and O (backward: dP, dS, dQ, dK, dV) are rounded to it, which is
// the baseline of the tolerance rule max|out - ref| <= 2 max|naive_lowprec - ref| + 1e-5.
void reference_attention_forward(const TensorView& q, const TensorView& k, const TensorView& v,
                                 const TensorView& out, const TensorView& lse,
                                 const AttentionOptions& opts, DType precision = DType::f64);

void reference_attention_backward(const TensorView& q, const TensorView& k, const TensorView& v,
                                  const TensorView& dout, const TensorView& dq,
                                  const TensorView& dk, const TensorView& dv,
                                  const AttentionOptions& opts, DType precision = DType::f64);

}  // namespace flashkit::cpu
