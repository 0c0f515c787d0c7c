// The Hopper backward kernel: one CTA per (K/V block, KV head, batch), warp-specialised like the
// forward (sm90/fwd_kernel.h). Warpgroup 0 is the producer (registers given up with setmaxnreg;
// one lane of its first warp issues every load; under a block mask the whole warp walks the
// blocks; its second warp zeroes the next group's dQ chunks, BwdMainloop::zero_ahead),
// warpgroups 1-2 the consumers (registers raised),
// which run the mainloop's GEMMs and the epilogue. The roles meet only at mbarriers.
#pragma once
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>

#include "cuda/attention/cta_trace.h"
#include "cuda/attention/params.h"
#include "cuda/attention/seqlen.h"
#include "cuda/attention/tile_scheduler.h"
#include "cuda/common/pdl.h"

namespace flashkit::cuda::attn::sm90 {

// kVarlen: cu_seqlens give the sequences (Mainloop::seq_bounds); dense otherwise, with the
// bounds folded from the kernel parameters.
template <class Mainloop, class Epilogue, class Scheduler, bool kVarlen>
struct BwdKernel {
  static constexpr int kThreads = 128 + Mainloop::kConsumerThreads;
  static_assert(Mainloop::kConsumerWarpgroups == 2);
  // 128 * 24 + 256 * 240 = 64512 of the 64K registers per SM.
  static constexpr uint32_t kProducerRegs = 24, kConsumerRegs = 240;
  using SharedStorage = typename Mainloop::SharedStorage;  // the epilogue reuses its buffers
  static constexpr int kSmemBytes = int(sizeof(SharedStorage));

  struct Params {
    typename Mainloop::Params mainloop;
    typename Epilogue::Params epilogue;
    typename Scheduler::Params scheduler;
  };

  __device__ void operator()(const Params& p, char* smem_raw) const {
    // The dQ conversion (or hdim 256's dQ pass) launched behind this kernel may take the SMs
    // that the last wave leaves idle (bwd_launch.h).
    pdl_launch_dependents();
    auto& smem = *reinterpret_cast<SharedStorage*>(smem_raw);
    if (threadIdx.x == 0) {
      Mainloop::init(smem);
      cutlass::arch::fence_barrier_init();
    }
    __syncthreads();
    const WorkTile w = Scheduler::initial_work(p.scheduler);
    FK_BWD_TRACE_ENTRY(0, w);
    const SeqBounds sb =
        kVarlen ? Mainloop::seq_bounds(p.mainloop, w)
                : SeqBounds(nullptr, nullptr, w.batch, p.mainloop.seqlen_q, p.mainloop.seqlen_k);
    if (kVarlen && !Mainloop::in_sequence(sb, w)) return;  // every role: past the sequence's keys
    typename Mainloop::Ring::State st;
    if (cutlass::canonical_warp_group_idx() == 0) {
      cutlass::arch::warpgroup_reg_dealloc<kProducerRegs>();
      if (cutlass::canonical_warp_idx_sync() == 1) Mainloop::zero_ahead(p.mainloop, smem, w);
      if constexpr (Mainloop::kWarpProducer) {  // the whole warp walks, one lane issues
        if (cutlass::canonical_warp_idx_sync() == 0) {
          const bool leader = cute::elect_one_sync();
          if (leader) Mainloop::prefetch_descriptors(p.mainloop);
          Mainloop::load(p.mainloop, smem, w, sb, st, leader);
        }
      } else if (cutlass::canonical_warp_idx_sync() == 0 && cute::elect_one_sync()) {
        Mainloop::prefetch_descriptors(p.mainloop);
        Mainloop::load(p.mainloop, smem, w, sb, st, true);
      }
    } else {
      cutlass::arch::warpgroup_reg_alloc<kConsumerRegs>();
      // hdim 64 / 128: the thread index made opaque to the compiler, which then derives the
      // per-thread offsets without knowing its range: +1-5% (-2-4% at hdim 64 causal 8k) on an
      // H100, a code-generation effect measured, not derived (bench/NOTES-attention.md v10).
      int tid = int(threadIdx.x) - 128;
      if constexpr (!Mainloop::kSplitD) asm volatile("" : "+r"(tid));
      if (tid == 0) Epilogue::prefetch_descriptors(p.epilogue);
      auto acc_dk = partition_fragment_C(typename Mainloop::TiledMmadKV{},
                                         Shape<Int<Mainloop::kBlockN>, Int<Mainloop::kHeadDim>>{});
      if constexpr (Mainloop::kSplitD) {  // one gradient a warpgroup: dV (0) or dK (1)
        Mainloop::mma_owner(p.mainloop, smem, w, sb, acc_dk, st, tid);
        Epilogue::store_owner(p.epilogue, smem, w, sb, acc_dk, tid);
        FK_BWD_TRACE_EXIT(0);
      } else {
        auto acc_dv = make_fragment_like(acc_dk);
        Mainloop::mma(p.mainloop, smem, w, sb, acc_dk, acc_dv, st, tid);
        Epilogue::store(p.epilogue, smem, w, sb, acc_dk, acc_dv, tid, [&](auto pending) {
          Mainloop::template signal_dq_ready<decltype(pending)::value>(p.mainloop, w, tid);
        });
        FK_BWD_TRACE_EXIT(0);
      }
    }
  }
};

}  // namespace flashkit::cuda::attn::sm90
