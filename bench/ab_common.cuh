// Shared pieces of the standalone A/B harnesses (bench/sm90_fwd_ab.cu, bench/sm90_bwd_ab.cu):
// error check, random bf16 fill (variance 1, like randn), [b, s, h, d] problems with their
// AttnArguments, a naive fp32 reference forward (one block per query row) and a CUDA-event timer
// (3 warm-up calls, median of 7 x 10 calls). Included once per harness translation unit.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cuda/attention/score_policy.h"
#include "cuda/attention/sm90/fwd_launch.h"

#ifndef AB_HDIM
#define AB_HDIM 128
#endif

namespace {

using flashkit::cuda::attn::AttnArguments;
using flashkit::cuda::attn::PlainScores;
using Bf16 = cutlass::bfloat16_t;
constexpr int kD = AB_HDIM;

#define AB_CHECK(x)                                                                    \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(2);                                                                    \
    }                                                                                  \
  } while (0)

// One block per (query row, head, batch); layout [b, s, h, d]; bottom-right causal.
__global__ void reference(const Bf16* q, const Bf16* k, const Bf16* v, float* o, float* lse,
                          int h, int sq, int sk, float scale, bool causal) {
  extern __shared__ float p[];  // sk scores
  __shared__ float red[32];
  const int i = blockIdx.x, hh = blockIdx.y, b = blockIdx.z;
  const Bf16* qr = q + ((int64_t(b) * sq + i) * h + hh) * kD;
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < sk; j += blockDim.x) {
    const Bf16* kr = k + ((int64_t(b) * sk + j) * h + hh) * kD;
    float s = 0.f;
    for (int d = 0; d < kD; ++d) s += float(qr[d]) * float(kr[d]);
    s = (causal && j > i + sk - sq) ? -INFINITY : s * scale;
    p[j] = s;
    mx = fmaxf(mx, s);
  }
  for (int o2 = 16; o2; o2 /= 2) mx = fmaxf(mx, __shfl_xor_sync(~0u, mx, o2));
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = mx;
  __syncthreads();
  mx = -INFINITY;
  for (int w = 0; w < int(blockDim.x / 32); ++w) mx = fmaxf(mx, red[w]);
  __syncthreads();
  float l = 0.f;
  for (int j = threadIdx.x; j < sk; j += blockDim.x) {
    p[j] = mx == -INFINITY ? 0.f : expf(p[j] - mx);
    l += p[j];
  }
  for (int o2 = 16; o2; o2 /= 2) l += __shfl_xor_sync(~0u, l, o2);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = l;
  __syncthreads();
  l = 0.f;
  for (int w = 0; w < int(blockDim.x / 32); ++w) l += red[w];
  for (int d = threadIdx.x; d < kD; d += blockDim.x) {
    float acc = 0.f;
    for (int j = 0; j < sk; ++j) acc += p[j] * float(v[((int64_t(b) * sk + j) * h + hh) * kD + d]);
    o[((int64_t(b) * sq + i) * h + hh) * kD + d] = l > 0.f ? acc / l : 0.f;
  }
  if (threadIdx.x == 0) lse[(int64_t(b) * h + hh) * sq + i] = l > 0.f ? mx + logf(l) : -INFINITY;
}

__global__ void fill(Bf16* x, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t s = uint32_t(i) * 2654435761u ^ seed * 2246822519u;
    s ^= s >> 15, s *= 2246822519u, s ^= s >> 13, s *= 3266489917u, s ^= s >> 16;
    x[i] = Bf16((float(s >> 8) * (2.f / 16777216.f) - 1.f) * 1.7320508f);  // variance 1, like randn
  }
}

struct Problem {
  int b, h, sq, sk;
  bool causal;
  Bf16 *q, *k, *v, *o;
  float* lse;
  AttnArguments args() const {
    AttnArguments a;
    a.q = q, a.k = k, a.v = v, a.o = o, a.lse = lse;
    const int64_t row = int64_t(h) * kD;
    a.q_stride = a.o_stride = {sq * row, row, kD};
    a.k_stride = a.v_stride = {sk * row, row, kD};
    a.lse_batch_stride = int64_t(h) * sq, a.lse_head_stride = sq, a.lse_row_stride = 1;
    a.batch = b, a.heads = h, a.kv_heads = h, a.seqlen_q = sq, a.seqlen_k = sk;
    a.total_q = b * sq, a.total_k = b * sk, a.head_dim = kD;
    a.softmax_scale = 1.f / std::sqrt(float(kD));
    a.causal = causal;
    return a;
  }
};

Problem make(int b, int h, int sq, int sk, bool causal, uint32_t seed) {
  Problem p{b, h, sq, sk, causal, nullptr, nullptr, nullptr, nullptr, nullptr};
  const int64_t nq = int64_t(b) * sq * h * kD, nk = int64_t(b) * sk * h * kD;
  AB_CHECK(cudaMalloc(&p.q, nq * 2));
  AB_CHECK(cudaMalloc(&p.o, nq * 2));
  AB_CHECK(cudaMalloc(&p.k, nk * 2));
  AB_CHECK(cudaMalloc(&p.v, nk * 2));
  AB_CHECK(cudaMalloc(&p.lse, int64_t(b) * h * sq * 4));
  fill<<<1024, 256>>>(p.q, nq, seed);
  fill<<<1024, 256>>>(p.k, nk, seed + 1);
  fill<<<1024, 256>>>(p.v, nk, seed + 2);
  AB_CHECK(cudaGetLastError());
  return p;
}
void release(Problem& p) {
  cudaFree(p.q), cudaFree(p.k), cudaFree(p.v), cudaFree(p.o), cudaFree(p.lse);
}

// The Hopper forward of p (O and LSE).
void run_forward(const Problem& p) {
  const AttnArguments a = p.args();
  if (p.causal)
    flashkit::cuda::attn::run_fwd_sm90<Bf16, kD, PlainScores<true>>(a, nullptr);
  else
    flashkit::cuda::attn::run_fwd_sm90<Bf16, kD, PlainScores<false>>(a, nullptr);
}

// Median milliseconds of one call of f over 7 batches of 10, after 3 warm-up calls.
template <class F>
float median_ms(F f) {
  for (int i = 0; i < 3; ++i) f();
  cudaEvent_t e0, e1;
  AB_CHECK(cudaEventCreate(&e0));
  AB_CHECK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int t = 0; t < 7; ++t) {
    AB_CHECK(cudaEventRecord(e0));
    for (int i = 0; i < 10; ++i) f();
    AB_CHECK(cudaEventRecord(e1));
    AB_CHECK(cudaEventSynchronize(e1));
    float x = 0;
    AB_CHECK(cudaEventElapsedTime(&x, e0, e1));
    ms.push_back(x / 10);
  }
  cudaEventDestroy(e0), cudaEventDestroy(e1);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

