// The forward kernel as a composition Kernel<Mainloop, Epilogue, TileScheduler> (FA3's shape):
// the scheduler hands out (query block, head, batch) tiles, the mainloop accumulates O and the
// softmax stats, the epilogue writes O and LSE. The sm90 path reuses this with its own parts.
#pragma once
#include <cute/tensor.hpp>

#include "cuda/attention/params.h"
#include "cuda/attention/seqlen.h"
#include "cuda/attention/tile_scheduler.h"

namespace flashkit::cuda::attn {

template <class Mainloop, class Epilogue, class Scheduler>
struct FwdKernel {
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
  static Params to_params(const AttnArguments& a, const typename Scheduler::Arguments& s) {
    return {Mainloop::to_params(a), Epilogue::to_params(a), Scheduler::to_params(s),
            a.seqlen_q, a.seqlen_k, a.cu_seqlens_q, a.cu_seqlens_k};
  }

  __device__ void operator()(const Params& p, char* smem_raw) const {
    auto& smem = *reinterpret_cast<SharedStorage*>(smem_raw);
    const int tid = int(threadIdx.x);
    for (WorkTile w = Scheduler::initial_work(p.scheduler); w.valid;
         w = Scheduler::next_work(p.scheduler, w)) {
      SeqBounds sb(p.cu_seqlens_q, p.cu_seqlens_k, w.batch, p.seqlen_q, p.seqlen_k);
      if (w.block * Mainloop::kBlockM >= sb.seqlen_q) continue;  // varlen grids cover the longest
      auto acc_o = cute::partition_fragment_C(
          typename Mainloop::TiledMma{},
          cute::Shape<cute::Int<Mainloop::kBlockM>, cute::Int<Mainloop::kHeadDim>>{});
      typename Mainloop::Softmax softmax;
      Mainloop::run(p.mainloop, smem.mainloop, w, sb, acc_o, softmax, tid);
      Epilogue::store(p.epilogue, smem.epilogue, w, sb, acc_o, softmax, tid);
      __syncthreads();  // the epilogue's smem aliases the next tile's mainloop buffers
    }
  }
};

template <class Kernel>
__global__ void __launch_bounds__(Kernel::kThreads)
    run_kernel(const __grid_constant__ typename Kernel::Params p) {
  extern __shared__ __align__(128) char smem[];
  Kernel{}(p, smem);
}

}  // namespace flashkit::cuda::attn
