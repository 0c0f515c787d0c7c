// Forward epilogue for Hopper: O / l converted to the input dtype, written by the consumer
// warpgroups into a swizzled shared-memory tile and stored by one thread with TMA (which clips
// rows past seqlen and columns past the head dim), and the fp32 natural-log LSE of each row.
// The store of one tile overlaps the next tile's mainloop; its buffer is reused only after
// the bulk store has read it.
#pragma once
#include <cutlass/arch/barrier.h>

#include "cuda/attention/params.h"
#include "cuda/attention/sm90/fwd_mainloop.h"
#include "cuda/attention/tile_scheduler.h"

namespace flashkit::cuda::attn::sm90 {

template <class Mainloop>
struct FwdEpilogue {
  using Element = typename Mainloop::Element;
  static constexpr int kHeadDim = Mainloop::kHeadDim, kBlockM = Mainloop::kBlockM;
  static constexpr int kThreads = Mainloop::kConsumerThreads;
  static constexpr int kBarrier = 0;  // named barrier id among the consumer threads
  using LayoutO = SmemTile<Element, kBlockM, kHeadDim>;
  using TileO = typename Mainloop::TileQ;
  using TmaO = decltype(make_tma_copy(SM90_TMA_STORE{},
                                      gmem_tensor<Element>(nullptr, 0, 0, 0, 0, {}), LayoutO{},
                                      TileO{}, _1{}));

  struct SharedStorage {
    alignas(1024) Element o[cosize_v<LayoutO>];
  };
  struct Params {
    TmaO tma_o;
    float* lse;
    int64_t lse_batch_stride, lse_head_stride, lse_row_stride;
    int seqlen_q, head_dim, heads, batch;
  };
  static Params to_params(const AttnArguments& a) {
    auto o = gmem_tensor(static_cast<const Element*>(a.o), a.seqlen_q, a.head_dim, a.heads, a.batch,
                         a.o_stride);
    return {make_tma_copy(SM90_TMA_STORE{}, o, LayoutO{}, TileO{}, _1{}), a.lse,
            a.lse_batch_stride, a.lse_head_stride, a.lse_row_stride, a.seqlen_q, a.head_dim,
            a.heads, a.batch};
  }
  __device__ static void prefetch_descriptors(const Params& p) {
    prefetch_tma_descriptor(p.tma_o.get_tma_descriptor());
  }

  template <class AccO, class Softmax>
  __device__ static void store(const Params& p, SharedStorage& smem, const WorkTile& w,
                               AccO& acc_o, Softmax& softmax, int tid) {
    typename Mainloop::TiledMmaPV mma;
    auto thr = mma.get_thread_slice(tid);
    Tensor o = rowcol_view(acc_o);
    softmax.finish(o);

    const int rows = p.seqlen_q - w.block * kBlockM;
    Tensor cO = rowcol_view(thr.partition_C(make_identity_tensor(TileO{})));
    float* lse = p.lse + int64_t(w.batch) * p.lse_batch_stride + int64_t(w.head) * p.lse_head_stride +
                 int64_t(w.block) * kBlockM * p.lse_row_stride;
    if (get<1>(cO(0, 0)) == 0) {  // the quad's first thread writes its rows' LSE
      CUTE_UNROLL
      for (int r = 0; r < size<0>(o); ++r) {
        int row = get<0>(cO(r, 0));
        if (row < rows) lse[row * p.lse_row_stride] = softmax.lse(r);
      }
    }

    Tensor rO = sm80::convert<Element>(acc_o);
    Tensor sO = make_tensor(make_smem_ptr(smem.o), LayoutO{});
    if (tid == 0) tma_store_wait<0>();  // the previous tile's store has read sO
    cutlass::arch::NamedBarrier::sync(kThreads, kBarrier);
    copy(rO, thr.partition_C(sO));
    cutlass::arch::fence_view_async_shared();  // generic-proxy writes -> visible to the TMA engine
    cutlass::arch::NamedBarrier::sync(kThreads, kBarrier);
    if (tid == 0) {
      Tensor mO = p.tma_o.get_tma_tensor(GmemShape{p.seqlen_q, p.head_dim, p.heads, p.batch});
      Tensor gO = local_tile(mO(_, _, w.head, w.batch), TileO{}, make_coord(w.block, _0{}));
      auto c = p.tma_o.get_slice(_0{});
      copy(p.tma_o, c.partition_S(sO), c.partition_D(gO));
      tma_store_arrive();
    }
  }
  // Before the CTA exits: its last bulk store must have finished reading shared memory.
  __device__ static void finish(int tid) {
    if (tid == 0) tma_store_wait<0>();
  }
};

}  // namespace flashkit::cuda::attn::sm90
