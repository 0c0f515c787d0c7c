// The Hopper copy-engine pieces of the v4 decode loads (the mbarriers themselves are
// cuda/common/mbarrier.h): arrivals with transaction counts, tensor-
// map (TMA) box copies global -> shared, the descriptor prefetch, and the proxy fence that orders
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

// Makes the mbarrier inits above it visible to the async (TMA) proxy.
__device__ __forceinline__ void fence_mbarrier_init() {
#ifdef FK_DECODE_TMA
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#else
  __trap();
#endif
}

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

// Box of the rank-4 map at coordinates (c0 innermost .. c3) into shared memory; completes on bar.
__device__ __forceinline__ void tma_load_4d(void* dst, const CUtensorMap* map, uint64_t* bar,
                                            int c0, int c1, int c2, int c3) {
#ifdef FK_DECODE_TMA
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
#else
  __trap();
#endif
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
