// Hopper's bulk asynchronous reduce (cp.reduce.async.bulk, sm_90+): one instruction adds a
// contiguous run of fp32 in shared memory into global memory through the copy engine, in place
// of per-thread atomics. The issuing thread tracks completion with bulk groups.
#pragma once
#include <cstdint>

namespace flashkit::cuda {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// gmem[0 .. bytes) += smem[0 .. bytes) as fp32 (both 16-byte aligned, bytes a multiple of 16);
// commits its own bulk group.
__device__ __forceinline__ void bulk_reduce_add_f32(float* gmem, const float* smem, uint32_t bytes) {
  const auto s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;"
               ::"l"(gmem), "r"(s), "r"(bytes) : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
// Waits until this thread's bulk groups have read their shared-memory sources (then reusable).
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}
// Makes this thread's generic-proxy shared-memory writes visible to later bulk operations.
__device__ __forceinline__ void fence_shared_to_async() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
#endif

}  // namespace flashkit::cuda
