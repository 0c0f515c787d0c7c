// Host side of the sm80-class forward: picks the tiles for (hdim bucket, dtype, causal), builds
// the kernel's Params once and launches. Explicitly instantiated per (dtype, hdim, score policy)
// by the generated files in src/cuda/instantiations/.
#pragma once
#include <cuda_runtime.h>

#include "cuda/attention/fwd_kernel.h"
#include "cuda/attention/sm80/fwd_epilogue.h"
#include "cuda/attention/sm80/fwd_mainloop.h"
#include "cuda/attention/tile_config.h"
#include "cuda/common/check.h"
#include "cuda/common/smem_limit.h"

namespace flashkit::cuda::attn {

template <class Element>
constexpr DType dtype_of() {
  return std::is_same_v<Element, cutlass::half_t> ? DType::f16 : DType::bf16;
}

template <class Element, int kHeadDim, class Policy>
void run_fwd_sm80(const AttnArguments& a, cudaStream_t stream) {
  constexpr TileConfig t =
      sm80_fwd_tile(kHeadDim, dtype_of<Element>(), Policy::kCausal, Policy::kPlain);
  // Modifiers that need registers the plain tile leaves no room for (the O accumulator plus a
  // 128x64 S tile sit at the 255 cap) take half-width key steps (score_policy.h's kNarrowKeys).
  constexpr int block_n = Policy::kNarrowKeys ? t.block_n / 2 : t.block_n;
  using Mainloop =
      sm80::FwdMainloop<Element, kHeadDim, t.block_m, block_n, t.warps, t.stages, Policy>;
  using Kernel = FwdKernel<Mainloop, sm80::FwdEpilogue<Mainloop>, SingleTileScheduler>;
  // Varlen grids cover the longest sequence; blocks past a shorter one exit at once.
  int num_blocks = ceil_div(a.seqlen_q, t.block_m);
  // Last query blocks first when they carry the most key tiles (a causal-like upper bound), over
  // groups of heads whose K/V share L2.
  const bool reverse = Policy::kCausal || a.causal || a.window_right >= 0;
  const int group = reverse ? l2_pair_group(size_t(a.seqlen_k) * kHeadDim * 2 * sizeof(Element)) : 1;
  auto params = Kernel::to_params(a, {num_blocks, a.heads, a.batch, reverse, group});
  constexpr auto kernel = run_kernel<Kernel>;
  ensure_smem_limit<kernel>(Kernel::kSmemBytes);
  kernel<<<SingleTileScheduler::grid_shape(params.scheduler), Kernel::kThreads, Kernel::kSmemBytes,
           stream>>>(params);
  FK_CHECK_LAUNCH("attention forward (sm80)");
}

}  // namespace flashkit::cuda::attn
