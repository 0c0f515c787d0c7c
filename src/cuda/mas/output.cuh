// The MAS kernels around the forward pass: fused-likelihood coefficients before it, the path
// expansion from per-row runs (for paths that are not one dense block per item; the forward
// kernel writes those itself) and the status word after it. Included by src/cuda/mas/mas.cu only.
#pragma once
#include "cuda/common/pdl.h"
#include "cuda/mas/device.cuh"
#include "cuda/mas/path_writer.cuh"

namespace flashkit::cuda::mas_kernels {

// Coefficients of the fused likelihood per (item, channel, text row), src/common/mas_likelihood.h.
static __global__ void mas_fused_coeffs(const void* m, const void* logs, int dtype, int64_t mb,
                                        int64_t mc, int64_t mx, int64_t lb, int64_t lc, int64_t lx,
                                        int T, int Tw, int C, float* coef) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, c = blockIdx.y, b = blockIdx.z;
  if (x >= Tw) return;
  mas::Coeffs k{0.f, 0.f, 0.f};
  if (x < T)
    k = mas::coeffs(load_float(m, dtype, b * mb + c * mc + x * mx),
                    load_float(logs, dtype, b * lb + c * lc + x * lx));
  float* out = coef + (static_cast<size_t>(b) * C + c) * 3 * Tw + x;
  out[0] = k.c0, out[Tw] = k.c1, out[2 * Tw] = k.c2;
}

struct PathParams {
  char* path;
  int64_t pb, px, py;  // strides in elements
  int es;              // element bytes
  uint32_t one;        // bit pattern of 1 in the path dtype
  int B, T, S, Tw;
  const int32_t* start;
  const int32_t* dur;
  int64_t db, dx;
};

// Rows contiguous in y: 16-byte stores of kEs-byte elements when kEs > 0 (aligned rows, whole
// 16-byte chunks), else element by element.
template <int kEs>
__global__ void mas_write_path_rows(const PathParams pp) {
  for (int64_t r = blockIdx.x; r < static_cast<int64_t>(pp.B) * pp.T; r += gridDim.x) {
    const int b = static_cast<int>(r / pp.T), x = static_cast<int>(r % pp.T);
    const int s0 = pp.start[static_cast<size_t>(b) * pp.Tw + x];
    const int s1 = s0 + pp.dur[b * pp.db + x * pp.dx];
    char* row = pp.path + (b * pp.pb + x * pp.px) * pp.es;
    if constexpr (kEs > 0) {
      constexpr int kPer = 16 / kEs;
      for (int k = threadIdx.x; k * kPer < pp.S; k += blockDim.x) {
        uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
        for (int e = 0; e < kPer; ++e) {
          const int y = k * kPer + e;
          if (y >= s0 && y < s1) w[e * kEs / 4] |= pp.one << (8 * (e * kEs % 4));
        }
        reinterpret_cast<uint4*>(row)[k] = make_uint4(w[0], w[1], w[2], w[3]);
      }
    } else {
      for (int y = threadIdx.x; y < pp.S; y += blockDim.x)
        put(row + static_cast<int64_t>(y) * pp.py * pp.es, pp.es,
            (y >= s0 && y < s1) ? pp.one : 0u);
    }
  }
}

