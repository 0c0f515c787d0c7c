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
#include "../src/cuda/attention/tile_counters.cu"  // the forward's tile counters

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

// Block-wide max / sum of one value a thread (blockDim.x a multiple of 32, <= 1024).
template <class F>
__device__ float block_reduce(float x, float init, F f) {
  __shared__ float red[32];
  for (int o = 16; o; o /= 2) x = f(x, __shfl_xor_sync(~0u, x, o));
  __syncthreads();
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = x;
  __syncthreads();
  x = init;
  for (int w = 0; w < int(blockDim.x / 32); ++w) x = f(x, red[w]);
  return x;
}

// AB_BLOCKMASK_DENSITY (the forward harness): every query block of 128 rows keeps
// max(1, round(density x key blocks)) random key blocks of 128 (bench/variants.py's rule; with
// AB_BLOCKMASK_BAND a contiguous run of them at a random offset), one [nq, nk] u8 mask for every
// batch and head; the reference drops the same keys.
struct BlockMask {
  const uint8_t* mask = nullptr;  // device, [nq, nk]; null: off
  int nk = 0;
};
__device__ __forceinline__ bool dropped(const BlockMask& m, int i, int j) {
  return m.mask && !m.mask[(i / 128) * m.nk + j / 128];
}

// Row i of head (b, hh), [b, s, h, d] layout, bottom-right causal: p[j] = exp(scale q.k_j - mx)
// (0 where masked), for the block's threads; returns mx and the row sum l (every thread).
__device__ void softmax_row(const Bf16* q, const Bf16* k, float* p, int b, int i, int h, int hh,
                            int sq, int sk, float scale, bool causal, float& mx, float& l,
                            BlockMask bm = {}) {
  const Bf16* qr = q + ((int64_t(b) * sq + i) * h + hh) * kD;
  mx = -INFINITY;
  for (int j = threadIdx.x; j < sk; j += blockDim.x) {
    const Bf16* kr = k + ((int64_t(b) * sk + j) * h + hh) * kD;
    float s = 0.f;
    for (int d = 0; d < kD; ++d) s += float(qr[d]) * float(kr[d]);
    const bool outside = (causal && j > i + sk - sq) || dropped(bm, i, j)
#ifdef AB_WINDOW  // the forward harness's sliding window (AB_WINDOW, AB_WINDOW)
                         || j < i + sk - sq - AB_WINDOW || j > i + sk - sq + AB_WINDOW
#endif
        ;
    s = outside ? -INFINITY : s * scale;
    p[j] = s;
    mx = fmaxf(mx, s);
  }
  mx = block_reduce(mx, -INFINITY, [](float a, float c) { return fmaxf(a, c); });
  l = 0.f;
  for (int j = threadIdx.x; j < sk; j += blockDim.x) {
    p[j] = mx == -INFINITY ? 0.f : expf(p[j] - mx);
    l += p[j];
  }
  l = block_reduce(l, 0.f, [](float a, float c) { return a + c; });
}

// One block per (query row, head, batch): O and LSE.
__global__ void reference(const Bf16* q, const Bf16* k, const Bf16* v, float* o, float* lse, int h,
                          int sq, int sk, float scale, bool causal, BlockMask bm = {}) {
  extern __shared__ float p[];  // sk scores
  const int i = blockIdx.x, hh = blockIdx.y, b = blockIdx.z;
  float mx, l;
  softmax_row(q, k, p, b, i, h, hh, sq, sk, scale, causal, mx, l, bm);
  for (int d = threadIdx.x; d < kD; d += blockDim.x) {
    float acc = 0.f;
    // Not unrolled: ptxas merged the tail's p[j] reads into one 12-byte load that memcheck flagged.
#pragma unroll 1
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
  BlockMask bm;  // AB_BLOCKMASK_DENSITY only
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
#ifdef AB_WINDOW
    a.window_left = a.window_right = AB_WINDOW;
#endif
    if (bm.mask) {  // one grid for every batch and head
      a.block_mask = bm.mask;
      a.bm_batch_stride = a.bm_head_stride = 0, a.bm_row_stride = bm.nk, a.bm_col_stride = 1;
      a.bm_block_q = a.bm_block_k = 128;
    }
    return a;
  }
};

