// How fast can one GPU stream a decode K/V cache, by loader and by bytes in flight? (bench/NOTES-
// decode.md, session 31). No attention is computed: each CTA streams the K and V rows of one
// (sequence, head) token range into shared memory (or registers) the way a decode kernel would,
// touches one 16-byte word a thread of every stage, and moves on; `work` adds a per-chunk spin
// (clock cycles a warp) standing in for the chunk's math. The cache is bf16 [b, ctx, h, d]
// (`s`: the decode API's layout) or [b, h, ctx, d] (`m`: head-major, torch's), one allocation read
// either way. Timing: CUDA events around each launch after a 256 MiB memset (the write flush of
// bench/decode.py), median of `reps`.
// Configs, one per argument: loader:layout:stages:tokens:ctas_per_sm:splits[:work]
//   loader  tma    one thread issues 4-D tensor-map boxes of `tokens` x 64 dims (128-byte
//                  swizzle, evict-first), per stage K slab 0, V slab 0, K slab 1, V slab 1 (the
//                  decode kernel's order, src/cuda/decode/attend.h)
//           tmakk  the same boxes, K's slabs then V's
//           tman   as tma, normal L2 priority
//           tma1   one box of `tokens` x d per tensor (no swizzle)
//           cpa    all threads issue 16-byte cp.async (the cp.async loader)
//           cpae   the same with an evict-first L2 hint
//           cpz    cp.async with the zero-fill operand (src-size), as the decode kernel's
//           cpm    cp.async completing on the stage's mbarrier (cp.async.mbarrier.arrive.noinc),
//                  the TMA loop's one CTA barrier a chunk (the decode kernel's v9 loader)
//           cpmp   cpm into rows padded by 16 bytes (the decode kernel's cp.async stages)
//           ldg    16-byte loads into registers, one stage in flight
//   stages  ring depth (1-4); tokens per stage (K and V: 2 x tokens x d x 2 bytes)
//   ctas_per_sm  shared memory padded so that at most this many CTAs share a SM
//   splits  CTAs per (sequence, head): grid = b x h x splits
// nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a -I src -o stream bench/decode_stream_micro.cu
// usage: stream [--shape b,h,ctx,d] [--reps n] config...
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/common/mbarrier.h"
#include "cuda/decode/tma_ops.h"
#include "micro_check.cuh"

using flashkit::cuda::mbar_init;
using flashkit::cuda::mbar_wait;
using flashkit::cuda::smem_addr;
using namespace flashkit::cuda::decoding;

enum Loader { kTma, kTmaKK, kTmaNormal, kTma1, kCpa, kCpaEvict, kCpaZfill, kCpaMbar, kCpaMbarPad, kLdg };

struct Args {
  CUtensorMap k_map, v_map;  // kTma*: 64-dim boxes (128-byte swizzle) or d-dim boxes (kTma1)
  const uint4* k;
  const uint4* v;
  long long so, st, sh;  // strides in elements: sequence, token, head
  int heads, ctx, d, splits, tokens, work;
  unsigned* sink;
};

