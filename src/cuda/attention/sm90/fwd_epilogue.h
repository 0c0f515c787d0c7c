// Forward epilogue for Hopper: O / l converted to the input dtype, written by the consumer
// warpgroups into a swizzled shared-memory tile and stored by one thread with TMA (which clips
// rows past seqlen and columns past the head dim), and the fp32 natural-log LSE of each row.
// The store of one tile overlaps the next tile's mainloop; its buffer is reused only after
// the bulk store has read it. Varlen tiles end inside the token tensor, where TMA would not clip:
// the consumers store their sequence's rows from shared memory with 16-byte stores instead.
// With Mainloop::kOInQ (hdim 256) O is staged in Q's buffer, handed back to the producer once read.
#pragma once
#include <cstdlib>
#include <type_traits>

#include <cutlass/arch/barrier.h>

#include "cuda/attention/params.h"
#include "cuda/attention/seqlen.h"
#include "cuda/attention/sm90/fwd_mainloop.h"
#include "cuda/attention/tile_scheduler.h"

// Per-warpgroup epilogues: each consumer warpgroup stages and stores its own 64 rows, with its
// own named barrier and bulk stores, instead of all consumers meeting twice per tile, so the
// ping-pong runs on across tiles (one warpgroup's next tile starts under the other's epilogue).
// Measured +4% at hdim 64 causal 2k and 0-1.5% slower on dense hdim 64 (session 16, v8); 1.3-2.3%
// faster for block masks and windows at hdim 64 / 128, level for plain hdim 128 (session 21,
// bench/NOTES-attention.md "Block-sparse v5"), 0-4% faster for plain scores at 2k keys (session
// 24, "Epilogue per warpgroup for short keys"). FLASHKIT_SM90_FWD_WG_EPI=0/1 forces it off / on.
namespace flashkit::cuda::attn::sm90 {

// FLASHKIT_SM90_FWD_WG_EPI, read once per process: 0 / 1 force the per-warpgroup epilogue off /
// on, -1 (unset or anything else) keeps each kernel's default.
inline int wg_epi_env() {
  static const int v = [] {
    const char* e = std::getenv("FLASHKIT_SM90_FWD_WG_EPI");
    return e && (e[0] == '0' || e[0] == '1') && e[1] == '\0' ? e[0] - '0' : -1;
  }();
  return v;
}

template <class Mainloop>
struct FwdEpilogue {
  using Element = typename Mainloop::OutElement;  // O's type (bf16 for fp8 inputs)
  static constexpr int kHeadDim = Mainloop::kHeadDim, kBlockM = Mainloop::kBlockM;
  static constexpr int kThreads = Mainloop::kConsumerThreads;
  static constexpr int kBarrier = 0;  // named barrier id among the consumer threads
  using LayoutO = SmemTile<Element, kBlockM, kHeadDim>;
  using TileO = typename Mainloop::TileQ;
  // O leaves in 64 x 64 boxes at hdim 64 / 128 (a 64-row slice of the tile, one warpgroup's
  // rows, is kHeadDim / 64 of them, each a contiguous 8 KB piece of the staging tile, whose
  // swizzle atoms run down the rows first), so a warpgroup can store its own rows; hdim 256 (O in
  // Q's buffer) in one box of the whole tile.
  static constexpr bool kSlices = !Mainloop::kOInQ && (kHeadDim == 64 || kHeadDim == 128);
  static constexpr int kStoreRows = kSlices ? 64 : kBlockM;
  static constexpr int kStoreCols = kSlices ? 64 : kHeadDim;
  using LayoutStore = SmemTile<Element, kStoreRows, kStoreCols>;
  using TileStore = Shape<Int<kStoreRows>, Int<kStoreCols>>;
  using TmaO = decltype(make_tma_copy(SM90_TMA_STORE{},
                                      gmem_tensor<Element>(nullptr, 0, 0, 0, 0, {}), LayoutStore{},
                                      TileStore{}, _1{}));
  // The default (see above): per warpgroup for the score variants (windows and block masks
  // leave tiles of few key blocks; measured 1.3-2.3% faster, session 21) and at hdim 64 causal
  // with plain scores; with plain scores for short keys too (at most kShortKeys: tiles of few key
  // blocks again; on an H200 0-4% faster at 2k, hdim 128 dense and causal and hdim 64 dense,
  // level at 4k-16k, session 24); all consumers together otherwise.
  static constexpr bool kPerWgDefault =
      kSlices && (!Mainloop::Policy::kPlain || (kHeadDim == 64 && Mainloop::Policy::kCausal));
  static constexpr int kShortKeys = 2048;
  static bool default_per_wg(const AttnArguments& a) {
    return kPerWgDefault || (kSlices && a.seqlen_k <= kShortKeys);
  }

