// plan_on_device (plan_device.h): one cudaMalloc holding every array of the plan, zeroed sync
// words, owned through plan.device_cache by a shared_ptr whose deleter frees it.
#include "cuda/decode/plan_device.h"

#include <cstring>
#include <vector>

#include "api/validate.h"
#include "cuda/common/check.h"

namespace flashkit::cuda::decoding {

namespace {
struct Blob {
  PlanOnDevice view;
  void* base = nullptr;
};
size_t align16(size_t n) { return (n + 15) / 16 * 16; }
}  // namespace

PlanOnDevice plan_on_device(const DecodePlan& plan, int device, cudaStream_t stream) {
  detail::PlanDeviceCache& cache = *plan.device_cache;
  std::lock_guard<std::mutex> lock(cache.mutex);
  if (cache.copy && cache.device_id == device) return static_cast<Blob*>(cache.copy.get())->view;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  FK_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  if (status != cudaStreamCaptureStatusNone)
    detail::fail("plan: not yet on this GPU while a CUDA graph is being captured; run decode with it "
                 "once before capture");
  const size_t n_tiles = plan.tiles.size() * sizeof(DecodeTile), n_ctas = plan.ctas.size() * sizeof(LeanCta),
               n_splits = plan.splits.size() * sizeof(KvSplit), n_lens = plan.kv_lengths.size() * sizeof(int),
               n_sync = (static_cast<size_t>(plan.grid) + 2) * sizeof(unsigned);
  const size_t o_ctas = align16(n_tiles), o_splits = o_ctas + align16(n_ctas),
               o_lens = o_splits + align16(n_splits), o_sync = o_lens + align16(n_lens),
               total = o_sync + align16(n_sync);
  std::vector<char> host(total, 0);
  std::memcpy(host.data(), plan.tiles.data(), n_tiles);
  if (n_ctas) std::memcpy(host.data() + o_ctas, plan.ctas.data(), n_ctas);
  if (n_splits) std::memcpy(host.data() + o_splits, plan.splits.data(), n_splits);
  std::memcpy(host.data() + o_lens, plan.kv_lengths.data(), n_lens);
  auto blob = new Blob;
  FK_CUDA_CHECK(cudaMalloc(&blob->base, total));
  FK_CUDA_CHECK(cudaMemcpy(blob->base, host.data(), total, cudaMemcpyHostToDevice));
  char* b = static_cast<char*>(blob->base);
  blob->view = PlanOnDevice{reinterpret_cast<const DecodeTile*>(b), reinterpret_cast<const LeanCta*>(b + o_ctas),
                            reinterpret_cast<const KvSplit*>(b + o_splits), reinterpret_cast<const int*>(b + o_lens),
                            reinterpret_cast<unsigned*>(b + o_sync),
                            reinterpret_cast<unsigned*>(b + o_sync) + plan.grid,
                            reinterpret_cast<unsigned*>(b + o_sync) + plan.grid + 1};
  cache.copy = std::shared_ptr<void>(blob, [](void* p) {
    Blob* bl = static_cast<Blob*>(p);
    cudaFree(bl->base);  // at process exit the context may be gone: nothing left to report to
    delete bl;
  });
  cache.device_id = device;
  return blob->view;
}

}  // namespace flashkit::cuda::decoding