__device__ __forceinline__ void spin(int cycles) {
  if (cycles <= 0) return;
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

template <int L, int S>
__global__ void __launch_bounds__(128) stream_kernel(const __grid_constant__ Args a) {
  extern __shared__ __align__(1024) char smem_raw[];
  char* smem = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  const int tid = threadIdx.x;
  const int tile = blockIdx.x / a.splits, split = blockIdx.x % a.splits;
  const int seq = tile / a.heads, head = tile % a.heads;
  const int per = a.ctx / a.splits, lo = split * per, chunks = per / a.tokens;
  const int stage_bytes = 2 * a.tokens * (a.d + (L == kCpaMbarPad ? 8 : 0)) * 2;
  unsigned acc = 0;
  if constexpr (L == kLdg) {
    const int row16 = a.d / 8;  // 16-byte words a token row
    const int words = a.tokens * row16;
    for (int c = 0; c < chunks; ++c) {
      const int base = lo + c * a.tokens;
      for (int g = 0; g < words; g += 8 * 128) {  // 8 words of K and 8 of V a thread in flight
        uint4 r[16];
#pragma unroll
        for (int i = 0; i < 16; ++i) {
          const int w = g + tid + (i / 2) * 128;
          const int t = base + w / row16, x = w % row16;
          const uint4* src = (i % 2 ? a.v : a.k) + (seq * a.so + t * a.st + head * a.sh) / 8 + x;
          r[i] = w < words ? __ldcs(src) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int i = 0; i < 16; ++i) acc ^= r[i].x ^ r[i].w;
      }
      spin(a.work);
    }
  } else {
    uint64_t* full = reinterpret_cast<uint64_t*>(smem + S * stage_bytes);
    if (tid == 0)
      for (int s = 0; s < S; ++s) mbar_init(full + s, L == kCpaMbar || L == kCpaMbarPad ? 128 : 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    __syncthreads();
    const uint64_t policy = l2_kv_policy(L != kTmaNormal);
    auto issue = [&](int c) {
      char* st = smem + (c % S) * stage_bytes;
      const int tok = lo + c * a.tokens;
      if constexpr (L == kCpa || L == kCpaEvict || L == kCpaZfill || L == kCpaMbar ||
                    L == kCpaMbarPad) {
        const int row16 = a.d / 8, words = a.tokens * row16;
        const int pitch = L == kCpaMbarPad ? a.d * 2 + 16 : a.d * 2;  // bytes a row in the stage
        for (int w = tid; w < words; w += 128) {
          const int t = tok + w / row16, x = w % row16;
          const long long off = (seq * a.so + t * a.st + head * a.sh) / 8 + x;
          char* kd = st + (w / row16) * pitch + x * 16;
          char* vd = kd + stage_bytes / 2;
          if constexpr (L == kCpaEvict) {
            asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;\n" ::"r"(
                             smem_addr(kd)),
                         "l"(a.k + off), "l"(policy));
            asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;\n" ::"r"(
                             smem_addr(vd)),
                         "l"(a.v + off), "l"(policy));
          } else if constexpr (L == kCpa) {
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(kd)),
                         "l"(a.k + off));
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(vd)),
                         "l"(a.v + off));
          } else {
            const int n = t < a.ctx ? 16 : 0;
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(kd)),
                         "l"(a.k + off), "r"(n));
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(vd)),
                         "l"(a.v + off), "r"(n));
          }
        }
        if constexpr (L == kCpaMbar || L == kCpaMbarPad)
          asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(
                           smem_addr(full + c % S))
                       : "memory");
        else
          asm volatile("cp.async.commit_group;\n" ::);
      } else if (tid == 0) {
        uint64_t* bar = full + c % S;
        mbar_arrive_expect_tx(bar, stage_bytes);
        char* vs = st + stage_bytes / 2;
        if constexpr (L == kTma1) {
          tma_load_4d(st, &a.k_map, bar, 0, head, tok, seq, policy);
          tma_load_4d(vs, &a.v_map, bar, 0, head, tok, seq, policy);
        } else {
          const int slab = a.tokens * 64 * 2;
          for (int s = 0; s < a.d / 64; ++s) {
            tma_load_4d(st + s * slab, &a.k_map, bar, s * 64, head, tok, seq, policy);
            if (L != kTmaKK) tma_load_4d(vs + s * slab, &a.v_map, bar, s * 64, head, tok, seq, policy);
          }
          if (L == kTmaKK)
            for (int s = 0; s < a.d / 64; ++s)
              tma_load_4d(vs + s * slab, &a.v_map, bar, s * 64, head, tok, seq, policy);
        }
      }
    };
    for (int c = 0; c < S - 1 && c < chunks; ++c) issue(c);
    for (int c = 0; c < chunks; ++c) {
      constexpr bool kGroups = L == kCpa || L == kCpaEvict || L == kCpaZfill;
      if constexpr (kGroups) {
        if (c + S - 1 < chunks) issue(c + S - 1);
        else asm volatile("cp.async.commit_group;\n" ::);
        asm volatile("cp.async.wait_group %0;\n" ::"n"(S - 1));
        __syncthreads();
      } else {
        __syncthreads();  // everyone is done with the stage refilled next
        if (c + S - 1 < chunks) issue(c + S - 1);
        mbar_wait(full + c % S, (c / S) & 1);
      }
      const uint4 w = *reinterpret_cast<const uint4*>(smem + (c % S) * stage_bytes + tid * 16 * 7 % stage_bytes);
      acc ^= w.x ^ w.w;
      spin(a.work);
      if constexpr (kGroups) __syncthreads();
    }
  }
  if (acc == 0x9e3779b9u) a.sink[0] = acc;  // keeps the loads alive
}

PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  void* f = nullptr;
  cudaDriverEntryPointQueryResult q{};
  CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q));
  return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
}

// dims innermost first: d, h, ctx, b; box tokens x bd (bd 64 with the swizzle, else d).
void encode(CUtensorMap* map, const void* base, int b, int h, int ctx, int d, long long so,
            long long st, long long sh, int tokens, bool one_box) {
  const cuuint64_t dims[4] = {cuuint64_t(d), cuuint64_t(h), cuuint64_t(ctx), cuuint64_t(b)};
  const cuuint64_t strides[3] = {cuuint64_t(sh * 2), cuuint64_t(st * 2), cuuint64_t(so * 2)};
  const cuuint32_t box[4] = {cuuint32_t(one_box ? d : 64), 1, cuuint32_t(tokens), 1};
  const cuuint32_t steps[4] = {1, 1, 1, 1};
  const CUresult r = encode_fn()(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, const_cast<void*>(base),
                                 dims, strides, box, steps, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                 one_box ? CU_TENSOR_MAP_SWIZZLE_NONE : CU_TENSOR_MAP_SWIZZLE_128B,
                                 d * 2 >= 256 ? CU_TENSOR_MAP_L2_PROMOTION_L2_256B
                                              : CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                 CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled failed (%d)\n", int(r));
    std::exit(1);
  }
}

