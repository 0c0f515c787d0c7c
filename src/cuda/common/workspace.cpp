// Cached per-device scratch (workspace.h).
#include "cuda/common/workspace.h"

#include <cuda_runtime.h>

#include <mutex>
#include <string>
#include <vector>

#include "api/validate.h"
#include "cuda/common/check.h"

namespace flashkit::cuda {

namespace {
struct Cache {
  void* ptr = nullptr;
  size_t bytes = 0;
};
std::mutex g_mutex;
std::vector<Cache> g_cache;
}  // namespace

void* workspace(const Workspace& given, size_t bytes, Stream stream, const char* op) {
  if (bytes == 0) return nullptr;
  if (given.data) {
    if (given.bytes < bytes)
      detail::fail("workspace: ", op, " needs ", bytes, " bytes, got ", given.bytes);
    return given.data;
  }
  int dev = 0;
  FK_CUDA_CHECK(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(g_mutex);
  if (static_cast<int>(g_cache.size()) <= dev) g_cache.resize(dev + 1);
  Cache& c = g_cache[dev];
  if (c.bytes < bytes) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    FK_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
    if (status != cudaStreamCaptureStatusNone)
      detail::fail("workspace: ", op, " needs ", bytes,
                   " bytes of scratch while a CUDA graph is being captured; run it once before "
                   "capture or pass opts.workspace");
    if (c.ptr) FK_CUDA_CHECK(cudaFree(c.ptr));  // cudaFree synchronises; only on growth
    c.ptr = nullptr;
    FK_CUDA_CHECK(cudaMalloc(&c.ptr, bytes));
    c.bytes = bytes;
  }
  return c.ptr;
}

}  // namespace flashkit::cuda
