// Device helpers that write the MAS path [B, T, S] from per-row runs (start, length): zeroing an
// item's dense block and writing its ones, used by the forward kernel (forward.cuh) when each
// item's path is one dense block, and the element store shared with the general path kernels
// (output.cuh). Included by src/cuda/mas/mas.cu only.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace flashkit::cuda::mas_kernels {

__device__ __forceinline__ void put(char* p, int es, uint32_t v) {
  if (es == 4)
    *reinterpret_cast<uint32_t*>(p) = v;
  else if (es == 2)
    *reinterpret_cast<uint16_t*>(p) = static_cast<uint16_t>(v);
  else
    *reinterpret_cast<uint8_t*>(p) = static_cast<uint8_t>(v);
}

// Zeroes bytes [lo, hi) of `base`, thread t of n: 16-byte streaming stores (the path is never read
// back here, so it should not push the likelihood out of L2) between byte-wise ends.
__device__ __forceinline__ void zero_bytes(char* base, int64_t lo, int64_t hi, int t, int n) {
  if (hi <= lo) return;
  const int64_t head =
      min(hi - lo, static_cast<int64_t>((16 - reinterpret_cast<uintptr_t>(base + lo) % 16) % 16));
  const int64_t mid = lo + head, nvec = (hi - mid) / 16;
  for (int64_t i = t; i < head; i += n) base[lo + i] = 0;
  uint4* v = reinterpret_cast<uint4*>(base + mid);
  const uint4 z = make_uint4(0, 0, 0, 0);
  int64_t i = t;
  for (; i + 3 * n < nvec; i += 4 * n)  // four stores in flight per iteration
    __stcs(v + i, z), __stcs(v + i + n, z), __stcs(v + i + 2 * n, z), __stcs(v + i + 3 * n, z);
  for (; i < nvec; i += n) __stcs(v + i, z);
  for (int64_t i = mid + nvec * 16 + t; i < hi; i += n) base[i] = 0;
}

// Zeroes bytes [lo, hi) of `base` with one warp (lane t) in `slices` equal parts, part k once warp
// 0 of the CTA has finished frame k * ty / slices - 1 (`pace`: the last frame it finished; null: at
// once). The zeros then share DRAM with the likelihood reads over the whole DP instead of competing
// with its first blocks and finishing early (v6c, T = 2048: the path's zeros added 1.1 ms to
// the 1.6 ms of the DP). Nothing is read from the DP: a relaxed load, no ordering.
__device__ __forceinline__ void zero_paced(char* base, int64_t lo, int64_t hi, int t,
                                           const int32_t* pace, int ty, int slices) {
  for (int k = 0; k < slices; ++k) {
    if (pace != nullptr) {
      const int need = static_cast<int>(int64_t{k} * ty / slices) - 1;
      while (true) {
        int32_t done;
        asm volatile("ld.relaxed.gpu.global.s32 %0, [%1];" : "=r"(done) : "l"(pace) : "memory");
        if (done >= need) break;
        __nanosleep(1000);
      }
    }
    zero_bytes(base, lo + (hi - lo) * k / slices, lo + (hi - lo) * (k + 1) / slices, t, 32);
  }
}

// Rows [0, tx) of one item from their run starts (`s_start`, shared memory: row x runs from
// start[x] to start[x + 1] - 1, the last row to ty - 1): the starts in global memory (`g_start`,
// for the separate path kernels), the durations and, when `path` (the item's element (0, 0),
// strides in elements) is given, the path's ones; thread t of n, a row each.
__device__ __forceinline__ void write_runs(const int32_t* s_start, int32_t* g_start, int tx, int ty,
                                           int32_t* dur, int64_t dx, char* path, int64_t px,
                                           int64_t py, int es, uint32_t one, int t, int n) {
  for (int x = t; x < tx; x += n) {
    const int s0 = s_start[x], s1 = x + 1 < tx ? s_start[x + 1] : ty;
    g_start[x] = s0;
    dur[x * dx] = s1 - s0;
    if (path == nullptr) continue;
    const int64_t step = py * es;
    char* e = path + (x * px + s0 * py) * es;
    for (int y = s0; y < s1; ++y, e += step) put(e, es, one);
  }
}
}  // namespace flashkit::cuda::mas_kernels
