// build_info() and the CUDA device queries the CLI and the planners use.
#include <omp.h>

#include "flashkit/common.h"
#ifdef FLASHKIT_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace flashkit {

BuildInfo build_info() {
  BuildInfo b;
#ifdef FLASHKIT_WITH_CUDA
  b.cuda = true;
  b.cuda_archs = FLASHKIT_CUDA_ARCHS;
#ifndef FLASHKIT_NO_ATTENTION_KERNELS
  b.cuda_attention = true;
#endif
#endif
  b.kernel_set = FLASHKIT_KERNEL_SET;
  b.version = FLASHKIT_VERSION;
  b.cpu_threads = omp_get_max_threads();
  return b;
}

int cuda_device_count() {
#ifdef FLASHKIT_WITH_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // no driver / no device: clear the sticky error, report none
    return 0;
  }
  return n;
#else
  return 0;
#endif
}

GpuInfo cuda_device_info(int device) {
  GpuInfo g;
  g.id = device;
#ifdef FLASHKIT_WITH_CUDA
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, device) == cudaSuccess) {
    g.name = p.name;
    g.sm_count = p.multiProcessorCount;
    g.cc_major = p.major;
    g.cc_minor = p.minor;
    g.global_mem = p.totalGlobalMem;
    g.l2_bytes = p.l2CacheSize;
    g.smem_per_sm = p.sharedMemPerMultiprocessor;
  }
#endif
  return g;
}

}  // namespace flashkit
