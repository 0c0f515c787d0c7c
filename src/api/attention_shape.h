// AttentionShape: the validated problem shape src/api/attention.cpp hands to both backends
// (src/cpu/attention_*.cpp and src/cuda/attention/), plus layout helpers that map the dense and the
// varlen layouts onto one (batch, token, head) stride triple so kernels index both the same way.
#pragma once
#include <cstdint>

#include "flashkit/tensor.h"

namespace flashkit {

struct AttentionShape {
  int batch = 0;        // sequences (varlen: cu_seqlens_q.size - 1)
  int heads = 0;        // query heads
  int kv_heads = 0;     // key/value heads; heads % kv_heads == 0 (GQA/MQA when smaller)
  int hdim = 0;         // 8..256, a multiple of 8
  int seqlen_q = 0;     // dense: the length; varlen: the longest sequence (max_seqlen_q)
  int seqlen_k = 0;     // likewise for keys
  bool varlen = false;  // q/k/v are [total, heads, hdim] + cu_seqlens_q/k
  int64_t total_q = 0;  // query tokens in all sequences (dense: batch * seqlen_q)
  int64_t total_k = 0;
  float softmax_scale = 0.f;  // resolved: opts.softmax_scale or 1/sqrt(hdim), never 0
  DType dtype = DType::f32;   // of q, k, v, out, dout, dq, dk, dv
  Device device = Device::cpu;
  int device_id = 0;

  int group() const { return heads / kv_heads; }  // query heads per KV head
};

// Element strides of a q/k/v-like tensor as (batch, token, head). Varlen tensors have no batch
// dim: the batch stride is 0 and a sequence's first token is cu_seqlens[b].
struct TokenStrides {
  int64_t batch, token, head;
};
inline TokenStrides token_strides(const TensorView& t, bool varlen) {
  if (varlen) return {0, t.stride[0], t.stride[1]};
  return {t.stride[0], t.stride[1], t.stride[2]};
}

// Element strides of lse in the same (batch, token, head) form: dense [batch, heads, seqlen_q],
// varlen [heads, total_q] (batch stride 0, token index from cu_seqlens_q).
inline TokenStrides lse_strides(const TensorView& lse, bool varlen) {
  if (varlen) return {0, lse.stride[1], lse.stride[0]};
  return {lse.stride[0], lse.stride[2], lse.stride[1]};
}

}  // namespace flashkit
