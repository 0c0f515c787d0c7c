// Programmatic dependent launch (sm_90+). A kernel launched with launch_pdl(..., pdl = true) may
// start before the kernel ahead of it in the stream has finished: once every CTA of that kernel
// has called pdl_launch_dependents() or exited. pdl_wait() then blocks until the kernel ahead
// has completed and its memory operations are visible. Both device calls are no-ops in a kernel
// that has no such neighbour, and on sm_80.
#pragma once
#include <cuda_runtime.h>

#include <utility>

#include "cuda/common/check.h"

namespace flashkit::cuda {

__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// kernel<<<grid, block, smem, stream>>>(args...), with programmatic stream serialisation when
// `pdl` (the attribute is left out otherwise, so the launch is an ordinary one).
template <class... Params, class... Args>
void launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                bool pdl, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = pdl ? 1 : 0;
  FK_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

}  // namespace flashkit::cuda
