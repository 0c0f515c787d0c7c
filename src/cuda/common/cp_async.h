// 16-byte cp.async copies global -> shared that bypass L1 (.cg: data read once into shared
// memory), for the kernels that issue their own (decode's K/V loader, the sm80-class backward's
// LSE / D rows); `dst` is a shared-memory address from smem_addr. Completion is the caller's:
// commit groups and waits, or cp_async_mbar_arrive in decode.
#pragma once
#include <cstdint>

namespace flashkit::cuda {

__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
// valid false writes 16 zero bytes and reads nothing (src may be any mapped address).
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0));
}

}  // namespace flashkit::cuda
