// Backward epilogue for Hopper: dK (times the softmax scale) and dV of the CTA's key block in
// the input dtype, written by the consumer warpgroups into shared memory (Mainloop::dk_stage /
// dv_stage: dS^T's and dQ's buffers, or K and V's own tiles for kSplitD; free once every GEMM of
// the mainloop has completed) and stored by one thread with TMA, which clips rows past seqlen_k
// and columns past the head dim. Varlen batches: TMA would clip only at the last token, so the
// consumers store the sequence's rows with predicated 16-byte stores.
#pragma once
#include <cutlass/arch/barrier.h>

#include "cuda/attention/params.h"
#include "cuda/attention/seqlen.h"
#include "cuda/attention/sm80/tensor_ops.h"
#include "cuda/attention/sm90/bwd_mainloop.h"
#include "cuda/attention/tile_scheduler.h"

namespace flashkit::cuda::attn::sm90 {

template <class Mainloop>
struct BwdEpilogue {
  using Element = typename Mainloop::Element;
  using TileKV = typename Mainloop::TileKV;
  using SmemKV = SmemTile<Element, Mainloop::kBlockN, Mainloop::kHeadDim>;
  using TmaKV = decltype(make_tma_copy(
      SM90_TMA_STORE{}, gmem_tensor<Element>(nullptr, 0, 0, 0, 0, {}), SmemKV{}, TileKV{}, _1{}));
  static constexpr int kThreads = Mainloop::kConsumerThreads, kHeadDim = Mainloop::kHeadDim;
  struct Params {
    TmaKV tma_dk, tma_dv;
    int seqlen_k, head_dim, kv_heads, batch;
    float scale;
    Element *dk, *dv;  // varlen stores
    Strides dk_stride, dv_stride;
  };
  static Params to_params(const AttnArguments& a) {
    auto tma = [&](void* x, const Strides& s) {
      return tma_copy_of<Element>(SM90_TMA_STORE{}, a, x, a.kv_heads, true, s, SmemKV{}, TileKV{});
    };
    return {tma(a.dk, a.dk_stride),
            tma(a.dv, a.dv_stride),
            a.seqlen_k,
            a.head_dim,
            a.kv_heads,
            a.batch,
            a.softmax_scale,
            static_cast<Element*>(a.dk),
            static_cast<Element*>(a.dv),
            a.dk_stride,
            a.dv_stride};
  }
  __device__ static void prefetch_descriptors(const Params& p) {
    prefetch_tma_descriptor(p.tma_dk.get_tma_descriptor());
    prefetch_tma_descriptor(p.tma_dv.get_tma_descriptor());
  }

  // signal(pending) (thread 0): called once the tile's stores are issued, `pending` of its bulk
  // groups (the TMA stores) still allowed in flight (Mainloop::signal_dq_ready).
  template <class Acc, class Signal>
  __device__ static void store(const Params& p, typename Mainloop::SharedStorage& smem,
                               const WorkTile& w, const SeqBounds& sb, Acc& acc_dk, Acc& acc_dv,
                               int tid, Signal&& signal) {
    typename Mainloop::TiledMmadKV mma;
    auto thr = mma.get_thread_slice(tid);
    CUTE_UNROLL
    for (int i = 0; i < size(acc_dk); ++i) acc_dk(i) *= p.scale;
    Tensor sdK = make_tensor(make_smem_ptr(Mainloop::dk_stage(smem)), typename Mainloop::LayoutKV{});
    Tensor sdV = make_tensor(make_smem_ptr(Mainloop::dv_stage(smem)), typename Mainloop::LayoutKV{});
    // Both warpgroups' GEMMs are done reading dS^T, and the last dQ reduce has read its block.
    // (stmatrix here, as store_owner has it, measured 0.5-3% slower at hdim 128: bench/NOTES-
    // attention.md, session 40.)
    Mainloop::sync_consumers();
    copy(sm80::convert<Element>(acc_dk), thr.partition_C(sdK(_, _, 0)));
    copy(sm80::convert<Element>(acc_dv), thr.partition_C(sdV(_, _, 0)));
    cutlass::arch::fence_view_async_shared();  // generic-proxy writes -> visible to the TMA engine
    Mainloop::sync_consumers();
    to_global(p, sdK(_, _, 0), sdV(_, _, 0), w, sb, tid, signal);
  }

