// A/B harness for the backward's preprocess (sm80/bwd_pre_post.h bwd_preprocess): D = rowsum(dO * O),
// LSE in log2 units, the dQ accumulator zeroed. Times the library's kernel with and without the
// zero fill against the same body launched with heads fastest in the grid (concurrent CTAs then
// read neighbouring rows of memory), a plain streaming read of O and dO and a plain zero fill (the
// machine's rates for the same bytes), at the FA2 protocol's shapes. bench/NOTES-attention.md
// "Backward prologue v3". Build: nvcc -std=c++20 -O3 -arch=sm_90a --expt-relaxed-constexpr
//   -I src -I include -I <cutlass>/include bench/bwd_pre_ab.cu src/cuda/attention/workspace_layout.cu
//   -o bwd_pre_ab
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "cuda/attention/kernels.h"
#include "cuda/attention/sm80/bwd_pre_post.h"
#include "cuda/attention/tile_config.h"

using namespace flashkit::cuda::attn;
using Element = cutlass::bfloat16_t;

// The library's body (dense, head_dim = kHeadDim) with the grid's first two dimensions swapped:
// heads in x, so consecutive CTAs read neighbouring rows of memory.
template <int kHeadDim, int kBlockM>
__global__ void __launch_bounds__(256) pre_heads_fast(const AttnArguments a, sm80::BwdScratch ws,
                                                       bool zero_dq) {
  const int chunk = blockIdx.y, h = blockIdx.x, b = blockIdx.z;
  constexpr int kSteps = (kHeadDim + 63) / 64;
  const int lane8 = threadIdx.x % 8;
  const int row0 = chunk * 32, row = row0 + threadIdx.x / 8;
  SeqBounds sb(a.cu_seqlens_q, a.cu_seqlens_k, b, a.seqlen_q, a.seqlen_k);
  const int padded = ceil_div(sb.seqlen_q, kBlockM) * kBlockM;
  if (zero_dq && row0 < padded) {
    float4* z = reinterpret_cast<float4*>(
        sm80::dq_chunk<kBlockM, kHeadDim>(ws.dq_accum, sb.q_token(b), b, row0 / kBlockM, h, a.heads) +
        (row0 % kBlockM) * kHeadDim);
    for (int i = threadIdx.x; i < 32 * kHeadDim / 4; i += 256) z[i] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  float sum = 0.f, lse_log2 = INFINITY;
  if (row < sb.seqlen_q) {
    lse_log2 = a.lse[int64_t(b) * a.lse_batch_stride + int64_t(h) * a.lse_head_stride + row] * 1.4426950f;
    const auto* o = static_cast<const Element*>(a.o) + sb.q_offset(a.o_stride, b, h) + int64_t(row) * a.o_stride.row;
    const auto* d_o = static_cast<const Element*>(a.dout) + sb.q_offset(a.do_stride, b, h) + int64_t(row) * a.do_stride.row;
    uint4 x[kSteps], y[kSteps];
    for (int s = 0; s < kSteps; ++s) {
      x[s] = *reinterpret_cast<const uint4*>(o + lane8 * 8 + 64 * s);
      y[s] = *reinterpret_cast<const uint4*>(d_o + lane8 * 8 + 64 * s);
    }
    for (int s = 0; s < kSteps; ++s) {
      const Element* xe = reinterpret_cast<const Element*>(&x[s]);
      const Element* ye = reinterpret_cast<const Element*>(&y[s]);
      for (int i = 0; i < 8; ++i) sum += float(xe[i]) * float(ye[i]);
    }
  }
  sum += __shfl_xor_sync(0xffffffffu, sum, 1);
  sum += __shfl_xor_sync(0xffffffffu, sum, 2);
  sum += __shfl_xor_sync(0xffffffffu, sum, 4);
  if (lane8 == 0 && row < padded) {
    const int64_t at = sm80::row_chunk<kBlockM>(sb.q_token(b), b, row / kBlockM, h, a.heads) + row % kBlockM;
    ws.dsum[at] = sum;
    ws.lse_log2[at] = lse_log2;
  }
}

// Grid-stride reads of two buffers (16-byte loads, 4 in flight a thread), one float out per CTA.
__global__ void __launch_bounds__(256) stream_read(const uint4* x, const uint4* y, size_t n, float* out) {
  float acc = 0.f;
  for (size_t i = blockIdx.x * 256 + threadIdx.x; i < n; i += size_t(gridDim.x) * 256 * 2) {
    uint4 a = x[i], b = y[i], c = {}, d = {};
    const size_t j = i + size_t(gridDim.x) * 256;
    if (j < n) c = x[j], d = y[j];
    acc += __int_as_float(a.x ^ b.y ^ c.z ^ d.w);
  }
  if (acc == 1.2345f) out[blockIdx.x] = acc;
}
__global__ void __launch_bounds__(256) stream_zero(float4* z, size_t n) {
  for (size_t i = blockIdx.x * 256 + threadIdx.x; i < n; i += size_t(gridDim.x) * 256)
    z[i] = make_float4(0.f, 0.f, 0.f, 0.f);
}

template <class F>
float time_us(F&& f, int reps = 50) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int i = 0; i < 3; ++i) f();
  std::vector<float> t;
  for (int r = 0; r < reps; ++r) {
    cudaEventRecord(a);
    f();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    t.push_back(ms * 1e3f);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

template <int kHeadDim>
void run(int batch, int seqlen, int heads) {
  constexpr int kBlockM = tile_config(Pass::bwd, kHeadDim, flashkit::DType::bf16, false).block_m;
  const size_t rows = size_t(batch) * seqlen, elems = rows * heads * kHeadDim;
  void *o, *d_o, *ws_mem, *scratch;
  float* lse;
  cudaMalloc(&o, elems * 2);
  cudaMalloc(&d_o, elems * 2);
  cudaMalloc(&lse, rows * heads * 4);
  cudaMemset(o, 0x3c, elems * 2);
  cudaMemset(d_o, 0x3c, elems * 2);
  cudaMemset(lse, 0, rows * heads * 4);
  AttnArguments a;
  a.o = o;
  a.dout = d_o;
  a.lse = lse;
  a.batch = batch, a.heads = heads, a.kv_heads = heads, a.seqlen_q = a.seqlen_k = seqlen;
  a.total_q = a.total_k = int(rows);
  a.head_dim = kHeadDim;
  a.o_stride = a.do_stride = {int64_t(seqlen) * heads * kHeadDim, int64_t(heads) * kHeadDim, kHeadDim};
  a.lse_batch_stride = int64_t(heads) * seqlen, a.lse_head_stride = seqlen, a.lse_row_stride = 1;
  BwdWorkspace wl = bwd_workspace_layout(batch, heads, a.total_q, seqlen, kHeadDim);
  cudaMalloc(&ws_mem, wl.bytes);
  a.workspace = ws_mem;
  char* base = static_cast<char*>(ws_mem);
  sm80::BwdScratch ws{reinterpret_cast<float*>(base + wl.dq_accum), reinterpret_cast<float*>(base + wl.dsum),
                      reinterpret_cast<float*>(base + wl.lse_log2), nullptr, nullptr, nullptr, 0, 0};
  cudaMalloc(&scratch, 1 << 20);
  const dim3 grid(unsigned(ceil_div(ceil_div(seqlen, kBlockM) * kBlockM, 32)), unsigned(heads), unsigned(batch));
  const dim3 grid_h(unsigned(heads), grid.x, unsigned(batch));
  const double rw = 2.0 * elems * 2, zb = double(wl.dsum);  // bytes read, bytes zeroed
  auto rate = [&](float us, double bytes) { return bytes / us / 1e6; };
  const float t0 = time_us([&] { sm80::bwd_preprocess<Element, kHeadDim, kBlockM><<<grid, 256>>>(a, ws, true); });
  const float t1 = time_us([&] { sm80::bwd_preprocess<Element, kHeadDim, kBlockM><<<grid, 256>>>(a, ws, false); });
  const float t2 = time_us([&] { pre_heads_fast<kHeadDim, kBlockM><<<grid_h, 256>>>(a, ws, true); });
  const float t3 = time_us([&] { pre_heads_fast<kHeadDim, kBlockM><<<grid_h, 256>>>(a, ws, false); });
  const float t4 = time_us([&] { stream_read<<<132 * 8, 256>>>((const uint4*)o, (const uint4*)d_o, elems * 2 / 16, (float*)scratch); });
  const float t5 = time_us([&] { stream_zero<<<132 * 8, 256>>>((float4*)ws.dq_accum, size_t(zb) / 16); });
  const float t6 = time_us([&] { cudaMemsetAsync(ws.dq_accum, 0, size_t(zb)); });
  std::printf("hdim %3d b%d s%5d h%2d | library +zero %6.1f us (%.2f TB/s) | library read %6.1f (%.2f) | "
              "heads-fast +zero %6.1f (%.2f) | heads-fast read %6.1f (%.2f) | stream read %6.1f (%.2f) | "
              "stream zero %6.1f (%.2f) | memset %6.1f (%.2f)\n",
              kHeadDim, batch, seqlen, heads, t0, rate(t0, rw + zb), t1, rate(t1, rw), t2, rate(t2, rw + zb),
              t3, rate(t3, rw), t4, rate(t4, rw), t5, rate(t5, zb), t6, rate(t6, zb));
  if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) std::printf("CUDA error %s\n", cudaGetErrorString(e));
  cudaFree(o), cudaFree(d_o), cudaFree(lse), cudaFree(ws_mem), cudaFree(scratch);
}

int main() {
  for (int s : {2048, 4096, 8192}) {
    run<128>(16384 / s, s, 16);
    run<64>(16384 / s, s, 32);
    run<256>(16384 / s, s, 8);
  }
}