#ifdef AB_BLOCKMASK_DENSITY
// The mask of AB_BLOCKMASK_DENSITY for sq x sk (causal: a row's visible blocks, its diagonal kept).
BlockMask make_block_mask(int sq, int sk, bool causal, uint32_t seed) {
  const int nq = (sq + 127) / 128, nk = (sk + 127) / 128;
  std::vector<uint8_t> m(size_t(nq) * nk, 0);
  uint32_t r = seed * 2654435761u + 12345u;
  auto next = [&] { return r = r * 1664525u + 1013904223u, r >> 8; };
  for (int i = 0; i < nq; ++i) {
    const int diag = causal ? (i * 128 + 127 + sk - sq) / 128 : nk - 1;
    const int cols = std::min(nk, std::max(1, diag + 1));
    const int keep = std::max(1, int(std::lround(AB_BLOCKMASK_DENSITY * cols)));
    std::vector<int> idx(cols);
    for (int j = 0; j < cols; ++j) idx[j] = j;
#ifdef AB_BLOCKMASK_BAND  // a contiguous run of `keep` blocks at a random offset (not causal)
    const int start = int(next() % uint32_t(cols - keep + 1));
    for (int j = 0; j < keep; ++j) idx[j] = start + j;
#else
    for (int j = 0; j < keep; ++j) std::swap(idx[j], idx[j + next() % (cols - j)]);
#endif
    bool has_diag = false;
    for (int j = 0; j < keep; ++j) has_diag |= idx[j] == cols - 1;
    if (causal && !has_diag) idx[0] = cols - 1;
    for (int j = 0; j < keep; ++j) m[size_t(i) * nk + idx[j]] = 1;
  }
  uint8_t* d = nullptr;
  AB_CHECK(cudaMalloc(&d, m.size()));
  AB_CHECK(cudaMemcpy(d, m.data(), m.size(), cudaMemcpyHostToDevice));
  return {d, nk};
}
#endif

Problem make(int b, int h, int sq, int sk, bool causal, uint32_t seed) {
  Problem p{b, h, sq, sk, causal, nullptr, nullptr, nullptr, nullptr, nullptr, {}};
#ifdef AB_BLOCKMASK_DENSITY
  p.bm = make_block_mask(sq, sk, causal, seed);
#endif
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
  if (p.bm.mask) cudaFree(const_cast<uint8_t*>(p.bm.mask));
}

// The Hopper forward of p (O and LSE).
void run_forward(const Problem& p) {
  AttnArguments a = p.args();
#ifdef AB_FIXED  // the sm90 forward's fixed tile order for causal tiles too
  a.fixed_tile_order = true;
#endif
#if defined(AB_BLOCKMASK_DENSITY)
  using flashkit::cuda::attn::GeneralScores;
  namespace mods = flashkit::cuda::attn::mods;
  flashkit::cuda::attn::run_fwd_sm90<Bf16, kD, GeneralScores<mods::kBlockSparse>>(a, nullptr);
#elif defined(AB_WINDOW)
  flashkit::cuda::attn::run_fwd_sm90<Bf16, kD, flashkit::cuda::attn::GeneralScores<0>>(a, nullptr);
#else
  if (p.causal)
    flashkit::cuda::attn::run_fwd_sm90<Bf16, kD, PlainScores<true>>(a, nullptr);
  else
    flashkit::cuda::attn::run_fwd_sm90<Bf16, kD, PlainScores<false>>(a, nullptr);
#endif
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

// A reference check's problem: batch, heads, seqlen_q, seqlen_k, seed.
struct CheckShape {
  int b, h, sq, sk;
  uint32_t seed;
};

// The harnesses' main: check(b, h, sq, sk, causal, seed) on every shape, dense and causal (any
// failure ends the run with rc 1), then one timing line per (causal, seqlen) of the FA2
// protocol's shapes (batch * seqlen = 16k, hidden 2048): time(causal, s, b, h) returns (ms,
// flops). argv: <variant-name> [seqlen ...].
template <class Check, class Time>
int harness_main(int argc, char** argv, std::initializer_list<CheckShape> shapes, Check check,
                 Time time) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a hung variant still shows how far it got
  const std::string name = argc > 1 ? argv[1] : "variant";
  std::vector<int> seqlens;
  for (int i = 2; i < argc; ++i) seqlens.push_back(std::atoi(argv[i]));
  if (seqlens.empty()) seqlens = {2048, 4096, 8192, 16384};
  bool ok = true;
  for (bool causal : {false, true})
    for (const CheckShape& c : shapes) ok &= check(c.b, c.h, c.sq, c.sk, causal, c.seed);
  if (!ok) {
    std::printf("%s: reference check FAILED\n", name.c_str());
#ifndef AB_TIMING_ONLY  // variants that skip work (wrong by design) report the check and go on
    return 1;
#endif
  }
  for (bool causal : {false, true}) {
    for (int s : seqlens) {
      if (s <= 0) continue;  // seqlen 0: the checks only (compute-sanitizer runs)
      const int b = std::max(1, 16384 / s), h = 2048 / kD;
      const auto [ms, flops] = time(causal, s, b, h);
      std::printf("%s d%d %s s%d %.4f %.1f\n", name.c_str(), kD, causal ? "causal" : "full", s, ms,
                  flops / (ms * 1e-3) / 1e12);
    }
  }
  AB_CHECK(cudaDeviceSynchronize());
  return 0;
}

