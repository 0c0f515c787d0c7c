// Host side of the sm80-class backward: the shared prologue (scratch, zeroed dQ accumulator,
// preprocess for D), the main kernel over (K/V block, KV head, batch), and the dQ conversion,
// all on the caller's stream. Explicitly instantiated per (dtype, hdim, score policy) by the
// generated files in src/cuda/instantiations/.
#pragma once
#include <cuda_runtime.h>

#include "cuda/attention/bwd_kernel.h"
#include "cuda/attention/fwd_kernel.h"
#include "cuda/attention/kernels.h"
#include "cuda/attention/sm80/bwd_epilogue.h"
#include "cuda/attention/sm80/bwd_mainloop.h"
#include "cuda/attention/sm80/bwd_pre_post.h"
#include "cuda/attention/tile_config.h"
#include "cuda/common/check.h"
#include "cuda/common/pdl.h"
#include "cuda/common/smem_limit.h"

namespace flashkit::cuda::attn {

template <class Element, int kHeadDim, class Policy>
void run_bwd_sm80(const AttnArguments& a, cudaStream_t stream) {
  constexpr DType dt = std::is_same_v<Element, cutlass::half_t> ? DType::f16 : DType::bf16;
  constexpr TileConfig t = tile_config(Pass::bwd, kHeadDim, dt, Policy::kCausal);
  using Mainloop = sm80::BwdMainloop<Element, kHeadDim, t.block_m, t.block_n, t.warps, Policy>;
  using Kernel = BwdKernel<Mainloop, sm80::BwdEpilogue<Mainloop>, SingleTileScheduler>;

  // The dQ conversion launches behind the main kernel where it can (sm80::bwd_convert_dq).
  const sm80::BwdScratch ws =
      sm80::bwd_prologue<Element, kHeadDim, t.block_m>(a, stream, true, sm80::bwd_tail_enabled());

  // Under a causal-like mask the first key blocks see the most query blocks: they start first
  // over groups of heads whose Q, dO and dQ accumulator share L2 (natural order otherwise). Key
  // blocks of one head still launch in order, which deterministic runs' semaphores rely on.
  const bool lpt = Policy::kCausal || a.causal || a.window_right >= 0;
  const size_t q_bytes = size_t(a.seqlen_q) * (a.heads / a.kv_heads) * kHeadDim * (2 * sizeof(Element) + 4);
  typename Kernel::Params params{
      Mainloop::to_params(a, ws), sm80::BwdEpilogue<Mainloop>::to_params(a),
      SingleTileScheduler::to_params(
          {ceil_div(a.seqlen_k, t.block_n), a.kv_heads, a.batch, false, lpt ? l2_pair_group(q_bytes) : 1}),
      a.seqlen_q, a.seqlen_k, a.cu_seqlens_q, a.cu_seqlens_k};
  constexpr auto kernel = run_kernel<Kernel>;
  ensure_smem_limit<kernel>(Kernel::kSmemBytes);
  kernel<<<SingleTileScheduler::grid_shape(params.scheduler), Kernel::kThreads, Kernel::kSmemBytes,
           stream>>>(params);
  FK_CHECK_LAUNCH("attention backward (sm80)");

  dim3 blocks_grid(unsigned(ceil_div(a.seqlen_q, t.block_m)), unsigned(a.heads), unsigned(a.batch));
  launch_pdl(sm80::bwd_convert_dq<Element, typename Mainloop::MmaDQ, Mainloop::kThreads, t.block_m,
                                  kHeadDim>,
             blocks_grid, Mainloop::kThreads, 0, stream, ws.dq_ready != nullptr, a, ws.dq_accum,
             static_cast<const int*>(ws.dq_ready), t.block_n);
  FK_CHECK_LAUNCH("attention backward dq conversion");
}

}  // namespace flashkit::cuda::attn
