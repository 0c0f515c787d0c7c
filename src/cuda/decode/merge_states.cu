// GPU merge_states (include/flashkit/decode.h): one warp per output row folds the P parts with
// merge_stats (stat_from_lse of each part), lanes own columns. (Split-KV decode merges inside its
// kernel, kernel.h, in the same layout.)
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "api/validate.h"
#include "common/softmax_state.h"
#include "cuda/common/check.h"
#include "cuda/decode/launch.h"

namespace flashkit::cuda {

namespace {

constexpr int kMaxLead = 4, kMaxCols = 8;  // hdim <= 32 * 8

struct MergeParams {
  const void* o;
  const float* lse_p;
  void* out;
  float* lse;
  DType o_dt, out_dt;
  int parts, lead, d;
  int64_t rows;
  int64_t shape[kMaxLead];
  int64_t o_s[kMaxLead + 1], l_s[kMaxLead + 1], out_s[kMaxLead], lse_s[kMaxLead];
};

__device__ __forceinline__ float load(const void* p, DType t, int64_t i) {
  if (t == DType::f32) return __ldg(static_cast<const float*>(p) + i);
  if (t == DType::bf16) return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  return __half2float(static_cast<const __half*>(p)[i]);
}
__device__ __forceinline__ void store(void* p, DType t, int64_t i, float v) {
  if (t == DType::f32) static_cast<float*>(p)[i] = v;
  else if (t == DType::bf16) static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
  else static_cast<__half*>(p)[i] = __float2half_rn(v);
}

__global__ void merge_kernel(const __grid_constant__ MergeParams p) {
  const int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= p.rows) return;
  int64_t rem = row, o_off = 0, l_off = 0, out_off = 0, lse_off = 0;
  for (int i = p.lead - 1; i >= 0; --i) {
    const int64_t c = rem % p.shape[i];
    rem /= p.shape[i];
    o_off += c * p.o_s[i + 1];
    l_off += c * p.l_s[i + 1];
    out_off += c * p.out_s[i];
    lse_off += c * p.lse_s[i];
  }
  float acc[kMaxCols] = {};
  SoftmaxStat st;
  for (int part = 0; part < p.parts; ++part) {
    const MergeScales m = merge_stats(st, stat_from_lse(p.lse_p[l_off + part * p.l_s[0]]));
    const int64_t base = o_off + part * p.o_s[0];
#pragma unroll
    for (int k = 0; k < kMaxCols; ++k) {
      const int c = lane + 32 * k;
      if (c < p.d) acc[k] = acc[k] * m.scale_a + (m.scale_b != 0.f ? load(p.o, p.o_dt, base + c) * m.scale_b : 0.f);
    }
    st = m.merged;
  }
  const float inv = st.l > 0.f ? 1.f / st.l : 0.f;
#pragma unroll
  for (int k = 0; k < kMaxCols; ++k)
    if (lane + 32 * k < p.d) store(p.out, p.out_dt, out_off + lane + 32 * k, acc[k] * inv);
  if (p.lse && lane == 0) p.lse[lse_off] = stat_lse(st);
}

}  // namespace

void merge_states(const TensorView& o_parts, const TensorView& lse_parts, const TensorView& out,
                  const TensorView& lse, Stream stream) {
  MergeParams p{};
  p.d = static_cast<int>(out.shape[out.ndim - 1]);
  if (p.d > 32 * kMaxCols) detail::fail("out: expected hdim <= ", 32 * kMaxCols, " on the GPU, got ", p.d);
  p.o = o_parts.data;
  p.lse_p = lse_parts.ptr<const float>();
  p.out = out.data;
  p.lse = lse.ptr<float>();
  p.o_dt = o_parts.dtype;
  p.out_dt = out.dtype;
  p.parts = static_cast<int>(o_parts.shape[0]);
  p.lead = out.ndim - 1;
  p.rows = 1;
  for (int i = 0; i < p.lead; ++i) {
    p.shape[i] = out.shape[i];
    p.rows *= out.shape[i];
    p.out_s[i] = out.stride[i];
    p.lse_s[i] = lse.data ? lse.stride[i] : 0;
  }
  for (int i = 0; i <= p.lead; ++i) {
    p.o_s[i] = o_parts.stride[i];
    p.l_s[i] = lse_parts.stride[i];
  }
  if (p.rows == 0) return;
  constexpr int kThreads = 256;
  const int64_t blocks = (p.rows * 32 + kThreads - 1) / kThreads;
  merge_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(p);
  FK_CHECK_LAUNCH("merge_kernel");
}

}  // namespace flashkit::cuda
