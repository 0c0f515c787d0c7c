// How fast an H100/H200 reads MAS's likelihood [B, T, S] fp32 in the order the DP needs it (frames
// advance; a warp owns 128 consecutive text rows, 4 per lane, as mas_forward's K = 4), by the bytes
// of one row each request covers. No DP: the loads and a sum, so the time is the access pattern's
// alone (bench/NOTES-mas.md, v9). Standalone:
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a bench/mas_read_pattern.cu -o mrp
//   ./mrp [T=2048] [B=32]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "micro_check.cuh"

enum Hint { kPlain, kL2_128, kL2_256 };

template <Hint H>
__device__ __forceinline__ float4 ld16(const float* p) {
  float4 v;
  if constexpr (H == kPlain)
    asm volatile("ld.global.nc.v4.f32 {%0,%1,%2,%3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "l"(p));
  else if constexpr (H == kL2_128)
    asm volatile("ld.global.nc.L2::128B.v4.f32 {%0,%1,%2,%3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "l"(p));
  else
    asm volatile("ld.global.nc.L2::256B.v4.f32 {%0,%1,%2,%3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "l"(p));
  return v;
}

// Lane-owned rows (the DP's pattern): lane l of warp w reads rows 4l..4l+3 of the warp's 128,
// kBytes of each row per step (kBytes / 16 vector loads a row), steps unrolled by 4.
template <int kBytes, Hint H>
__global__ void __launch_bounds__(128)
    lane_rows(const float* v, int T, int S, int splits, float* sink) {
  const int b = blockIdx.x / splits, part = blockIdx.x % splits;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = part * (T / splits) + warp * 128 + lane * 4;
  if (row >= T) return;
  const float* base = v + (size_t(b) * T + row) * S;
  constexpr int kVec = kBytes / 16, kFloats = kBytes / 4;
  float acc = 0.f;
#pragma unroll 4
  for (int y = 0; y < S; y += kFloats) {
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const float4 x = ld16<H>(base + size_t(i) * S + y + 4 * k);
        acc += x.x + x.y + x.z + x.w;
      }
  }
  if (acc == 12345.f) sink[threadIdx.x] = acc;
}

// Cooperative: each request of a warp covers kBytes contiguous bytes of a row (kBytes / 16 lanes
// a row), the warp's 128 rows per step in 128 * kBytes / 512 instructions.
template <int kBytes>
__global__ void __launch_bounds__(128)
    coop_rows(const float* v, int T, int S, int splits, float* sink) {
  const int b = blockIdx.x / splits, part = blockIdx.x % splits;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  constexpr int kLanesPerRow = kBytes / 16, kRowsPerInst = 32 / kLanesPerRow;
  const int row0 = part * (T / splits) + warp * 128;
  if (row0 >= T) return;
  const int r = lane / kLanesPerRow, c = (lane % kLanesPerRow) * 4;
  const float* base = v + (size_t(b) * T + row0 + r) * S + c;
  constexpr int kFloats = kBytes / 4;
  float acc = 0.f;
#pragma unroll 2
  for (int y = 0; y < S; y += kFloats) {
#pragma unroll
    for (int i = 0; i < 128 / kRowsPerInst; ++i) {
      const float4 x = ld16<kPlain>(base + size_t(i) * kRowsPerInst * S + y);
      acc += x.x + x.y + x.z + x.w;
    }
  }
  if (acc == 12345.f) sink[threadIdx.x] = acc;
}

// Contiguous streaming read of the same bytes (the ceiling for reads).
__global__ void stream_read(const float4* v, size_t n, float* sink) {
  float acc = 0.f;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    const float4 x = __ldg(v + i);
    acc += x.x + x.y + x.z + x.w;
  }
  if (acc == 12345.f) sink[threadIdx.x] = acc;
}

int main(int argc, char** argv) {
  const int T = argc > 1 ? std::atoi(argv[1]) : 2048, B = argc > 2 ? std::atoi(argv[2]) : 32;
  const int S = 4 * T;
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  int splits = 1;  // mas.cu's choose_split
  while (splits < 8 && B * splits * 2 <= sms && T / (splits * 2) >= 256) splits *= 2;
  const size_t n = size_t(B) * T * S;
  float *v = nullptr, *sink = nullptr;
  char* flush = nullptr;
  CHECK(cudaMalloc(&v, n * 4));
  CHECK(cudaMalloc(&sink, 4096));
  CHECK(cudaMalloc(&flush, 256 << 20));
  std::vector<float> h(size_t(T) * S);
  for (size_t i = 0; i < h.size(); ++i) h[i] = float(i % 1000) * 1e-3f;  // not zeros
  for (int b = 0; b < B; ++b)
    CHECK(cudaMemcpy(v + size_t(b) * T * S, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  const int rows_per_cta = T / splits, threads = ((rows_per_cta + 127) / 128) * 32;
  auto time = [&](const char* name, auto launch) {
    std::vector<float> ms;
    for (int rep = 0; rep < 7; ++rep) {
      CHECK(cudaMemsetAsync(flush, rep, 256 << 20));  // L2 cold
      CHECK(cudaEventRecord(e0));
      launch();
      CHECK(cudaGetLastError());
      CHECK(cudaEventRecord(e1));
      CHECK(cudaEventSynchronize(e1));
      float t = 0;
      CHECK(cudaEventElapsedTime(&t, e0, e1));
      ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    const double med = ms[ms.size() / 2];
    std::printf("T=%d B=%d %-28s %8.3f ms  %5.2f TB/s\n", T, B, name, med, n * 4 / med / 1e9);
  };
  const dim3 grid(B * splits), block(threads);
  std::printf("T=%d B=%d S=%d splits=%d threads=%d (%.2f GB)\n", T, B, S, splits, threads,
              n * 4 / 1e9);
  time("stream (ceiling)", [&] { stream_read<<<sms * 8, 512>>>((const float4*)v, n / 4, sink); });
  time("lane rows 32 B", [&] { lane_rows<32, kPlain><<<grid, block>>>(v, T, S, splits, sink); });
  time("lane rows 32 B L2::128B",
       [&] { lane_rows<32, kL2_128><<<grid, block>>>(v, T, S, splits, sink); });
  time("lane rows 32 B L2::256B",
       [&] { lane_rows<32, kL2_256><<<grid, block>>>(v, T, S, splits, sink); });
  time("lane rows 64 B", [&] { lane_rows<64, kPlain><<<grid, block>>>(v, T, S, splits, sink); });
  time("lane rows 128 B", [&] { lane_rows<128, kPlain><<<grid, block>>>(v, T, S, splits, sink); });
  time("coop rows 128 B", [&] { coop_rows<128><<<grid, block>>>(v, T, S, splits, sink); });
  time("coop rows 256 B", [&] { coop_rows<256><<<grid, block>>>(v, T, S, splits, sink); });
  time("coop rows 512 B", [&] { coop_rows<512><<<grid, block>>>(v, T, S, splits, sink); });
  return 0;
}
