// The backward's two small memory-bound kernels around the main one (FA2 Algorithm 2):
// preprocess computes D = rowsum(dO * O) per (token, head) in fp32 and copies LSE in log2 units
// beside it, in blocks of block_m rows padded past the sequence's end; convert_dq writes
// dQ = scale * dq_accum in q's dtype, reading the accumulator in the fragment order the main
// kernel added it in (see dq_chunk below).
#pragma once
#include <cuda_runtime.h>

#include <cmath>

#include "cuda/attention/params.h"
#include "cuda/attention/seqlen.h"
#include "cuda/attention/sm80/traits.h"

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
  float* dq_accum;  // [chunk, heads, block_m * hdim] in MMA-fragment order (dq_chunk)
  float* dsum;      // [chunk, heads, block_m]: D, 0 on padding rows (row_chunk)
  float* lse_log2;  // [chunk, heads, block_m]: LSE * log2(e), +inf on padding / keyless rows
  int* semaphore;   // [batch, heads, q blocks] or null
};

// dQ of (sequence b, query block m, head h) accumulates in one chunk of block_m * hdim floats,
// stored as [j][thread][4] for the 4-float groups j of each thread's dQ fragment: one warp's
// 16-byte atomics then cover 512 contiguous bytes instead of 16 scattered rows. Chunks are
// numbered floor(first token / block_m) + b + m, which never overlap between varlen sequences
// (workspace_layout.cu sizes ceil(total_q / block_m) + batch of them).
template <int kBlockM>
__device__ __forceinline__ int64_t row_chunk(int64_t first_token, int b, int m, int h, int heads) {
  return ((first_token / kBlockM + b + m) * heads + h) * kBlockM;
}
template <int kBlockM, int kHeadDim>
__device__ __forceinline__ float* dq_chunk(float* dq_accum, int64_t first_token, int b, int m, int h,
                                           int heads) {
  return dq_accum + row_chunk<kBlockM>(first_token, b, m, h, heads) * kHeadDim;
}

// One warp per 4 rows: 8 lanes per (token, head) row, 8 elements each per step. Rows from the
// sequence's end to its last query block's end are padding (LSE +inf makes P = 0, D = 0), so the
// main kernel reads whole blocks without bounds checks.
template <class Element, int kHeadDim, int kBlockM>
__global__ void __launch_bounds__(256) bwd_preprocess(const AttnArguments a, BwdScratch ws) {
  const int lane8 = threadIdx.x % 8;
  const int row = blockIdx.x * 32 + threadIdx.x / 8;  // over seqlen_q (the grid covers the longest)
  const int h = blockIdx.y, b = blockIdx.z;
  SeqBounds sb(a.cu_seqlens_q, a.cu_seqlens_k, b, a.seqlen_q, a.seqlen_k);
  const bool valid = row < sb.seqlen_q;
  float sum = 0.f, lse_log2 = INFINITY;
  if (valid) {
    const auto* o = static_cast<const Element*>(a.o) + sb.q_offset(a.o_stride, b, h) + int64_t(row) * a.o_stride.row;
    const auto* d_o = static_cast<const Element*>(a.dout) + sb.q_offset(a.do_stride, b, h) + int64_t(row) * a.do_stride.row;
    for (int c = lane8 * 8; c < a.head_dim; c += 64) {
      float x[8], y[8];
      load8(o + c, x);
      load8(d_o + c, y);
      CUTE_UNROLL
      for (int i = 0; i < 8; ++i) sum += x[i] * y[i];
    }
    const float l = a.lse[int64_t(b) * a.lse_batch_stride + int64_t(h) * a.lse_head_stride +
                          (int64_t(sb.q_start) + row) * a.lse_row_stride];
    lse_log2 = l == -INFINITY ? INFINITY : l * float(M_LOG2E);  // a row without keys: P = 0
  }
  sum += __shfl_xor_sync(0xffffffffu, sum, 1);  // every lane takes part (no early exit above)
  sum += __shfl_xor_sync(0xffffffffu, sum, 2);
  sum += __shfl_xor_sync(0xffffffffu, sum, 4);
  if (lane8 == 0 && row < ceil_div(sb.seqlen_q, kBlockM) * kBlockM) {
    const int64_t at = row_chunk<kBlockM>(sb.q_token(b), b, row / kBlockM, h, a.heads) + row % kBlockM;
    ws.dsum[at] = sum;
    ws.lse_log2[at] = lse_log2;
  }
}

// One CTA per (query block, head, batch), threads laid out like the main kernel's dQ MMA so each
// thread reads back exactly the fragment it added (coalesced 16-byte loads).
template <class Element, class MmaDQ, int kThreads, int kBlockM, int kHeadDim>
__global__ void __launch_bounds__(kThreads) bwd_convert_dq(const AttnArguments a, float* dq_accum) {
  const int m = blockIdx.x, h = blockIdx.y, b = blockIdx.z, tid = threadIdx.x;
  SeqBounds sb(a.cu_seqlens_q, a.cu_seqlens_k, b, a.seqlen_q, a.seqlen_k);
  if (m * kBlockM >= sb.seqlen_q) return;
  const float4* chunk = reinterpret_cast<const float4*>(
      dq_chunk<kBlockM, kHeadDim>(dq_accum, sb.q_token(b), b, m, h, a.heads));
  auto coord = MmaDQ{}.get_thread_slice(tid).partition_C(
      make_identity_tensor(Shape<Int<kBlockM>, Int<kHeadDim>>{}));
  auto* dq = static_cast<Element*>(a.dq) + sb.q_offset(a.dq_stride, b, h) +
             int64_t(m) * kBlockM * a.dq_stride.row;
  const int rows = sb.seqlen_q - m * kBlockM;
  CUTE_UNROLL
  for (int j = 0; j < size(coord) / 4; ++j) {
    float4 v = chunk[j * kThreads + tid];
    float f[4] = {v.x, v.y, v.z, v.w};
    CUTE_UNROLL
    for (int q = 0; q < 4; q += 2) {  // (row r, cols c..c+1), then (row r+8, cols c..c+1)
      int row = get<0>(coord(4 * j + q)), col = get<1>(coord(4 * j + q));
      if (row < rows && col < a.head_dim) {
        uint32_t packed;
        Element* e = reinterpret_cast<Element*>(&packed);
        e[0] = Element(f[q] * a.softmax_scale);
        e[1] = Element(f[q + 1] * a.softmax_scale);
        *reinterpret_cast<uint32_t*>(dq + int64_t(row) * a.dq_stride.row + col) = packed;
      }
    }
  }
}

}  // namespace flashkit::cuda::attn::sm80
