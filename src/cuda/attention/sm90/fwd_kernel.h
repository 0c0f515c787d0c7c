// The Hopper forward kernel: Kernel<Mainloop, Epilogue, TileScheduler> like fwd_kernel.h, but
// warp-specialised. Warpgroup 0 is the producer (its registers given up with setmaxnreg; its
// first warp walks the key blocks, one lane issues every TMA load); the other two or three are
// the consumers (registers raised), which run the mainloop's GEMMs, softmax and the epilogue.
// Both roles walk the persistent scheduler's tiles in the same order (sm90/fwd_scheduler.h: a
// fixed order, or one the producer draws from a counter and hands on) and meet only at the
// mbarriers in shared memory.
#pragma once
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>

#include "cuda/attention/params.h"
#include "cuda/attention/seqlen.h"
#include "cuda/attention/sm90/fwd_mainloop.h"
#include "cuda/attention/sm90/fwd_scheduler.h"

namespace flashkit::cuda::attn::sm90 {

template <class Mainloop, class Epilogue, class Scheduler>
struct FwdKernel {
  static constexpr int kThreads = 128 + Mainloop::kConsumerThreads;
  // The 64K registers per SM: with 2 consumer warpgroups the producer keeps 24 per thread and
  // the consumers take 240 (128*24 + 256*240 = 64512); with 3, 32 and 160 (= 65536).
  static constexpr bool kThreeConsumers = Mainloop::kConsumerWarpgroups == 3;
  static constexpr uint32_t kProducerRegs = kThreeConsumers ? 32 : 24;
  static constexpr uint32_t kConsumerRegs = kThreeConsumers ? 160 : 240;
  static_assert(Mainloop::kConsumerWarpgroups == 2 || Mainloop::kConsumerWarpgroups == 3);
  struct SharedStorage {
    typename Mainloop::SharedStorage mainloop;
    typename Epilogue::SharedStorage epilogue;
    typename Scheduler::SharedStorage scheduler;
  };
  static constexpr int kSmemBytes = int(sizeof(SharedStorage));

  struct Params {
    typename Mainloop::Params mainloop;
    typename Epilogue::Params epilogue;
    typename Scheduler::Params scheduler;
  };
  static Params to_params(const AttnArguments& a, const typename Scheduler::Arguments& s) {
    return {Mainloop::to_params(a), Epilogue::to_params(a), Scheduler::to_params(s)};
  }

  __device__ void operator()(const Params& p, char* smem_raw) const {
    auto& smem = *reinterpret_cast<SharedStorage*>(smem_raw);
    const int warpgroup = cutlass::canonical_warp_group_idx();
    if (threadIdx.x == 0) {
      Mainloop::init(smem.mainloop);
      Scheduler::init(smem.scheduler, Mainloop::kConsumerThreads);
      cutlass::arch::fence_barrier_init();
    }
    __syncthreads();
    typename Mainloop::PipelineState pipe;

    if (warpgroup == 0) {
      cutlass::arch::warpgroup_reg_dealloc<kProducerRegs>();
      if (cutlass::canonical_warp_idx_sync() == 0) {  // the producer warp; one lane issues
        const bool leader = cute::elect_one_sync();
        const int leader_lane = __ffs(__ballot_sync(0xffffffffu, leader)) - 1;
        if (leader) Mainloop::prefetch_descriptors(p.mainloop);
        int k = 0;
        for (WorkTile w = Scheduler::initial_work(p.scheduler); w.valid; ++k) {
          const unsigned ticket = Scheduler::request(p.scheduler, leader);
          const SeqBounds sb = Mainloop::seq_bounds(p.mainloop, w);
          if (Mainloop::in_sequence(sb, w))
            Mainloop::load(p.mainloop, smem.mainloop, w, sb, pipe, leader);
          w = Scheduler::producer_next(p.scheduler, smem.scheduler, w, ticket, k, leader,
                                       leader_lane);
        }
      }
    } else {
      cutlass::arch::warpgroup_reg_alloc<kConsumerRegs>();
      const int tid = int(threadIdx.x) - 128;
      if (tid == 0) Epilogue::prefetch_descriptors(p.epilogue);
      // The warpgroup index from lane 0, so the ping-pong's barrier ids are warp-uniform (v5).
      const typename Mainloop::Turns turns{__shfl_sync(0xffffffffu, tid / 128, 0)};
      turns.start();
      int k = 0;
      for (WorkTile w = Scheduler::initial_work(p.scheduler); w.valid;
           w = Scheduler::consumer_next(p.scheduler, smem.scheduler, w, k++)) {
        FK_FWD_STAMP(tid, k, 0);
        const SeqBounds sb = Mainloop::seq_bounds(p.mainloop, w);
        if (!Mainloop::in_sequence(sb, w)) continue;
        auto acc_o = partition_fragment_C(
            typename Mainloop::TiledMmaPV{},
            Shape<Int<Mainloop::kBlockM>, Int<Mainloop::kHeadDim>>{});
        typename Mainloop::Softmax softmax;
        Mainloop::mma(p.mainloop, smem.mainloop, w, sb, acc_o, softmax, pipe, turns, tid, k);
        FK_FWD_STAMP(tid, k, 4);
        Epilogue::store(p.epilogue, smem.epilogue, smem.mainloop, w, sb, acc_o, softmax, tid);
        FK_FWD_STAMP(tid, k, 5);
      }
      turns.finish();
      Epilogue::finish(tid);
    }
  }
};

template <class Kernel>
__global__ void __launch_bounds__(Kernel::kThreads, 1)
    run_kernel_sm90(const __grid_constant__ typename Kernel::Params p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) char smem[];
  Kernel{}(p, smem);
#endif
}

}  // namespace flashkit::cuda::attn::sm90
