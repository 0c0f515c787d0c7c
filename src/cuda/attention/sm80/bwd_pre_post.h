// The backward's two small memory-bound kernels around the main one (FA2 Algorithm 2):
// preprocess computes D = rowsum(dO * O) per (token, head) in fp32 and zeroes the dQ accumulator
// and the deterministic-mode semaphores; convert_dq writes dQ = scale * dq_accum in q's dtype.
#pragma once
#include <cuda_runtime.h>

#include "cuda/attention/params.h"
#include "cuda/attention/seqlen.h"

namespace flashkit::cuda::attn::sm80 {

// 16 bytes of Element as 8 floats.
template <class Element>
__device__ __forceinline__ void load8(const Element* p, float (&f)[8]) {
  uint4 u = *reinterpret_cast<const uint4*>(p);
  const Element* e = reinterpret_cast<const Element*>(&u);
  CUTE_UNROLL
  for (int i = 0; i < 8; ++i) f[i] = float(e[i]);
}

struct BwdScratch {
  float* dq_accum;  // [total_q, heads, kHeadDim]
  float* dsum;      // [total_q, heads]
  int* semaphore;   // [batch, heads, q blocks] or null
};

// One warp per 4 rows: 8 lanes per (token, head) row, 8 elements each per step.
template <class Element, int kHeadDim>
__global__ void __launch_bounds__(256) bwd_preprocess(const AttnArguments a, BwdScratch ws, int sem_count) {
  const int lane8 = threadIdx.x % 8;
  const int row = blockIdx.x * 32 + threadIdx.x / 8;  // over seqlen_q (the grid covers the longest)
  const int h = blockIdx.y, b = blockIdx.z;
  if (ws.semaphore) {
    int i = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x * 256 + blockIdx.x * 256 + threadIdx.x;
    if (i < sem_count) ws.semaphore[i] = 0;
  }
  SeqBounds sb(a.cu_seqlens_q, a.cu_seqlens_k, b, a.seqlen_q, a.seqlen_k);
  if (row >= sb.seqlen_q) return;
  const auto* o = static_cast<const Element*>(a.o) + sb.q_offset(a.o_stride, b, h) + int64_t(row) * a.o_stride.row;
  const auto* d_o = static_cast<const Element*>(a.dout) + sb.q_offset(a.do_stride, b, h) + int64_t(row) * a.do_stride.row;
  const int64_t token = sb.q_token(b) + row;
  float* acc = ws.dq_accum + (token * a.heads + h) * kHeadDim;
  float sum = 0.f;
  for (int c = lane8 * 8; c < kHeadDim; c += 64) {
    if (c < a.head_dim) {
      float x[8], y[8];
      load8(o + c, x);
      load8(d_o + c, y);
      CUTE_UNROLL
      for (int i = 0; i < 8; ++i) sum += x[i] * y[i];
    }
    reinterpret_cast<float4*>(acc + c)[0] = make_float4(0.f, 0.f, 0.f, 0.f);
    reinterpret_cast<float4*>(acc + c)[1] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  sum += __shfl_xor_sync(0xffffffffu, sum, 1);
  sum += __shfl_xor_sync(0xffffffffu, sum, 2);
  sum += __shfl_xor_sync(0xffffffffu, sum, 4);
  if (lane8 == 0) ws.dsum[token * a.heads + h] = sum;
}

template <class Element, int kHeadDim>
__global__ void __launch_bounds__(256) bwd_convert_dq(const AttnArguments a, const float* dq_accum) {
  const int lane8 = threadIdx.x % 8;
  const int row = blockIdx.x * 32 + threadIdx.x / 8;
  const int h = blockIdx.y, b = blockIdx.z;
  SeqBounds sb(a.cu_seqlens_q, a.cu_seqlens_k, b, a.seqlen_q, a.seqlen_k);
  if (row >= sb.seqlen_q) return;
  auto* dq = static_cast<Element*>(a.dq) + sb.q_offset(a.dq_stride, b, h) + int64_t(row) * a.dq_stride.row;
  const float* acc = dq_accum + ((sb.q_token(b) + int64_t(row)) * a.heads + h) * kHeadDim;
  for (int c = lane8 * 8; c < a.head_dim; c += 64) {
    float4 x0 = reinterpret_cast<const float4*>(acc + c)[0];
    float4 x1 = reinterpret_cast<const float4*>(acc + c)[1];
    float f[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
    uint4 u;
    Element* e = reinterpret_cast<Element*>(&u);
    CUTE_UNROLL
    for (int i = 0; i < 8; ++i) e[i] = Element(f[i] * a.softmax_scale);
    *reinterpret_cast<uint4*>(dq + c) = u;
  }
}

}  // namespace flashkit::cuda::attn::sm80
