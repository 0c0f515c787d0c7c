// Host side of the Hopper forward: tiles for (hdim bucket, causal) from tile_config.h, the TMA
// descriptors built once into the kernel's Params, a persistent grid of one CTA per SM.
// Explicitly instantiated per (dtype, hdim, score policy) in src/cuda/instantiations/.
#pragma once
#include <cuda_runtime.h>

#include "cuda/attention/sm90/fwd_epilogue.h"
#include "cuda/attention/sm90/fwd_kernel.h"
#include "cuda/attention/sm90/fwd_mainloop.h"
#include "cuda/attention/tile_config.h"
#include "cuda/attention/tile_counters.h"
#include "cuda/attention/tile_scheduler.h"
#include "cuda/common/check.h"
#include "cuda/common/smem_limit.h"

namespace flashkit::cuda::attn {

template <class Element, int kHeadDim, class Policy>
void run_fwd_sm90(const AttnArguments& a, cudaStream_t stream) {
  constexpr bool kFp8 = sizeof(Element) == 1;
  static_assert(!kFp8 || Policy::kPlain, "the fp8 forward takes plain scores (causal or not)");
  constexpr Sm90FwdTiles t = kFp8 ? sm90_fwd_tiles_fp8(kHeadDim, Policy::kCausal)
                                  : sm90_fwd_tiles(kHeadDim, Policy::kPlain, Policy::kSlimScores);
  using Mainloop = sm90::FwdMainloop<Element, kHeadDim, t.block_m, t.block_n, t.stages, t.pingpong,
                                     t.o_in_q, Policy>;
  using Kernel = sm90::FwdKernel<Mainloop, sm90::FwdEpilogue<Mainloop>, sm90::FwdScheduler>;
  static_assert(Kernel::kSmemBytes <= 227 * 1024,
                "sm90 forward tiles exceed the 227 KB of shared memory a CTA may use");
  int device = 0, sms = 0;
  FK_CUDA_CHECK(cudaGetDevice(&device));
  FK_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int num_blocks = ceil_div(a.seqlen_q, t.block_m);
  // Paired query blocks where the last ones carry the most key tiles (causal, as a right window
  // bound makes it for the general policies): tile_scheduler.h.
  const bool reverse = Policy::kCausal || a.causal || a.window_right >= 0;
  if constexpr (kFp8) {  // V^T into the caller's scratch a.vt (fp8_vt_bytes)
    sm90::transpose_v_fp8_launch<kHeadDim>(a, stream);
    FK_CHECK_LAUNCH("attention forward (fp8 V transpose)");
  }
  // Causal tiles (of unequal cost), more than one a CTA: drawn from a counter, longest first in
  // L2-sized groups of (head, batch) pairs (sm90/fwd_scheduler.h, tile_counters.h). Dense tiles
  // keep the fixed order, even where the last query block is partial (the counter measured 1-4%
  // slower there: bench/NOTES-attention.md, session 17).
  const int tiles = num_blocks * a.heads * a.batch;
  unsigned* counter =
      reverse && tiles > sms && !a.fixed_tile_order ? next_tile_counter(device, stream) : nullptr;
  const size_t kv_bytes = size_t(a.seqlen_k) * kHeadDim * 2 * sizeof(Element) /
                          size_t(a.heads / (a.kv_heads > 0 ? a.kv_heads : 1));
  // hdim 256 causal-like orders group pairs for a 64 MB L2 budget: measured 2-3% faster at
  // 8k-16k under load, where hdim 64 / 128 lose 3-5% with it and keep 32 (bench/NOTES-attention.md,
  // session 30).
  const int budget_mb = kHeadDim > 128 && reverse ? 64 : 32;
  auto params = Kernel::to_params(
      a, {num_blocks, a.heads, a.batch, reverse, sms, counter, l2_pair_group(kv_bytes, budget_mb)});
  constexpr auto kernel = sm90::run_kernel_sm90<Kernel>;
  ensure_smem_limit<kernel>(Kernel::kSmemBytes);  // one driver call per device, not per launch
  kernel<<<sm90::FwdScheduler::grid_shape(params.scheduler), Kernel::kThreads,
           Kernel::kSmemBytes, stream>>>(params);
  FK_CHECK_LAUNCH("attention forward (sm90)");
}

}  // namespace flashkit::cuda::attn
