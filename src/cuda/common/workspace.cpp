// Cached per-device scratch (workspace.h).
#include "cuda/common/workspace.h"

#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <string>
#include <tuple>
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
constexpr int kScratchSlots = 1;
std::map<std::tuple<int, int, Stream>, Cache> g_scratch;  // (slot, device, stream)

// c grown to `bytes` (the old buffer freed: cudaFree synchronises, only on growth).
void grow(Cache& c, size_t bytes) {
  if (c.ptr) FK_CUDA_CHECK(cudaFree(c.ptr));
  c.ptr = nullptr, c.bytes = 0;
  FK_CUDA_CHECK(cudaMalloc(&c.ptr, bytes));
  c.bytes = bytes;
}
bool capturing(Stream stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  FK_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status != cudaStreamCaptureStatusNone;
}
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
    if (capturing(stream))
      detail::fail("workspace: ", op, " needs ", bytes,
                   " bytes of scratch while a CUDA graph is being captured; run it once before "
                   "capture or pass opts.workspace");
    grow(c, bytes);
  }
  return c.ptr;
}

void* optional_scratch(int slot, size_t bytes, Stream stream) {
  if (bytes == 0 || slot < 0 || slot >= kScratchSlots || capturing(stream)) return nullptr;
  int dev = 0;
  FK_CUDA_CHECK(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(g_mutex);
  Cache& c = g_scratch[{slot, dev, stream}];
  if (c.bytes < bytes) {
    if (c.ptr) FK_CUDA_CHECK(cudaFree(c.ptr));
    c.ptr = nullptr, c.bytes = 0;
    if (cudaMalloc(&c.ptr, bytes) != cudaSuccess) {
      (void)cudaGetLastError();  // out of memory: the op runs without it
      c.ptr = nullptr;
      return nullptr;
    }
    c.bytes = bytes;
  }
  return c.ptr;
}

}  // namespace flashkit::cuda
