// Shared-memory mbarriers at CTA scope, one set for every kernel that uses them (MAS's warp ring,
// decode's TMA stages): an arrive releases the thread's earlier accesses, a wait that sees the
// phase complete acquires them. sm_80 has mbarriers without the explicit .release/.acquire forms
// and without try_wait; its arrive and test_wait have those semantics at CTA scope by default (PTX
// ISA), so the Ampere build spells them that way and polls.
#pragma once
#include <cstdint>

namespace flashkit::cuda {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count)
               : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
#if __CUDA_ARCH__ >= 900
  asm volatile(
      "{ .reg .b64 state; mbarrier.arrive.release.cta.shared::cta.b64 state, [%0]; }" ::"r"(
          smem_addr(bar))
      : "memory");
#else
  asm volatile("{ .reg .b64 state; mbarrier.arrive.shared.b64 state, [%0]; }" ::"r"(
                   smem_addr(bar))
               : "memory");
#endif
}

// Returns once the phase of parity `parity` has completed (parity 1 on a fresh barrier: at once).
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done;
  do {
#if __CUDA_ARCH__ >= 900
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [%1], %2; "
        "selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
#else
    asm volatile(
        "{ .reg .pred p; mbarrier.test_wait.parity.shared.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
#endif
  } while (!done);
}

}  // namespace flashkit::cuda
