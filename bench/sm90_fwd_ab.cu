// Standalone A/B harness for the Hopper forward (bf16, hdim 128 or the -DAB_HDIM given, dense and
// causal): one binary per compile-time variant (the FLASHKIT_SM90_* knobs of
// src/cuda/attention/sm90/fwd_mainloop.h, passed with -D), built on the CPU machine by
// bench/sm90_fwd_ab.sh and run on the GPU by a bench/gpu-*.sh call, so a variant costs seconds
// of device time instead of a library build. Each run first checks O and LSE of small problems
// (lengths that are not tile multiples, seqlen_q != seqlen_k, causal and not) against a naive fp32
// reference kernel, with O poisoned (NaN) before the call; then times the FA2 protocol's shapes
// (batch * seqlen = 16k, hidden 2048) with CUDA events. One line per shape:
//   <variant> d<hdim> <full|causal> s<seqlen> <ms> <TFLOP/s>
// usage: sm90_fwd_ab <variant-name> [seqlen ...]   (default 2048 4096 8192 16384)
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

void run(const Problem& p) {
  const AttnArguments a = p.args();
  if (p.causal)
    flashkit::cuda::attn::run_fwd_sm90<Bf16, kD, PlainScores<true>>(a, nullptr);
  else
    flashkit::cuda::attn::run_fwd_sm90<Bf16, kD, PlainScores<false>>(a, nullptr);
}

// Max |O - O_ref| and |LSE - LSE_ref| (finite rows) on a small problem; O poisoned first.
bool check(int b, int h, int sq, int sk, bool causal, uint32_t seed) {
  Problem p = make(b, h, sq, sk, causal, seed);
  const int64_t no = int64_t(b) * sq * h * kD, nl = int64_t(b) * h * sq;
  float *o_ref, *l_ref;
  AB_CHECK(cudaMalloc(&o_ref, no * 4));
  AB_CHECK(cudaMalloc(&l_ref, nl * 4));
  AB_CHECK(cudaMemset(p.o, 0xff, no * 2));  // NaN
  AB_CHECK(cudaMemset(p.lse, 0xff, nl * 4));
  run(p);
  reference<<<dim3(sq, h, b), 128, sk * 4>>>(p.q, p.k, p.v, o_ref, l_ref, h, sq, sk,
                                           1.f / std::sqrt(float(kD)), causal);
  AB_CHECK(cudaDeviceSynchronize());
  std::vector<Bf16> o(no);
  std::vector<float> or_(no), l(nl), lr(nl);
  AB_CHECK(cudaMemcpy(o.data(), p.o, no * 2, cudaMemcpyDeviceToHost));
  AB_CHECK(cudaMemcpy(or_.data(), o_ref, no * 4, cudaMemcpyDeviceToHost));
  AB_CHECK(cudaMemcpy(l.data(), p.lse, nl * 4, cudaMemcpyDeviceToHost));
  AB_CHECK(cudaMemcpy(lr.data(), l_ref, nl * 4, cudaMemcpyDeviceToHost));
  double eo = 0, el = 0;
  bool ok = true;
  for (int64_t i = 0; i < no; ++i) {
    const double e = std::fabs(double(float(o[i])) - or_[i]);
    if (!(e <= 1e9)) ok = false;  // NaN left over
    eo = std::max(eo, e);
  }
  for (int64_t i = 0; i < nl; ++i) {
    if (std::isinf(lr[i])) {
      ok = ok && std::isinf(l[i]) && l[i] < 0;
      continue;
    }
    el = std::max(el, std::fabs(double(l[i]) - lr[i]));
  }
  // bf16 O of values in [-1, 1]: 2^-8 relative rounding plus P's bf16 rounding.
  ok = ok && eo < 1e-2 && el < 1e-3;
  std::printf("check b%d h%d sq%d sk%d %s: max|dO| %.2e max|dLSE| %.2e %s\n", b, h, sq, sk,
              causal ? "causal" : "full", eo, el, ok ? "ok" : "FAILED");
  cudaFree(o_ref), cudaFree(l_ref);
  release(p);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string name = argc > 1 ? argv[1] : "variant";
  std::vector<int> seqlens;
  for (int i = 2; i < argc; ++i) seqlens.push_back(std::atoi(argv[i]));
  if (seqlens.empty()) seqlens = {2048, 4096, 8192, 16384};
  bool ok = true;
  for (bool causal : {false, true}) {
    ok &= check(2, 3, 1000, 1000, causal, 11);
    ok &= check(1, 2, 333, 1029, causal, 12);
    ok &= check(1, 2, 700, 129, causal, 13);
  }
  if (!ok) {
    std::printf("%s: reference check FAILED\n", name.c_str());
    return 1;
  }
  for (bool causal : {false, true}) {
    for (int s : seqlens) {
      const int b = std::max(1, 16384 / s), h = 2048 / kD;
      Problem p = make(b, h, s, s, causal, 7);
      for (int i = 0; i < 3; ++i) run(p);
      cudaEvent_t e0, e1;
      AB_CHECK(cudaEventCreate(&e0));
      AB_CHECK(cudaEventCreate(&e1));
      std::vector<float> ms;
      const int reps = 10;
      for (int t = 0; t < 7; ++t) {
        AB_CHECK(cudaEventRecord(e0));
        for (int i = 0; i < reps; ++i) run(p);
        AB_CHECK(cudaEventRecord(e1));
        AB_CHECK(cudaEventSynchronize(e1));
        float x = 0;
        AB_CHECK(cudaEventElapsedTime(&x, e0, e1));
        ms.push_back(x / reps);
      }
      std::sort(ms.begin(), ms.end());
      const double flops = 4.0 * b * h * double(s) * s * kD / (causal ? 2 : 1);
      std::printf("%s d%d %s s%d %.4f %.1f\n", name.c_str(), kD, causal ? "causal" : "full", s,
                  ms[ms.size() / 2], flops / (ms[ms.size() / 2] * 1e-3) / 1e12);
      cudaEventDestroy(e0), cudaEventDestroy(e1);
      release(p);
    }
  }
  AB_CHECK(cudaDeviceSynchronize());
  return 0;
}