template <int L, int S>
void launch(const Args& a, int grid, size_t smem, cudaStream_t s) {
  CHECK(cudaFuncSetAttribute(stream_kernel<L, S>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  stream_kernel<L, S><<<grid, 128, smem, s>>>(a);
}

template <int L>
void launch_s(int stages, const Args& a, int grid, size_t smem, cudaStream_t s) {
  switch (stages) {
    case 1: launch<L, 1>(a, grid, smem, s); break;
    case 2: launch<L, 2>(a, grid, smem, s); break;
    case 3: launch<L, 3>(a, grid, smem, s); break;
    default: launch<L, 4>(a, grid, smem, s); break;
  }
}

int main(int argc, char** argv) {
  int B = 4, H = 32, CTX = 131072, D = 128, reps = 9;
  std::vector<std::string> configs;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--shape") && i + 1 < argc)
      std::sscanf(argv[++i], "%d,%d,%d,%d", &B, &H, &CTX, &D);
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = std::atoi(argv[++i]);
    else
      configs.push_back(argv[i]);
  }
  const size_t elems = size_t(B) * H * CTX * D, bytes = elems * 2;
  void *k = nullptr, *v = nullptr, *flush = nullptr;
  unsigned* sink = nullptr;
  CHECK(cudaMalloc(&k, bytes));
  CHECK(cudaMalloc(&v, bytes));
  CHECK(cudaMalloc(&flush, size_t{256} << 20));
  CHECK(cudaMalloc(&sink, 16));
  CHECK(cudaMemset(k, 0x3c, bytes));
  CHECK(cudaMemset(v, 0x3b, bytes));
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  const size_t smem_sm = prop.sharedMemPerMultiprocessor;  // 228 KB on Hopper
  std::printf("# %s, %d SMs; b %d h %d ctx %d d %d, K+V %.2f GB, write flush, median of %d\n",
              prop.name, sms, B, H, CTX, D, 2.0 * bytes / 1e9, reps);
  std::printf("%-28s %6s %6s %8s %10s %8s\n", "config", "grid", "KB/SM", "smem KB", "us", "TB/s");
  cudaStream_t st;
  CHECK(cudaStreamCreate(&st));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  for (const std::string& cfg : configs) {
    char ld[16] = {0}, lay = 's';
    int S = 3, T = 64, cps = 2, P = 2, work = 0;
    if (std::sscanf(cfg.c_str(), "%15[^:]:%c:%d:%d:%d:%d:%d", ld, &lay, &S, &T, &cps, &P, &work) < 6) {
      std::fprintf(stderr, "bad config %s\n", cfg.c_str());
      return 1;
    }
    const std::string l = ld;
    const int L = l == "tma" ? kTma : l == "tmakk" ? kTmaKK : l == "tman" ? kTmaNormal
                : l == "tma1" ? kTma1 : l == "cpa" ? kCpa : l == "cpae" ? kCpaEvict
                : l == "cpz" ? kCpaZfill : l == "cpm" ? kCpaMbar : l == "cpmp" ? kCpaMbarPad : kLdg;
    if (l == "ldg") S = 1;
    Args a{};
    a.k = static_cast<const uint4*>(k);
    a.v = static_cast<const uint4*>(v);
    if (lay == 'm') {  // [b, h, ctx, d]
      a.so = (long long)H * CTX * D, a.st = D, a.sh = (long long)CTX * D;
    } else {  // [b, ctx, h, d]
      a.so = (long long)CTX * H * D, a.st = (long long)H * D, a.sh = D;
    }
    a.heads = H, a.ctx = CTX, a.d = D, a.splits = P, a.tokens = T, a.work = work, a.sink = sink;
    if (L <= kTma1) {
      encode(&a.k_map, k, B, H, CTX, D, a.so, a.st, a.sh, T, L == kTma1);
      encode(&a.v_map, v, B, H, CTX, D, a.so, a.st, a.sh, T, L == kTma1);
    }
    const size_t used = L == kLdg ? 0 : size_t(S) * 2 * T * (D + (L == kCpaMbarPad ? 8 : 0)) * 2 + 64 + 1024;
    const size_t floor_smem = smem_sm / cps - 1024 - 1024;  // at most cps CTAs a SM
    const size_t smem = std::max(used, std::min(floor_smem, size_t{227} << 10));
    if (used > (size_t{227} << 10) || CTX % (P * T) != 0) {
      std::printf("%-28s does not fit\n", cfg.c_str());
      continue;
    }
    const int grid = B * H * P;
    auto run = [&] {
      switch (L) {
        case kTma: launch_s<kTma>(S, a, grid, smem, st); break;
        case kTmaKK: launch_s<kTmaKK>(S, a, grid, smem, st); break;
        case kTmaNormal: launch_s<kTmaNormal>(S, a, grid, smem, st); break;
        case kTma1: launch_s<kTma1>(S, a, grid, smem, st); break;
        case kCpa: launch_s<kCpa>(S, a, grid, smem, st); break;
        case kCpaEvict: launch_s<kCpaEvict>(S, a, grid, smem, st); break;
        case kCpaZfill: launch_s<kCpaZfill>(S, a, grid, smem, st); break;
        case kCpaMbar: launch_s<kCpaMbar>(S, a, grid, smem, st); break;
        case kCpaMbarPad: launch_s<kCpaMbarPad>(S, a, grid, smem, st); break;
        default: launch<kLdg, 1>(a, grid, smem, st); break;
      }
    };
    run();
    CHECK(cudaStreamSynchronize(st));
    CHECK(cudaGetLastError());
    std::vector<float> ms;
    for (int r = 0; r < reps; ++r) {
      CHECK(cudaMemsetAsync(flush, r & 0xff, size_t{256} << 20, st));
      CHECK(cudaEventRecord(e0, st));
      run();
      CHECK(cudaEventRecord(e1, st));
      CHECK(cudaEventSynchronize(e1));
      float t = 0;
      CHECK(cudaEventElapsedTime(&t, e0, e1));
      ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    const double us = ms[ms.size() / 2] * 1e3;
    const int in_flight = L == kLdg ? 32 : S * 2 * T * D * 2 / 1024;
    std::printf("%-28s %6d %6d %8zu %10.1f %8.3f\n", cfg.c_str(), grid,
                in_flight * std::min(cps, (grid + sms - 1) / sms), smem >> 10, us,
                2.0 * bytes / (us * 1e-6) / 1e12);
    std::fflush(stdout);
  }
  return 0;
}
