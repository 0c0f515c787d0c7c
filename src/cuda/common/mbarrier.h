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

#if __CUDA_ARCH__ >= 900 || !defined(__CUDA_ARCH__)
// Between the CTAs of a cluster (sm_90): `p` (this CTA's shared memory) as seen in CTA `rank`,
// a wait that acquires at cluster scope, an arrive on a barrier in another CTA that releases this
// thread's earlier accesses (its distributed-shared-memory stores included) at cluster scope, and
// a 16-byte store into another CTA's shared memory.
__device__ __forceinline__ uint32_t cluster_map(const void* p, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(smem_addr(p)), "r"(rank));
  return r;
}

__device__ __forceinline__ void mbar_wait_cluster(uint64_t* bar, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2; "
        "selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
  } while (!done);
}

__device__ __forceinline__ void mbar_arrive_remote(uint32_t cluster_bar) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(cluster_bar)
               : "memory");
}

__device__ __forceinline__ void st_cluster_v4(uint32_t cluster_addr, float a, float b, float c,
                                              float d) {
  asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(cluster_addr), "f"(a),
               "f"(b), "f"(c), "f"(d)
               : "memory");
}
#endif

// Orders this thread's mbarrier initialisations before what follows at cluster scope: other CTAs
// of the cluster arriving after a cluster barrier, and the async (TMA) proxy's completions. sm_90;
// traps on older targets, where no caller runs (their kernels are never launched there).
__device__ __forceinline__ void fence_mbarrier_init() {
#if __CUDA_ARCH__ >= 900
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#elif defined(__CUDA_ARCH__)
  __trap();
#endif
}

}  // namespace flashkit::cuda
