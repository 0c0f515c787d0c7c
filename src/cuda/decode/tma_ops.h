// The Hopper copy-engine pieces of the decode loads (the mbarriers themselves are
// cuda/common/mbarrier.h): arrivals with transaction counts, tensor-map (TMA) box copies global ->
// shared under an L2 eviction policy, the descriptor prefetch, and the proxy fence that orders
// ordinary shared-memory writes before later TMA writes to the same bytes. sm_90 only: on older
// targets these trap, and the host never launches the TMA kernels there (kernel.h).
#pragma once
#include <cuda.h>

#include <cstdint>

#include "cuda/decode/device_ops.h"

namespace flashkit::cuda::decoding {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define FK_DECODE_TMA 1
#endif

// One arrival that also expects `bytes` of TMA transactions before the phase can complete.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
#ifdef FK_DECODE_TMA
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
#else
  __trap();
#endif
}

// Box of the rank-4 map at coordinates (c0 innermost .. c3) into shared memory, completing on
// bar, its L2 lines under an eviction-priority policy (l2_kv_policy).
__device__ __forceinline__ void tma_load_4d(void* dst, const CUtensorMap* map, uint64_t* bar,
                                            int c0, int c1, int c2, int c3, uint64_t policy) {
#ifdef FK_DECODE_TMA
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%3, %4, %5, %6}], [%2], %7;\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3),
      "l"(policy)
      : "memory");
#else
  __trap();
#endif
}

// The same box into L2 only (no shared memory, nothing to wait for): a later tma_load_4d of it
// then hits L2.
__device__ __forceinline__ void tma_prefetch_l2_4d(const CUtensorMap* map, int c0, int c1, int c2,
                                                   int c3) {
#ifdef FK_DECODE_TMA
  asm volatile("cp.async.bulk.prefetch.tensor.4d.L2.global.tile [%0, {%1, %2, %3, %4}];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
#else
  __trap();
#endif
}

// K/V are read once: with evict_first their L2 lines go first, before data others wrote or will
// reuse (dirty lines that would otherwise be written back while decode streams, the partials, Q);
// otherwise the normal priority, like a copy without a hint.
__device__ __forceinline__ uint64_t l2_kv_policy(bool evict_first) {
  uint64_t first = 0, normal = 0;
#ifdef FK_DECODE_TMA
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(first));
  asm("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;\n" : "=l"(normal));
#endif
  return evict_first ? first : normal;
}

__device__ __forceinline__ void tma_prefetch_map(const CUtensorMap* map) {
#ifdef FK_DECODE_TMA
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
#endif
}

// Orders this thread's earlier generic shared-memory writes before later async-proxy (TMA) ones.
__device__ __forceinline__ void fence_proxy_async() {
#ifdef FK_DECODE_TMA
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

}  // namespace flashkit::cuda::decoding
