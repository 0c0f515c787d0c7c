// Measuring builds only (compiled with -DFK_DECODE_TRACE; bench/NOTES-decode.md, session 32):
// thread 0 of each CTA records %globaltimer at its entry, when its first stage has landed, at the
// end of its last mainloop, after its last wait for Lean peers and at its exit, and its SM. With
// FLASHKIT_DECODE_TRACE set, launch_one syncs the stream after the launch and prints one line:
// where a call's span goes (the launch ramp, the first load, the spread of the CTAs' ends).
// Without the macro every FK_DECODE_TRACE(...) is empty and nothing here is compiled.
#pragma once
#ifdef FK_DECODE_TRACE
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda/common/device_clock.h"

namespace flashkit::cuda::decoding {

enum TraceSlot {
  kTraceEntry,
  kTraceFirst,
  kTraceLoopEnd,
  kTraceWaitEnd,
  kTraceExit,
  kTraceSm,
  kTraceSlots
};
constexpr int kTraceCtas = 4096;
// One copy per translation unit (static): launch_one reads the copy of its own kernel's TU.
static __device__ unsigned long long fk_decode_trace[kTraceCtas][kTraceSlots];

__device__ __forceinline__ void trace_mark(int slot) {
  if (threadIdx.x != 0 || blockIdx.x >= kTraceCtas) return;
  fk_decode_trace[blockIdx.x][slot] = slot == kTraceSm ? sm_id() : global_timer_ns();
}

// The summary of the last launch of this TU's kernels (grid CTAs), in us from the first entry;
// static, so that each TU reads its own copy of the trace.
static inline void trace_print(int grid, cudaStream_t stream) {
  static const bool on = std::getenv("FLASHKIT_DECODE_TRACE") != nullptr;
  if (!on) return;
  grid = std::min(grid, kTraceCtas);
  std::vector<unsigned long long> h(static_cast<size_t>(grid) * kTraceSlots);
  if (cudaStreamSynchronize(stream) != cudaSuccess ||
      cudaMemcpyFromSymbol(h.data(), fk_decode_trace, h.size() * sizeof(h[0])) != cudaSuccess) {
    std::fprintf(stderr, "decode trace: read failed\n");
    return;
  }
  auto at = [&](int c, int s) { return h[static_cast<size_t>(c) * kTraceSlots + s]; };
  unsigned long long t0 = ~0ull;
  for (int c = 0; c < grid; ++c) t0 = std::min(t0, at(c, kTraceEntry));
  auto us = [&](unsigned long long t) { return (t - t0) * 1e-3; };
  std::vector<double> entry, first, loop_end, wait, exit;
  for (int c = 0; c < grid; ++c) {
    entry.push_back(us(at(c, kTraceEntry)));
    first.push_back(us(at(c, kTraceFirst)) - us(at(c, kTraceEntry)));
    loop_end.push_back(us(at(c, kTraceLoopEnd)));
    exit.push_back(us(at(c, kTraceExit)));
    if (at(c, kTraceWaitEnd) > at(c, kTraceLoopEnd))  // a Lean host's wait in this launch
      wait.push_back(us(at(c, kTraceWaitEnd)) - us(at(c, kTraceLoopEnd)));
  }
  auto q = [](std::vector<double> v, double f) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    return v[static_cast<size_t>(f * (v.size() - 1) + 0.5)];
  };
  std::fprintf(stderr,
               "decode trace: grid %d | span %.1f | entry p50 %.1f max %.1f | first data p50 %.1f "
               "max %.1f | loop end min %.1f p10 %.1f p50 %.1f p90 %.1f max %.1f | host wait n %zu "
               "p50 %.1f max %.1f | exit p50 %.1f max %.1f (us)\n",
               grid, q(exit, 1.0), q(entry, 0.5), q(entry, 1.0), q(first, 0.5), q(first, 1.0),
               q(loop_end, 0.0), q(loop_end, 0.1), q(loop_end, 0.5), q(loop_end, 0.9),
               q(loop_end, 1.0), wait.size(), q(wait, 0.5), q(wait, 1.0), q(exit, 0.5),
               q(exit, 1.0));
}

}  // namespace flashkit::cuda::decoding
#define FK_DECODE_TRACE_MARK(slot) ::flashkit::cuda::decoding::trace_mark(slot)
#else
#define FK_DECODE_TRACE_MARK(slot)
#endif