  struct OwnTile {
    alignas(1024) Element o[cosize_v<LayoutO>];
  };
  struct InQ {};
  using SharedStorage = std::conditional_t<Mainloop::kOInQ, InQ, OwnTile>;
  using MainloopStorage = typename Mainloop::SharedStorage;
  static_assert(!Mainloop::kOInQ || (cosize_v<LayoutO> == cosize_v<typename Mainloop::LayoutQ> &&
                                      std::is_same_v<Element, typename Mainloop::Element>));
  __device__ static Element* staging(SharedStorage& smem, MainloopStorage& ms) {
    if constexpr (Mainloop::kOInQ) return ms.q;
    else return smem.o;
  }
  struct Params {
    TmaO tma_o;
    Element* o;  // varlen stores
    Strides o_stride;
    bool varlen;
    float* lse;
    int64_t lse_batch_stride, lse_head_stride, lse_row_stride;
    int rows_q, head_dim, heads, tma_batch;
    bool per_wg;  // each warpgroup stages and stores its own rows (kSlices only)
  };
  static Params to_params(const AttnArguments& a) {
    const GmemExtent e = gmem_extent(a, false, a.o_stride);
    const bool per_wg = kSlices && (wg_epi_env() < 0 ? default_per_wg(a) : wg_epi_env() == 1);
    return {make_tma_copy(SM90_TMA_STORE{}, gmem_tensor<Element>(a.o, a.head_dim, a.heads, e),
                          LayoutStore{}, TileStore{}, _1{}),
            static_cast<Element*>(a.o), a.o_stride, a.cu_seqlens_q != nullptr, a.lse,
            a.lse_batch_stride, a.lse_head_stride, a.lse_row_stride, e.rows, a.head_dim, a.heads,
            e.batch, per_wg};
  }
  __device__ static void prefetch_descriptors(const Params& p) {
    prefetch_tma_descriptor(p.tma_o.get_tma_descriptor());
  }

  // Every consumer thread, after the mainloop's last wgmma (so, past the first barrier below,
  // no wgmma of the tile reads Q's buffer any more when kOInQ stages O there).
  template <class AccO, class Softmax>
  __device__ static void store(const Params& p, SharedStorage& smem, MainloopStorage& ms,
                               const WorkTile& w, const SeqBounds& sb, AccO& acc_o,
                               Softmax& softmax, int tid) {
    typename Mainloop::TiledMmaPV mma;
    auto thr = mma.get_thread_slice(tid);
    Tensor o = rowcol_view(acc_o);
    softmax.finish(o);

    const int rows = sb.seqlen_q - w.block * kBlockM;
    Tensor cO = rowcol_view(thr.partition_C(make_identity_tensor(TileO{})));
    float* lse = p.lse + int64_t(w.batch) * p.lse_batch_stride + int64_t(w.head) * p.lse_head_stride +
                 (int64_t(sb.q_start) + int64_t(w.block) * kBlockM) * p.lse_row_stride;
    if (get<1>(cO(0, 0)) == 0) {  // the quad's first thread writes its rows' LSE
      CUTE_UNROLL
      for (int r = 0; r < size<0>(o); ++r) {
        int row = get<0>(cO(r, 0));
        if (row < rows) lse[row * p.lse_row_stride] = softmax.lse(r);
      }
    }

    Tensor rO = sm80::convert<Element>(acc_o);
    Tensor sO = make_tensor(make_smem_ptr(staging(smem, ms)), LayoutO{});
    // The threads that stage and store together: every consumer thread, or (per_wg, dense) each
    // warpgroup its own 64 rows, with its own named barrier and bulk stores; `part` is the
    // group's 64-row slice of the tile.
    const bool own = kSlices && p.per_wg && !p.varlen;
    const int group = own ? 128 : kThreads, part = own ? tid / 128 : 0;
    const int barrier = own ? kBarrier + 1 + Mainloop::kConsumerWarpgroups + part : kBarrier;
    const bool leader = own ? tid % 128 == 0 : tid == 0;
    if (leader) tma_store_wait<0>();  // the group's previous store has read its part of sO
    cutlass::arch::NamedBarrier::sync(group, barrier);
    stsm_tile<Element>(mma, tid, rO, sO);      // stmatrix, FA3's epilogue (sm90/traits.h)
    cutlass::arch::fence_view_async_shared();  // generic-proxy writes -> visible to the TMA engine
    cutlass::arch::NamedBarrier::sync(group, barrier);
    if (p.varlen) {  // the next tile's first barrier above orders these reads before its writes
      Tensor mO = make_tensor(make_gmem_ptr(p.o + sb.q_offset(p.o_stride, w.batch, w.head)),
                              make_shape(sb.seqlen_q, Int<kHeadDim>{}),
                              make_stride(p.o_stride.row, _1{}));
      store_tile_rows<Element, kThreads, kHeadDim, TileO>(
          sO, local_tile(mO, TileO{}, make_coord(w.block, _0{})), rows, p.head_dim, tid);
      if constexpr (Mainloop::kOInQ) Mainloop::release_q(ms);  // this thread's reads are done
      return;
    }
    if (leader) {
      Tensor mO = p.tma_o.get_tma_tensor(GmemShape{p.rows_q, p.head_dim, p.heads, p.tma_batch});
      auto c = p.tma_o.get_slice(_0{});
      constexpr int kRowSlices = kBlockM / kStoreRows, kColSlices = kHeadDim / kStoreCols;
      for (int r = own ? part : 0; r < (own ? part + 1 : kRowSlices); ++r) {
        CUTE_UNROLL
        for (int k = 0; k < kColSlices; ++k) {
          Element* piece = staging(smem, ms) + (k * kBlockM + r * kStoreRows) * kStoreCols;
          Tensor gO = local_tile(mO(_, _, w.head, w.batch), TileStore{},
                                 make_coord(w.block * kRowSlices + r, k));
          copy(p.tma_o, c.partition_S(make_tensor(make_smem_ptr(piece), LayoutStore{})),
               c.partition_D(gO));
        }
      }
      tma_store_arrive();
    }
    // kOInQ: the next tile's Q may land in the buffer once the bulk store has read all of O (the
    // others have written their part and fenced it before the barrier above).
    if constexpr (Mainloop::kOInQ) {
      if (leader) tma_store_wait<0>();
      Mainloop::release_q(ms);
    }
  }
  // Before the CTA exits: its last bulk store must have finished reading shared memory.
  __device__ static void finish(int tid) {
    if (tid % 128 == 0) tma_store_wait<0>();  // every group's leader (per_wg or not)
  }
};

}  // namespace flashkit::cuda::attn::sm90
