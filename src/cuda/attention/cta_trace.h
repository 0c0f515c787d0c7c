// Measuring builds only (compiled with -DFK_BWD_TRACE; bench/NOTES-attention.md, session 40).
// The Hopper backward's kernels (0: the column kernel, 1: hdim 256's dQ pass) record, per CTA,
// the %globaltimer at entry and at exit (the later of its consumer warpgroups), its SM and its
// work tile. The column kernel at hdim 256 also records when its first stage had landed, when
// its first block's scores were done, when its last GEMM was, and its epilogue's steps. From
// these a harness can tell a tile's fixed cost from its per-block cost, and the launch order's
// tail from both (bench/sm90_bwd_ab.cu prints the summary). Without the macro every
// FK_BWD_TRACE_* is empty and nothing here is compiled.
#pragma once
#ifdef FK_BWD_TRACE
#include <cuda_runtime.h>

#include "cuda/common/device_clock.h"

namespace flashkit::cuda::attn {

enum BwdTraceSlot {
  kBwdTraceEntry,
  kBwdTraceExit,
  kBwdTraceSm,
  kBwdTraceTile,
  kBwdTraceFirstData,   // the later warpgroup's first ring stage (and K / V) landed
  kBwdTraceFirstBlock,  // the later warpgroup's first block's scores done
  kBwdTraceLoopEnd,     // the later warpgroup's last GEMM done
  kBwdTraceEpiSync,     // the epilogue's first consumer barrier passed
  kBwdTraceEpiStaged,   // dK / dV staged in shared memory, the second barrier passed
  kBwdTraceEpiIssued,   // the TMA stores issued
  kBwdTraceSlots
};
constexpr int kBwdTraceKernels = 2, kBwdTraceCtas = 16384;
// One copy per translation unit (static): the harness is one TU.
static __device__ unsigned long long fk_bwd_trace[kBwdTraceKernels][kBwdTraceCtas][kBwdTraceSlots];

// Thread 0 of the CTA: entry time, SM and tile (block | head << 16 | batch << 40).
__device__ __forceinline__ void bwd_trace_entry(int kernel, int block, int head, int batch) {
  if (threadIdx.x != 0 || blockIdx.x >= kBwdTraceCtas) return;
  unsigned long long* r = fk_bwd_trace[kernel][blockIdx.x];
  r[kBwdTraceEntry] = global_timer_ns();
  for (int i = kBwdTraceFirstData; i < kBwdTraceSlots; ++i) r[i] = 0;
  r[kBwdTraceExit] = 0;
  r[kBwdTraceSm] = sm_id();
  r[kBwdTraceTile] = (unsigned long long)block | ((unsigned long long)head << 16) |
                     ((unsigned long long)batch << 40);
}
// The first thread of each consumer warpgroup: the later warpgroup's time at `slot` (exit: once
// its stores are issued).
__device__ __forceinline__ void bwd_trace_mark(int kernel, int slot) {
  if (threadIdx.x % 128 != 0 || blockIdx.x >= kBwdTraceCtas) return;
  atomicMax(&fk_bwd_trace[kernel][blockIdx.x][slot], global_timer_ns());
}

}  // namespace flashkit::cuda::attn
#define FK_BWD_TRACE_ENTRY(kernel, w) \
  ::flashkit::cuda::attn::bwd_trace_entry(kernel, (w).block, (w).head, (w).batch)
#define FK_BWD_TRACE_EXIT(kernel) \
  ::flashkit::cuda::attn::bwd_trace_mark(kernel, ::flashkit::cuda::attn::kBwdTraceExit)
#define FK_BWD_TRACE_MARK(kernel, slot) \
  ::flashkit::cuda::attn::bwd_trace_mark(kernel, ::flashkit::cuda::attn::slot)
#else
#define FK_BWD_TRACE_ENTRY(kernel, w)
#define FK_BWD_TRACE_EXIT(kernel)
#define FK_BWD_TRACE_MARK(kernel, slot)
#endif
