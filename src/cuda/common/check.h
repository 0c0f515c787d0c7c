// CUDA error handling: every runtime call and launch in src/cuda goes through FK_CUDA_CHECK /
// FK_CHECK_LAUNCH, which turn failures into flashkit::Error naming the call and the site.
#pragma once
#include <cuda_runtime.h>

#include <string>

#include "flashkit/errors.h"

namespace flashkit::cuda {

[[noreturn]] inline void throw_cuda(cudaError_t e, const char* what, const char* file, int line) {
  throw Error(std::string("CUDA error in ") + what + " (" + file + ":" + std::to_string(line) +
              "): " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

}  // namespace flashkit::cuda

#define FK_CUDA_CHECK(call)                                                        \
  do {                                                                             \
    cudaError_t fk_err_ = (call);                                                  \
    if (fk_err_ != cudaSuccess) ::flashkit::cuda::throw_cuda(fk_err_, #call, __FILE__, __LINE__); \
  } while (0)

// After a <<<...>>> launch: configuration errors surface here (never synchronises).
#define FK_CHECK_LAUNCH(name)                                                      \
  do {                                                                             \
    cudaError_t fk_err_ = cudaGetLastError();                                      \
    if (fk_err_ != cudaSuccess) ::flashkit::cuda::throw_cuda(fk_err_, name, __FILE__, __LINE__); \
  } while (0)