// The same rows in two phases (v17, sm_90, launched with programmatic stream serialisation right
// after the forward kernel): rows zeroed with 16-byte streaming stores while the forward kernel
// still runs, on the SMs it leaves free (the launch asks for a whole SM's shared memory, so no CTA
// of this kernel shares an SM with the DP); then, once the forward grid has completed and its
// writes are visible (griddepcontrol.wait), the ones from the runs. Rows go out in chunks of
// `chunk_rows` from a counter (`next`, zeroed before the forward kernel), so the CTAs that start
// beside the DP zero most of them, not a fixed share that CTAs waiting for a DP SM would hold;
// each CTA lists its chunks in shared memory and writes their ones itself (its own zeros are
// then ordered before by __syncthreads). Rows contiguous, 16-byte aligned, whole 16-byte chunks
// (mas_write_path_rows<kEs > 0>'s conditions).
static __global__ void mas_write_path_rows_early(const PathParams pp, int32_t* next,
                                                 int chunk_rows) {
  extern __shared__ int32_t s_chunks[];  // the chunks this CTA zeroed
  __shared__ int32_t s_count, s_cur;
  const int64_t rows = static_cast<int64_t>(pp.B) * pp.T;
  const int nchunks = static_cast<int>((rows + chunk_rows - 1) / chunk_rows);
  const int64_t row_vecs = static_cast<int64_t>(pp.S) * pp.es / 16;
  const uint4 z = make_uint4(0, 0, 0, 0);
  // Thread 0's count of its chunks, published after the loop: a shared counter beside s_cur was
  // read together with it (one 8-byte load) by every thread while thread 0 wrote it (racecheck).
  int count = 0;
  while (true) {
    if (threadIdx.x == 0) s_cur = atomicAdd(next, 1);
    __syncthreads();
    const int c = s_cur;
    if (threadIdx.x == 0 && c < nchunks) s_chunks[count++] = c;
    __syncthreads();  // s_cur read by all before thread 0 takes the next chunk
    if (c >= nchunks) break;
    const int64_t r0 = static_cast<int64_t>(c) * chunk_rows;
    const int n = static_cast<int>(min(static_cast<int64_t>(chunk_rows), rows - r0));
    for (int64_t i = threadIdx.x; i < n * row_vecs; i += blockDim.x) {
      const int64_t r = r0 + i / row_vecs;
      const int b = static_cast<int>(r / pp.T), x = static_cast<int>(r % pp.T);
      __stcs(reinterpret_cast<uint4*>(pp.path + (b * pp.pb + x * pp.px) * pp.es) + i % row_vecs, z);
    }
  }
  if (threadIdx.x == 0) s_count = count;
  pdl_wait();
  __syncthreads();  // this CTA's zeros before its ones (the same rows, other threads); s_count
  // One thread a row of this CTA's chunks: its run's ones (S / T of them on average).
  for (int i = threadIdx.x; i < s_count * chunk_rows; i += blockDim.x) {
    const int64_t r = static_cast<int64_t>(s_chunks[i / chunk_rows]) * chunk_rows + i % chunk_rows;
    if (r >= rows) continue;
    const int b = static_cast<int>(r / pp.T), x = static_cast<int>(r % pp.T);
    const int s0 = pp.start[static_cast<size_t>(b) * pp.Tw + x];
    const int s1 = s0 + pp.dur[b * pp.db + x * pp.dx];
    char* row = pp.path + (b * pp.pb + x * pp.px) * pp.es;
    for (int y = s0; y < s1; ++y) put(row + static_cast<int64_t>(y) * pp.es, pp.es, pp.one);
  }
}

// Columns contiguous in x (a transposed view, the VITS layout): threads over x.
static __global__ void mas_write_path_cols(const PathParams pp) {
  for (int64_t r = blockIdx.x; r < static_cast<int64_t>(pp.B) * pp.S; r += gridDim.x) {
    const int b = static_cast<int>(r / pp.S), y = static_cast<int>(r % pp.S);
    char* col = pp.path + (b * pp.pb + y * pp.py) * pp.es;
    for (int x = threadIdx.x; x < pp.T; x += blockDim.x) {
      const int s0 = pp.start[static_cast<size_t>(b) * pp.Tw + x];
      const int s1 = s0 + pp.dur[b * pp.db + x * pp.dx];
      put(col + static_cast<int64_t>(x) * pp.px * pp.es, pp.es, (y >= s0 && y < s1) ? pp.one : 0u);
    }
  }
}

static __global__ void mas_status(const int32_t* bad, int B, int32_t* status) {
  int first = B;
  for (int b = threadIdx.x; b < B; b += 32)
    if (bad[b]) first = min(first, b);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) first = min(first, __shfl_xor_sync(kFull, first, o));
  if (threadIdx.x == 0) *status = first == B ? -1 : first;
}

}  // namespace flashkit::cuda::mas_kernels
