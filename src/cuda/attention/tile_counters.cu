// The Hopper forward's tile counters (tile_counters.h): a static ring in device memory, so a
// launch needs no allocation (CUDA-graph capture included) and launches in flight on different
// streams take different counters.
#include "cuda/attention/tile_counters.h"

#include <cuda_runtime.h>

#include <atomic>
#include <mutex>

#include "cuda/common/check.h"

namespace flashkit::cuda::attn {

namespace {
// One counter every 128 bytes (its own L2 line): launches running side by side do not contend.
constexpr int kStride = 32;
__device__ unsigned g_tile_counters[kTileCounterSlots * kStride];

constexpr int kMaxDevices = 64;
std::mutex g_mutex;
unsigned* g_base[kMaxDevices] = {};
std::atomic<unsigned> g_next{0};
}  // namespace

unsigned* next_tile_counter(int device, cudaStream_t stream) {
  unsigned* base = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (device < 0 || device >= kMaxDevices) return nullptr;  // the fixed order then
    if (!g_base[device]) {
      // The symbol's first lookup may load the module: not inside a stream capture (the fixed
      // order serves that launch; the next uncaptured one looks it up).
      cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
      FK_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
      if (status != cudaStreamCaptureStatusNone) return nullptr;
      void* p = nullptr;
      FK_CUDA_CHECK(cudaGetSymbolAddress(&p, g_tile_counters));
      g_base[device] = static_cast<unsigned*>(p);
    }
    base = g_base[device];
  }
  unsigned* c = base + (g_next.fetch_add(1, std::memory_order_relaxed) % kTileCounterSlots) * kStride;
  FK_CUDA_CHECK(cudaMemsetAsync(c, 0, sizeof(unsigned), stream));
  return c;
}

}  // namespace flashkit::cuda::attn
