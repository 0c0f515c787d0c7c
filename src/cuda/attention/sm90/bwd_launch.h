// Host side of the Hopper backward: the shared prologue (scratch, zeroed dQ accumulator,
// preprocess for D and LSE), the main kernel over (K/V block, KV head, batch) with the TMA
// descriptors in its Params, then the shared dQ conversion or, at hdim 256, the row-parallel dQ
// pass (sm90/bwd_dq.h). Explicitly instantiated per (dtype, hdim 64 / 128 / 256, score policy)
// in src/cuda/instantiations/.
#pragma once
#include <cuda_runtime.h>

#include <cstdlib>

#include "cuda/attention/sm80/bwd_pre_post.h"
#include "cuda/attention/sm90/bwd_dq.h"
#include "cuda/attention/sm90/bwd_epilogue.h"
#include "cuda/attention/sm90/bwd_kernel.h"
#include "cuda/attention/sm90/bwd_mainloop.h"
#include "cuda/attention/sm90/fwd_kernel.h"
#include "cuda/attention/tile_config.h"
#include "cuda/common/check.h"
#include "cuda/common/pdl.h"
#include "cuda/common/smem_limit.h"

namespace flashkit::cuda::attn {

// Host: FLASHKIT_BWD_ZERO_AHEAD=0 keeps the preprocess's zero fill of the whole dQ accumulator
// (A/B runs); =n > 0 zeroes n groups ahead instead of a wave's worth (tests: the mechanism on
// shapes too small for a wave ahead); unset: -1, the wave rule. Read per call.
inline int bwd_zero_ahead_env() {
  const char* e = std::getenv("FLASHKIT_BWD_ZERO_AHEAD");
  return e && e[0] ? std::atoi(e) : -1;
}

template <class Element, int kHeadDim, class Policy>
void run_bwd_sm90(const AttnArguments& a, cudaStream_t stream) {
  constexpr Sm90BwdTiles t = sm90_bwd_tiles(kHeadDim);
  using Mainloop = sm90::BwdMainloop<Element, kHeadDim, t.block_m, t.block_n, t.stages, Policy>;
  using Epilogue = sm90::BwdEpilogue<Mainloop>;
  // Dense and varlen batches are separate kernels (kVarlen), so that the dense one keeps the
  // sequence bounds in the constant bank and its mainloop the code it had before varlen.
  using Kernel = sm90::BwdKernel<Mainloop, Epilogue, SingleTileScheduler, false>;
  using VarlenKernel = sm90::BwdKernel<Mainloop, Epilogue, SingleTileScheduler, true>;

  // What follows the main kernel (the dQ conversion, or hdim 256's dQ pass) launches behind it
  // programmatically: it takes the SMs the main kernel's last wave leaves idle (the conversion
  // of a head once all of its key blocks have counted their dQ adds in).
  const bool tail = sm80::bwd_tail_enabled();
  // The sm80 launcher's order: longest first over L2-sized head groups under a causal-like mask
  // (causal or a right window bound); key blocks of one head launch in order (deterministic turns
  // rely on it).
  const bool lpt = Policy::kCausal || a.causal || a.window_right >= 0;
  const size_t q_bytes =
      size_t(a.seqlen_q) * (a.heads / a.kv_heads) * kHeadDim * (2 * sizeof(Element) + 4);
  const int group = lpt ? l2_pair_group(q_bytes) : 1;
  // Zero-ahead (BwdMainloop::zero_ahead): each group of the launch order zeroes the dQ chunks of
  // the group `ahead` groups later (at least a wave of CTAs, one a SM: a group's zeros are done
  // long before its first CTA starts), the preprocess only the first `ahead` groups'. Dense
  // non-deterministic runs with two or more query blocks (the counts sit in the semaphores'
  // words after dq_ready's) and more than `ahead` groups.
  const int pairs = a.batch * a.kv_heads, group_ctas = group * ceil_div(a.seqlen_k, t.block_n);
  int device = 0, sms = 0;
  FK_CUDA_CHECK(cudaGetDevice(&device));
  FK_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int env = bwd_zero_ahead_env();
  const int ahead = env > 0 ? env : ceil_div(sms, group_ctas);
  const bool zero_ahead = !Mainloop::kSplitD && !a.deterministic && !a.cu_seqlens_q &&
                          ceil_div(a.seqlen_q, t.block_m) >= 2 && pairs > group * ahead && env != 0;
  const sm80::BwdScratch ws = sm80::bwd_prologue<Element, kHeadDim, t.block_m>(
      a, stream, !Mainloop::kSplitD, tail && !Mainloop::kSplitD, zero_ahead ? group : 0,
      zero_ahead ? ahead : 0);
  // One warp-specialised kernel K (its Params carry the scheduler's) on `stream`.
  auto run = [&]<class K>(const typename K::Params& params,
                          const SingleTileScheduler::Params& sched, bool pdl) {
    constexpr auto kernel = sm90::run_kernel_sm90<K>;
    ensure_smem_limit<kernel>(K::kSmemBytes);
    launch_pdl(kernel, SingleTileScheduler::grid_shape(sched), K::kThreads, K::kSmemBytes, stream,
               pdl, params);
  };
  auto launch = [&]<class K>() {
    typename K::Params params{Mainloop::to_params(a, ws), Epilogue::to_params(a),
                              SingleTileScheduler::to_params({ceil_div(a.seqlen_k, t.block_n),
                                                              a.kv_heads, a.batch, false, group})};
    run.template operator()<K>(params, params.scheduler, false);
  };
  if (a.cu_seqlens_q) launch.template operator()<VarlenKernel>();
  else launch.template operator()<Kernel>();
  FK_CHECK_LAUNCH("attention backward (sm90)");

  if constexpr (Mainloop::kSplitD) {  // hdim 256: dQ row-parallel (sm90/bwd_dq.h), no adds
    using DqPass = sm90::BwdDqKernel<Element, kHeadDim, 3, Policy, false>;
    using VarlenDqPass = sm90::BwdDqKernel<Element, kHeadDim, 3, Policy, true>;
    static_assert(t.block_m == DqPass::kBlockM,
                  "the dQ pass reads the preprocess's LSE / D chunks of block_m rows");
    const size_t kv_bytes = size_t(a.seqlen_k) * kHeadDim * 2 * sizeof(Element);
    const auto sched =
        SingleTileScheduler::to_params({ceil_div(a.seqlen_q, DqPass::kBlockM), a.heads, a.batch,
                                        lpt, lpt ? l2_pair_group(kv_bytes) : 1});
    if (a.cu_seqlens_q)
      run.template operator()<VarlenDqPass>(VarlenDqPass::to_params(a, ws, sched), sched, tail);
    else
      run.template operator()<DqPass>(DqPass::to_params(a, ws, sched), sched, tail);
    FK_CHECK_LAUNCH("attention backward dq pass (sm90)");
  } else {
    dim3 blocks_grid(unsigned(ceil_div(a.seqlen_q, t.block_m)), unsigned(a.heads),
                     unsigned(a.batch));
    launch_pdl(sm80::bwd_convert_dq<Element, typename Mainloop::TiledMmadQ,
                                    Mainloop::kConsumerThreads, t.block_m, kHeadDim>,
               blocks_grid, Mainloop::kConsumerThreads, 0, stream, ws.dq_ready != nullptr, a,
               ws.dq_accum, static_cast<const int*>(ws.dq_ready), t.block_n);
    FK_CHECK_LAUNCH("attention backward dq conversion");
  }
}

}  // namespace flashkit::cuda::attn