  // kSplitD: warpgroup 0 holds dV, warpgroup 1 dK (one warpgroup's tiled MMA each).
  template <class Acc>
  __device__ static void store_owner(const Params& p, typename Mainloop::SharedStorage& smem,
                                     const WorkTile& w, const SeqBounds& sb, Acc& acc, int tid) {
    typename Mainloop::TiledMmadKV mma;
    const bool dk = tid >= kThreads / 2;
    if (dk) {
      CUTE_UNROLL
      for (int i = 0; i < size(acc); ++i) acc(i) *= p.scale;
    }
    Tensor sdK = make_tensor(make_smem_ptr(Mainloop::dk_stage(smem)), typename Mainloop::LayoutKV{});
    Tensor sdV = make_tensor(make_smem_ptr(Mainloop::dv_stage(smem)), typename Mainloop::LayoutKV{});
    Mainloop::sync_consumers();  // both warpgroups' GEMMs are done reading K and V
    FK_BWD_TRACE_MARK(0, kBwdTraceEpiSync);
    stsm_tile<Element>(mma, tid % (kThreads / 2), sm80::convert<Element>(acc),
                       (dk ? sdK : sdV)(_, _, 0));
    cutlass::arch::fence_view_async_shared();
    Mainloop::sync_consumers();
    FK_BWD_TRACE_MARK(0, kBwdTraceEpiStaged);
    to_global(p, sdK(_, _, 0), sdV(_, _, 0), w, sb, tid, [](auto) {});
  }

  // dK and dV from their shared-memory tiles to global memory (TMA; varlen: predicated stores).
  template <class Tile, class Signal>
  __device__ static void to_global(const Params& p, const Tile& sdK, const Tile& sdV,
                                   const WorkTile& w, const SeqBounds& sb, int tid,
                                   Signal&& signal) {
    if (sb.varlen) {
      const int rows = sb.seqlen_k - w.block * Mainloop::kBlockN;
      auto write = [&](Element* x, const Strides& s, auto&& sX) {
        Tensor m = make_tensor(make_gmem_ptr(x + sb.k_offset(s, w.batch, w.head)),
                               make_shape(sb.seqlen_k, Int<kHeadDim>{}), make_stride(s.row, _1{}));
        store_tile_rows<Element, kThreads, kHeadDim, TileKV>(
            sX, local_tile(m, TileKV{}, make_coord(w.block, _0{})), rows, p.head_dim, tid);
      };
      write(p.dk, p.dk_stride, sdK);
      write(p.dv, p.dv_stride, sdV);
      signal(cute::Int<0>{});
      return;
    }
    if (tid == 0) {
      const GmemShape shape{p.seqlen_k, p.head_dim, p.kv_heads, p.batch};
      auto write = [&](const TmaKV& tma, auto&& s) {
        Tensor g = local_tile(tma.get_tma_tensor(shape)(_, _, w.head, w.batch), TileKV{},
                              make_coord(w.block, _0{}));
        auto c = tma.get_slice(_0{});
        copy(tma, c.partition_S(s), c.partition_D(g));
      };
      write(p.tma_dk, sdK);
      write(p.tma_dv, sdV);
      FK_BWD_TRACE_MARK(0, kBwdTraceEpiIssued);
      tma_store_arrive();
      signal(cute::Int<1>{});
      tma_store_wait<0>();  // shared memory stays valid until the stores have read it
    }
  }
};

}  // namespace flashkit::cuda::attn::sm90
