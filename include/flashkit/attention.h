// Exact attention, forward and backward (FlashAttention-2 algorithm on every backend).
// Dense layout: q [batch, seqlen_q, heads, hdim], k/v [batch, seqlen_k, kv_heads, hdim], last dim
// contiguous, other strides free. Varlen layout: q [total_q, heads, hdim] + cu_seqlens_q (int32
// [batch+1]), likewise k/v with cu_seqlens_k. out has q's shape; lse is fp32 [batch, heads, seqlen_q]
// (varlen: [heads, total_q]) holding the natural-log logsumexp of each scaled score row.
// Scores: s = scale * q.k, then softcap (s = softcap * tanh(s / softcap)), then ALiBi, then the
// masks (causal / window / block mask give -inf). A query row that sees no key gets out = 0 and
// lse = -inf (its gradients are 0). Varlen tokens past cu_seqlens[batch] are not written.
// FP8: attention_forward also takes q, k, v in float8 e4m3 (DType::e4m3, hdim a multiple of 16)
// with per-tensor descale factors (AttentionOptions::q_descale ...: real q = q * q_descale) and
// writes a bf16 out and the fp32 lse of the real scores. On CUDA it runs on Hopper (sm_90a) for
// dense or varlen batches with plain or causal scores (P is rounded to e4m3 before P V, as in FA3); the CPU
// computes it in fp32 from the dequantized inputs with every option. There is no fp8 backward.
#pragma once
#include <cstdint>

#include "flashkit/common.h"
#include "flashkit/tensor.h"

namespace flashkit {

struct AttentionOptions {
  float softmax_scale = 0.f;  // 0 means 1/sqrt(hdim)
  // Causal mask, bottom-right aligned: query i sees key j iff j <= i + seqlen_k - seqlen_q.
  bool causal = false;
  // Sliding window (bottom-right aligned like causal): query i sees keys j with
  // i + sk - sq - window_left <= j <= i + sk - sq + window_right; -1 means unbounded.
  // With causal set, window_right is capped at 0.
  int window_left = -1;
  int window_right = -1;
  // > 0: scores become softcap * tanh(scores / softcap). CUDA takes tanh from the hardware's
  // tanh.approx.f32 (relative error <= 2^-11 on the tanh, as FlashAttention-2/3), the CPU from
  // std::tanh.
  float softcap = 0.f;
  TensorView alibi_slopes;    // fp32 [heads] or [batch, heads]; adds -slope*|i + sk - sq - j|
  // Dropout on P: probability of dropping, in [0, 1). It is quantised to 1/256 (as
  // FlashAttention-2's): the drop probability used is threshold / 256 with threshold =
  // round(p * 256) clamped to [0, 255], and kept values are scaled by 256 / (256 - threshold),
  // the inverse of that keep probability, so the output stays unbiased. Element (b, h, i, j)
  // (i, j within the sequence) is decided by an 8-bit Philox4x32-7 draw keyed on (seed, offset,
  // b, h, i, j) (src/common/philox.h), so every backend and the backward draw the same mask.
  float dropout_p = 0.f;
  uint64_t dropout_seed = 0;
  uint64_t dropout_offset = 0;
  // Optional u8 [batch, heads, seqlen_q, seqlen_k] receiving the keep bits (forward only, dense
  // layout only; every element, masked or not). Ignored by attention_backward.
  TensorView dropout_mask_out;
  // Block-sparse: u8 [batch or 1, heads or 1, ceil(sq/block_q), ceil(sk/block_k)]; 0 skips a block.
  // Varlen: sq/sk are max_seqlen_q/k and blocks index positions within each sequence. CUDA takes
  // blocks of multiples of 128 (whole kernel tiles, skipped without element masks); the CPU any.
  TensorView block_mask;
  int block_mask_block_q = 128;
  int block_mask_block_k = 128;
  TensorView cu_seqlens_q;    // int32 [batch+1]: varlen layout when set (cu_seqlens_k must be too)
  TensorView cu_seqlens_k;
  // Varlen: the longest sequence; required (> 0) on CUDA, where cu_seqlens are not read on the
  // host; 0 on the CPU means computed from cu_seqlens (a given value must cover the longest).
  int max_seqlen_q = 0;
  int max_seqlen_k = 0;
  bool deterministic = false;  // backward: bitwise reproducible dq (no float atomics)
  // FP8 forward only: descale factors, fp32 tensors on q's device (read there, so a CUDA call
  // never syncs) of one element (per tensor) or [batch, kv_heads] (per sequence and KV head, as
  // FlashAttention-3's; dense batches; a query head takes its KV head's); unset means 1.
  TensorView q_descale, k_descale, v_descale;
  Stream stream = nullptr;
  Workspace workspace;
};

// out = softmax(scale * q k^T + modifiers) v, per (batch, head); lse as described above.
void attention_forward(const TensorView& q, const TensorView& k, const TensorView& v,
                       const TensorView& out, const TensorView& lse,
                       const AttentionOptions& opts = {});

// Gradients of attention_forward. dq/dk/dv have q/k/v's shapes (strides free, last dim
// contiguous). For GQA/MQA dk/dv are summed over the query heads sharing a KV head.
void attention_backward(const TensorView& q, const TensorView& k, const TensorView& v,
                        const TensorView& out, const TensorView& dout, const TensorView& lse,
                        const TensorView& dq, const TensorView& dk, const TensorView& dv,
                        const AttentionOptions& opts = {});

// Bytes of scratch attention_forward needs on the GPU (the fp8 forward's transposed V; 0 otherwise
// and on the CPU); without opts.workspace it comes from a cached buffer.
size_t attention_forward_workspace_bytes(const TensorView& q, const TensorView& k,
                                         const AttentionOptions& opts = {});

// Bytes of scratch attention_backward needs on the GPU for these shapes (0 on the CPU).
size_t attention_backward_workspace_bytes(const TensorView& q, const TensorView& k,
                                          const AttentionOptions& opts = {});

}  // namespace flashkit
