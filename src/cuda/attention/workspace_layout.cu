// The backward's scratch layout (kernels.h): offsets 256-byte aligned within one buffer.
#include "cuda/attention/kernels.h"
#include "cuda/attention/tile_config.h"

namespace flashkit::cuda::attn {

BwdWorkspace bwd_workspace_layout(int batch, int heads, int64_t total_q, int seqlen_q,
                                  int hdim_bucket_) {
  auto align = [](size_t x) { return (x + 255) / 256 * 256; };
  const int block_m = tile_config(Pass::bwd, hdim_bucket_, DType::bf16, false).block_m;
  BwdWorkspace w;
  w.dq_accum = 0;
  const size_t chunks = size_t((total_q + block_m - 1) / block_m) + size_t(batch);  // dq_chunk()
  w.dsum = align(chunks * heads * block_m * hdim_bucket_ * sizeof(float));
  const size_t row_stats = align(chunks * heads * block_m * sizeof(float));  // row_chunk()
  w.lse_log2 = w.dsum + row_stats;
  w.semaphore = w.lse_log2 + row_stats;
  w.bytes = w.semaphore + align(size_t(batch) * heads * ((seqlen_q + block_m - 1) / block_m) * sizeof(int));
  return w;
}

}  // namespace flashkit::cuda::attn
