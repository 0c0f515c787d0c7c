// The backward's main kernel as Kernel<Mainloop, Epilogue, TileScheduler>: the scheduler hands out
// (K/V block, KV head, batch) tiles, the mainloop accumulates dK/dV (and adds dQ to scratch), the
// epilogue stores dK/dV. Pre- and post-passes (D, dQ conversion) are launched beside it.
#pragma once
#include <cute/tensor.hpp>

#include "cuda/attention/params.h"
#include "cuda/attention/seqlen.h"
#include "cuda/attention/tile_scheduler.h"
#include "cuda/common/pdl.h"

namespace flashkit::cuda::attn {

template <class Mainloop, class Epilogue, class Scheduler>
struct BwdKernel {
  static constexpr int kThreads = Mainloop::kThreads;
  union SharedStorage {
    typename Mainloop::SharedStorage mainloop;
    typename Epilogue::SharedStorage epilogue;
  };
  static constexpr int kSmemBytes = int(sizeof(SharedStorage));

  struct Params {
    typename Mainloop::Params mainloop;
    typename Epilogue::Params epilogue;
    typename Scheduler::Params scheduler;
    int seqlen_q, seqlen_k;
    const int *cu_seqlens_q, *cu_seqlens_k;
  };

  __device__ void operator()(const Params& p, char* smem_raw) const {
    pdl_launch_dependents();  // the dQ conversion may take the SMs the last wave leaves idle
    auto& smem = *reinterpret_cast<SharedStorage*>(smem_raw);
    const int tid = int(threadIdx.x);
    for (WorkTile w = Scheduler::initial_work(p.scheduler); w.valid;
         w = Scheduler::next_work(p.scheduler, w)) {
      SeqBounds sb(p.cu_seqlens_q, p.cu_seqlens_k, w.batch, p.seqlen_q, p.seqlen_k);
      if (w.block * Mainloop::kBlockN >= sb.seqlen_k) continue;  // varlen grids cover the longest
      auto acc_dk = cute::partition_fragment_C(
          typename Mainloop::MmaKV{},
          cute::Shape<cute::Int<Mainloop::kBlockN>, cute::Int<Mainloop::kHeadDim>>{});
      auto acc_dv = cute::make_fragment_like(acc_dk);
      Mainloop::run(p.mainloop, smem.mainloop, w, sb, acc_dk, acc_dv, tid);
      __syncthreads();  // the epilogue's staging aliases the mainloop's buffers
      Epilogue::store(p.epilogue, smem.epilogue, w, sb, acc_dk, acc_dv, tid);
      __syncthreads();
      Mainloop::signal_dq_ready(p.mainloop, w, tid);
    }
  }
};

}  // namespace flashkit::cuda::attn
