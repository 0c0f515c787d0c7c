// The device's clocks for the measuring builds' traces (decode/trace.h, attention/cta_trace.h):
// %globaltimer (nanoseconds, one clock for every SM) and the SM a thread runs on.
#pragma once

namespace flashkit::cuda {

__device__ __forceinline__ unsigned long long global_timer_ns() {
  unsigned long long v;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(v));
  return v;
}

__device__ __forceinline__ unsigned sm_id() {
  unsigned s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return s;
}

}  // namespace flashkit::cuda
