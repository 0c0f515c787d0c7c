// cuTensorMapEncodeTiled reached through the runtime's driver entry point (so the library needs
// no -lcuda link), looked up once per process; null where the driver lacks it. Shared by the
// decode loads' maps and the MAS band kernel's likelihood map.
#pragma once
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

namespace flashkit::cuda {

inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      f = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

}  // namespace flashkit::cuda
