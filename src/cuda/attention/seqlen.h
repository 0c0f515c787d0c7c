// Where sequence b lives: dense tensors step by the batch stride, varlen ones start at
// cu_seqlens[b] rows and take their length from it. Used by every attention kernel.
#pragma once
#include <cstdint>

#include "cuda/attention/params.h"

namespace flashkit::cuda::attn {

struct SeqBounds {
  int seqlen_q, seqlen_k;
  int q_start, k_start;  // first row in memory (varlen), else 0
  bool varlen;

  __device__ __forceinline__ SeqBounds(const int* cu_q, const int* cu_k, int b, int sq, int sk) {
    varlen = cu_q != nullptr;
    q_start = varlen ? cu_q[b] : 0;
    k_start = varlen ? cu_k[b] : 0;
    seqlen_q = varlen ? cu_q[b + 1] - q_start : sq;
    seqlen_k = varlen ? cu_k[b + 1] - k_start : sk;
  }
  // Element offset of (sequence b, row 0, head h) in a q-like / k-like tensor.
  __device__ __forceinline__ int64_t q_offset(const Strides& s, int b, int h) const {
    return (varlen ? int64_t(q_start) * s.row : int64_t(b) * s.batch) + int64_t(h) * s.head;
  }
  __device__ __forceinline__ int64_t k_offset(const Strides& s, int b, int h) const {
    return (varlen ? int64_t(k_start) * s.row : int64_t(b) * s.batch) + int64_t(h) * s.head;
  }
  // Row index of query row 0 of this sequence among all query tokens ([tokens, ...] scratch).
  __device__ __forceinline__ int q_token(int b) const { return varlen ? q_start : b * seqlen_q; }
};

__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

}  // namespace flashkit::cuda::attn
