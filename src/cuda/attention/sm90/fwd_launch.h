// Host side of the Hopper forward: tiles for (hdim bucket, causal) from tile_config.h, the TMA
// descriptors built once into the kernel's Params, a persistent grid of one CTA per SM.
// Explicitly instantiated per (dtype, hdim, score policy) in src/cuda/instantiations/.
#pragma once
#include <cuda_runtime.h>

#include "cuda/attention/sm90/fwd_epilogue.h"
#include "cuda/attention/sm90/fwd_kernel.h"
#include "cuda/attention/sm90/fwd_mainloop.h"
#include "cuda/attention/tile_config.h"
#include "cuda/common/check.h"
#include "cuda/common/smem_limit.h"

namespace flashkit::cuda::attn {

template <class Element, int kHeadDim, class Policy>
void run_fwd_sm90(const AttnArguments& a, cudaStream_t stream) {
  constexpr bool kFp8 = sizeof(Element) == 1;
  static_assert(!kFp8 || Policy::kPlain, "the fp8 forward takes plain scores (causal or not)");
  constexpr Sm90FwdTiles t =
      kFp8 ? sm90_fwd_tiles_fp8(kHeadDim, Policy::kCausal) : sm90_fwd_tiles(kHeadDim, Policy::kPlain);
  using Mainloop = sm90::FwdMainloop<Element, kHeadDim, t.block_m, t.block_n, t.stages, t.pingpong,
                                     t.o_in_q, Policy>;
  using Kernel = sm90::FwdKernel<Mainloop, sm90::FwdEpilogue<Mainloop>, StaticPersistentScheduler>;
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
  auto params = Kernel::to_params(a, {num_blocks, a.heads, a.batch, reverse, sms});
  constexpr auto kernel = sm90::run_kernel_sm90<Kernel>;
  ensure_smem_limit<kernel>(Kernel::kSmemBytes);  // one driver call per device, not per launch
  kernel<<<StaticPersistentScheduler::grid_shape(params.scheduler), Kernel::kThreads,
           Kernel::kSmemBytes, stream>>>(params);
  FK_CHECK_LAUNCH("attention forward (sm90)");
}

}  // namespace flashkit::cuda::attn
