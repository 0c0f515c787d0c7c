// dropout_mask_out on the GPU (kernels.h's write_dropout_mask): the keep bit of every element of
// [batch, heads, seqlen_q, seqlen_k], from the same Philox draws the fused kernels and the CPU use
// (common/philox.h). Tests only: one thread per 16 columns of a row, one Philox call each.
#include "common/philox.h"
#include "cuda/attention/kernels.h"
#include "cuda/attention/seqlen.h"
#include "cuda/common/check.h"

namespace flashkit::cuda::attn {
namespace {

struct MaskParams {
  uint8_t* mask;
  int64_t stride[4];
  uint64_t seed, offset;
  uint32_t threshold;
  int heads, seqlen_q, seqlen_k;
};

__global__ void dropout_mask_kernel(const MaskParams p) {
  const int col16 = int(blockIdx.x * blockDim.x + threadIdx.x);
  const int row = int(blockIdx.y), b = int(blockIdx.z) / p.heads, h = int(blockIdx.z) % p.heads;
  if (16 * col16 >= p.seqlen_k) return;
  const uint32_t keep =
      dropout_keep16(dropout_draws(p.seed, p.offset, b, h, p.heads, row, col16), p.threshold);
  uint8_t* out = p.mask + b * p.stride[0] + h * p.stride[1] + row * p.stride[2];
  for (int e = 0; e < 16 && 16 * col16 + e < p.seqlen_k; ++e)
    out[(16 * col16 + e) * p.stride[3]] = (keep >> e) & 1u;
}

}  // namespace

void write_dropout_mask(const AttnArguments& a, uint8_t* mask, const int64_t (&stride)[4],
                        cudaStream_t stream) {
  MaskParams p{mask, {stride[0], stride[1], stride[2], stride[3]}, a.dropout_seed,
               a.dropout_offset, a.dropout_threshold, a.heads, a.seqlen_q, a.seqlen_k};
  const int col16s = ceil_div(a.seqlen_k, 16);
  dim3 grid(unsigned(ceil_div(col16s, 128)), unsigned(a.seqlen_q), unsigned(a.batch * a.heads));
  if (col16s == 0) return;
  dropout_mask_kernel<<<grid, 128, 0, stream>>>(p);
  FK_CHECK_LAUNCH("attention dropout mask");
}

}  // namespace flashkit::cuda::attn
