// Hopper's bulk asynchronous reduce and store (cp.reduce.async.bulk, cp.async.bulk, sm_90+): one
// instruction adds (or copies) a contiguous run in shared memory into global memory through the
// copy engine, in place of per-thread atomics (stores). The issuing thread tracks completion with
// bulk groups.
#pragma once
#include <cstdint>

namespace flashkit::cuda {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// Closes this thread's current bulk group.
__device__ __forceinline__ void bulk_commit() {
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
// gmem[0 .. bytes) += smem[0 .. bytes) as fp32 (both 16-byte aligned, bytes a multiple of 16);
// commits its own bulk group.
__device__ __forceinline__ void bulk_reduce_add_f32(float* gmem, const float* smem, uint32_t bytes) {
  const auto s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;"
               ::"l"(gmem), "r"(s), "r"(bytes) : "memory");
  bulk_commit();
}
// gmem[0 .. bytes) = smem[0 .. bytes) (same alignment rules), in the current bulk group (commit
// with bulk_commit).
__device__ __forceinline__ void bulk_store(void* gmem, const void* smem, uint32_t bytes) {
  const auto s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(gmem), "r"(s),
               "r"(bytes)
               : "memory");
}
// Waits until this thread's bulk groups have read their shared-memory sources (then reusable).
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}
// Waits until this thread's bulk groups have completed: their global writes are done and visible
// to this thread's generic proxy.
__device__ __forceinline__ void bulk_wait_done() {
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}
// Orders this thread's generic-proxy accesses of global memory with its later async-proxy ones
// (and its completed async-proxy writes with its later generic ones).
__device__ __forceinline__ void fence_global_async() {
  asm volatile("fence.proxy.async.global;" ::: "memory");
}
// Makes this thread's generic-proxy shared-memory writes visible to later bulk operations.
__device__ __forceinline__ void fence_shared_to_async() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
#endif

}  // namespace flashkit::cuda
