// Raising a kernel's dynamic shared-memory limit (needed above 48 KB) once per (kernel, device):
// the attribute is per-device state that persists, so the launchers set it on a kernel's first
// launch on each device instead of paying a driver call on every launch. A device that cannot
// give one CTA that much (an A100's 163 KB against a Hopper kernel's 200) gets an Error that
// starts with `what` (the argument that chose the kernel) instead of the driver's "invalid
// argument"; nothing is launched.
#pragma once
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "api/validate.h"
#include "cuda/common/check.h"

namespace flashkit::cuda {

// Kernel: a __global__ function; bytes is the same on every call for one Kernel.
template <auto Kernel>
void ensure_smem_limit(int bytes, const char* what = "kernel") {
  static std::atomic<uint64_t> done{0};  // bit d: set on device d (devices >= 64 set every time)
  int device = 0;
  FK_CUDA_CHECK(cudaGetDevice(&device));
  const uint64_t bit = device < 64 ? uint64_t(1) << device : 0;
  if (bit != 0 && (done.load(std::memory_order_acquire) & bit) != 0) return;
  int optin = 0;
  FK_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (bytes > optin)
    flashkit::detail::fail(what, " needs ", bytes, " bytes of shared memory a CTA; cuda:", device,
                           " allows ", optin);
  FK_CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  done.fetch_or(bit, std::memory_order_release);
}

}  // namespace flashkit::cuda
