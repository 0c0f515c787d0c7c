// gpu_median_ms (cli.h): the CLI's GPU timer, shared by the decode and fp8 attention benches.
#include <algorithm>
#include <vector>

#include "cli.h"

#ifdef FLASHKIT_WITH_CUDA
#include <cuda_runtime.h>

#include "cuda/common/check.h"

namespace flashkit::cli {

double gpu_median_ms(const std::function<void()>& call, int repeats) {
  void* flush = nullptr;
  const size_t flush_bytes = size_t{256} << 20;
  FK_CUDA_CHECK(cudaMalloc(&flush, flush_bytes));
  cudaEvent_t a, b;
  FK_CUDA_CHECK(cudaEventCreate(&a));
  FK_CUDA_CHECK(cudaEventCreate(&b));
  std::vector<float> times;
  for (int i = 0; i < repeats; ++i) {
    FK_CUDA_CHECK(cudaMemsetAsync(flush, i & 0xff, flush_bytes));
    FK_CUDA_CHECK(cudaEventRecord(a));
    call();
    FK_CUDA_CHECK(cudaEventRecord(b));
    FK_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    FK_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    times.push_back(ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaFree(flush);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace flashkit::cli
#endif
