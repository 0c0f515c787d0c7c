// The Hopper backward's dQ pass for hdim 256 (bench/NOTES-attention.md "dQ pass"): where the
// column-parallel kernel's per-block fp32 dQ adds (64 KB a 64-key block) are bound by the L2's
// reduction rate, dQ is computed row-parallel instead, with no adds at all: one CTA per
// (64-query block, head, batch) keeps Q, dO and the rows' LSE and D in shared memory, streams the
// K and V tiles of the key blocks its rows see through a TMA ring, recomputes S = Q K^T and
// dP = dO V^T (the two consumer warpgroups splitting the keys), P and dS = P (dP - D) with the
// score policy (the forward's (query, key) orientation), and accumulates dQ += dS K in registers
// (the warpgroups splitting the head dim, dS through shared memory). The epilogue writes
// dQ * scale once, so the pass is deterministic. The column kernel then skips its dQ GEMM.
#pragma once
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>

#include "cuda/attention/params.h"
#include "cuda/attention/score_policy.h"
#include "cuda/attention/seqlen.h"
#include "cuda/attention/sm80/bwd_pre_post.h"
#include "cuda/attention/sm80/tensor_ops.h"
#include "cuda/attention/sm90/bwd_mainloop.h"
#include "cuda/attention/sm90/fwd_mainloop.h"
#include "cuda/attention/sm90/pipeline.h"
#include "cuda/attention/sm90/traits.h"
#include "cuda/attention/tile_scheduler.h"

namespace flashkit::cuda::attn::sm90 {

template <class Element, int kHeadDim, int kStages, class Policy, bool kVarlen>
struct BwdDqKernel {
  static constexpr int kBlockM = 64, kBlockN = 64;  // queries of the CTA, keys of a step
  static constexpr int kConsumerThreads = 256, kThreads = 128 + kConsumerThreads;
  static constexpr uint32_t kProducerRegs = 24, kConsumerRegs = 240;

  // S, dP: (queries x keys) over hdim, the warpgroups on halves of the keys; dQ: (queries x hdim)
  // over keys, the warpgroups on halves of hdim, A = dS from shared memory (keys contiguous),
  // B = K read MN-major.
  using TiledMmaSdP = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<Int<kBlockM>, Int<kBlockN / 2>, Int<kHeadDim>>>(),
      Layout<Shape<_1, _2, _1>>{}));
  using TiledMmadQ = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<Int<kBlockM>, Int<kHeadDim / 2>, Int<kBlockN>>,
                           GMMA::Major::K, GMMA::Major::MN>(),
      Layout<Shape<_1, _2, _1>>{}));
  using TileQ = Shape<Int<kBlockM>, Int<kHeadDim>>;
  using TileKV = Shape<Int<kBlockN>, Int<kHeadDim>>;
  using LayoutQ = SmemTiles<Element, kBlockM, kHeadDim, 1>;    // Q, dO, then dQ: (M, D, 1)
  using LayoutKV = SmemTiles<Element, kBlockN, kHeadDim, kStages>;  // (N, D, stage)
  using LayoutKt = decltype(transposed_staged<LayoutKV, kBlockN, kHeadDim, kStages>(LayoutKV{}));
  using LayoutdS = SmemTiles<Element, kBlockM, kBlockN, 1>;  // dS: (M, N, 1), keys contiguous
  using Ring = TmaRing<kStages>;
  static constexpr uint32_t kBytesQ = kBlockM * kHeadDim * sizeof(Element);
  static constexpr uint32_t kBytesKV = kBlockN * kHeadDim * sizeof(Element);
  static constexpr uint32_t kBytesStats = kBlockM * sizeof(float);

  using SmemQ = SmemTile<Element, kBlockM, kHeadDim>;
  using SmemKV = SmemTile<Element, kBlockN, kHeadDim>;
  using TmaQ = decltype(make_tma_copy(SM90_TMA_LOAD{}, gmem_tensor<Element>(nullptr, 0, 0, 0, 0, {}),
                                      SmemQ{}, TileQ{}, _1{}));
  using TmaKV = decltype(make_tma_copy(SM90_TMA_LOAD{}, gmem_tensor<Element>(nullptr, 0, 0, 0, 0, {}),
                                       SmemKV{}, TileKV{}, _1{}));
  using TmaStore = decltype(make_tma_copy(
      SM90_TMA_STORE{}, gmem_tensor<Element>(nullptr, 0, 0, 0, 0, {}), SmemQ{}, TileQ{}, _1{}));

  struct SharedStorage {
    alignas(1024) Element q[cosize_v<LayoutQ>];  // dQ in the epilogue
    alignas(1024) Element d_o[cosize_v<LayoutQ>];
    alignas(1024) Element k[cosize_v<LayoutKV>];
    alignas(1024) Element v[cosize_v<LayoutKV>];
    alignas(1024) Element ds[2 * cosize_v<LayoutdS>];  // two buffers: no barrier guards a store
    alignas(16) float lse_log2[kBlockM];
    alignas(16) float dsum[kBlockM];
    typename Ring::Storage ring;
    alignas(8) uint64_t qo_full;
  };
  static constexpr int kSmemBytes = int(sizeof(SharedStorage));

  struct Params {
    TmaQ tma_q, tma_do;
    TmaKV tma_k, tma_v;
    TmaStore tma_dq;
    sm80::BwdScratch ws;
    const int *cu_seqlens_q, *cu_seqlens_k;
    int seqlen_q, seqlen_k, head_dim, heads, h_ratio, batch;
    int rows_q, rows_k, tma_batch;
    float scale, scale_log2;
    Element* dq;
    Strides dq_stride;
    typename Policy::Params score;
    SingleTileScheduler::Params scheduler;
  };
  static Params to_params(const AttnArguments& a, const sm80::BwdScratch& ws,
                          const SingleTileScheduler::Params& scheduler) {
    auto load = [&](const void* x, int heads, bool keys, const Strides& s, auto smem, auto tile) {
      return make_tma_copy(SM90_TMA_LOAD{},
                           gmem_tensor<Element>(x, a.head_dim, heads, gmem_extent(a, keys, s)),
                           smem, tile, _1{});
    };
    return {load(a.q, a.heads, false, a.q_stride, SmemQ{}, TileQ{}),
            load(a.dout, a.heads, false, a.do_stride, SmemQ{}, TileQ{}),
            load(a.k, a.kv_heads, true, a.k_stride, SmemKV{}, TileKV{}),
            load(a.v, a.kv_heads, true, a.v_stride, SmemKV{}, TileKV{}),
            make_tma_copy(SM90_TMA_STORE{},
                          gmem_tensor<Element>(a.dq, a.head_dim, a.heads,
                                               gmem_extent(a, false, a.dq_stride)),
                          SmemQ{}, TileQ{}, _1{}),
            ws,
            a.cu_seqlens_q,
            a.cu_seqlens_k,
            a.seqlen_q,
            a.seqlen_k,
            a.head_dim,
            a.heads,
            a.heads / a.kv_heads,
            a.batch,
            gmem_extent(a, false, a.q_stride).rows,
            gmem_extent(a, true, a.k_stride).rows,
            gmem_extent(a, false, a.q_stride).batch,
            a.softmax_scale,
            a.softmax_scale * float(M_LOG2E),
            static_cast<Element*>(a.dq),
            a.dq_stride,
            Policy::to_params(a),
            scheduler};
  }

  static constexpr uint32_t kBarrier = 1;  // the 256 consumer threads
  __device__ static void sync_consumers() {
    cutlass::arch::NamedBarrier::sync(kConsumerThreads, kBarrier);
  }

  // The key blocks of query block m, walked by both roles in the same order (first to last,
  // dropped tiles of a block mask skipped).
  struct KeyWalk {
    const Policy& pol;
    int m, begin, end;
    __device__ KeyWalk(const Policy& pol_, int m_) : pol(pol_), m(m_) {
      const BlockRange r = pol.template key_blocks<kBlockM, kBlockN>(m);
      begin = r.begin, end = r.end;
    }
    __device__ int next(int n) const {
      while (n < end && !pol.template live<kBlockM, kBlockN>(m, n)) ++n;
      return n;
    }
  };

  __device__ void operator()(const Params& p, char* smem_raw) const {
    auto& smem = *reinterpret_cast<SharedStorage*>(smem_raw);
    if (threadIdx.x == 0) {
      Ring::init(smem.ring, kConsumerThreads);
      Ring::Barrier::init(&smem.qo_full, 1);
      cutlass::arch::fence_barrier_init();
    }
    __syncthreads();
    const WorkTile w = SingleTileScheduler::initial_work(p.scheduler);
    const SeqBounds sb =
        kVarlen ? SeqBounds(p.cu_seqlens_q, p.cu_seqlens_k, w.batch, p.seqlen_q, p.seqlen_k)
                : SeqBounds(nullptr, nullptr, w.batch, p.seqlen_q, p.seqlen_k);
    if (kVarlen && w.block * kBlockM >= sb.seqlen_q) return;  // past this sequence's queries
    const Policy pol(p.score, sb, w.batch, w.head, p.scale);
    const KeyWalk walk(pol, w.block);
    typename Ring::State st;
    if (cutlass::canonical_warp_group_idx() == 0) {
      cutlass::arch::warpgroup_reg_dealloc<kProducerRegs>();
      if (cutlass::canonical_warp_idx_sync() == 0 && cute::elect_one_sync()) load(p, smem, w, sb, walk, st);
    } else {
      cutlass::arch::warpgroup_reg_alloc<kConsumerRegs>();
      const int tid = int(threadIdx.x) - 128;
      if (tid == 0) prefetch_tma_descriptor(p.tma_dq.get_tma_descriptor());
      auto acc_dq = partition_fragment_C(TiledMmadQ{}, TileQ{});
      mma(p, smem, w, pol, walk, acc_dq, st, tid);
      store(p, smem, w, sb, acc_dq, tid);
    }
  }

  // Producer (one thread): Q, dO, LSE and D of the block once, then K and V of each key block.
  __device__ static void load(const Params& p, SharedStorage& smem, const WorkTile& w,
                              const SeqBounds& sb, const KeyWalk& walk, typename Ring::State& st) {
    prefetch_tma_descriptor(p.tma_q.get_tma_descriptor());
    prefetch_tma_descriptor(p.tma_do.get_tma_descriptor());
    prefetch_tma_descriptor(p.tma_k.get_tma_descriptor());
    prefetch_tma_descriptor(p.tma_v.get_tma_descriptor());
    const int b = w.batch, h = w.head, kv_head = w.head / p.h_ratio;
    const int tb = sb.varlen ? 0 : b;
    const GmemShape shape_q{p.rows_q, p.head_dim, p.heads, p.tma_batch};
    const GmemShape shape_k{p.rows_k, p.head_dim, p.heads / p.h_ratio, p.tma_batch};
    auto seq_q = [&](auto t) { return domain_offset(make_coord(sb.q_start, _0{}), t); };
    auto seq_k = [&](auto t) { return domain_offset(make_coord(sb.k_start, _0{}), t); };
    Tensor gQ = local_tile(seq_q(p.tma_q.get_tma_tensor(shape_q)(_, _, h, tb)), TileQ{},
                           make_coord(w.block, _0{}));
    Tensor gdO = local_tile(seq_q(p.tma_do.get_tma_tensor(shape_q)(_, _, h, tb)), TileQ{},
                            make_coord(w.block, _0{}));
    auto cq = p.tma_q.get_slice(_0{});
    auto cdo = p.tma_do.get_slice(_0{});
    Ring::Barrier::arrive_and_expect_tx(&smem.qo_full, 2 * kBytesQ + 2 * kBytesStats);
    copy(p.tma_q.with(smem.qo_full), cq.partition_S(gQ),
         cq.partition_D(make_tensor(make_smem_ptr(smem.q), LayoutQ{})(_, _, 0)));
    copy(p.tma_do.with(smem.qo_full), cdo.partition_S(gdO),
         cdo.partition_D(make_tensor(make_smem_ptr(smem.d_o), LayoutQ{})(_, _, 0)));
    const int64_t at = sm80::row_chunk<kBlockM>(sb.q_token(b), b, w.block, h, p.heads);
    SM90_BULK_COPY_G2S::copy(p.ws.lse_log2 + at, &smem.qo_full, smem.lse_log2, kBytesStats);
    SM90_BULK_COPY_G2S::copy(p.ws.dsum + at, &smem.qo_full, smem.dsum, kBytesStats);

    auto ck = p.tma_k.get_slice(_0{});
    auto cv = p.tma_v.get_slice(_0{});
    Tensor tKs = ck.partition_D(make_tensor(make_smem_ptr(smem.k), LayoutKV{}));  // (TMA, .., stage)
    Tensor tVs = cv.partition_D(make_tensor(make_smem_ptr(smem.v), LayoutKV{}));
    Tensor tKg = ck.partition_S(local_tile(seq_k(p.tma_k.get_tma_tensor(shape_k)(_, _, kv_head, tb)),
                                           TileKV{}, make_coord(_, _0{})));  // (TMA, .., n)
    Tensor tVg = cv.partition_S(local_tile(seq_k(p.tma_v.get_tma_tensor(shape_k)(_, _, kv_head, tb)),
                                           TileKV{}, make_coord(_, _0{})));
    for (int n = walk.next(walk.begin); n < walk.end; n = walk.next(n + 1)) {
      uint64_t& full = Ring::producer_acquire(smem.ring, st, 2 * kBytesKV);
      copy(p.tma_k.with(full), tKg(_, _, _, n), tKs(_, _, _, st.stage));
      copy(p.tma_v.with(full), tVg(_, _, _, n), tVs(_, _, _, st.stage));
      st.advance();
    }
  }

  // Consumers (tid in [0, 256)): dQ (unscaled) of the block's rows in acc_dq. Each key block's
  // stage is released during the next one's S (its warpgroup_wait<1> completes the dQ GEMM that
  // read K), the last after the loop.
  template <class AccQ>
  __device__ static void mma(const Params& p, SharedStorage& smem, const WorkTile& w,
                             const Policy& pol, const KeyWalk& walk, AccQ& acc_dq,
                             typename Ring::State& st, int tid) {
    clear(acc_dq);
    TiledMmaSdP mma_sdp;
    TiledMmadQ mma_dq;
    auto thr_sdp = mma_sdp.get_thread_slice(tid);
    auto thr_dq = mma_dq.get_thread_slice(tid);
    Tensor sQ = make_tensor(make_smem_ptr(smem.q), LayoutQ{});
    Tensor sdO = make_tensor(make_smem_ptr(smem.d_o), LayoutQ{});
    Tensor sK = make_tensor(make_smem_ptr(smem.k), LayoutKV{});
    Tensor sV = make_tensor(make_smem_ptr(smem.v), LayoutKV{});
    Tensor sKt = make_tensor(make_smem_ptr(smem.k), LayoutKt{});  // (D, N, stage)
    Tensor tSrQ = thr_sdp.partition_fragment_A(sQ(_, _, 0));
    Tensor tdPrdO = thr_sdp.partition_fragment_A(sdO(_, _, 0));
    Tensor tSrK = thr_sdp.partition_fragment_B(sK);  // (MMA, N, K, stage)
    Tensor tdPrV = thr_sdp.partition_fragment_B(sV);
    Tensor tdQrKt = thr_dq.partition_fragment_B(sKt);  // (MMA, D, N, stage)
    Tensor tScS = rowcol_view(thr_sdp.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockN>>{})));
    using Coord = decltype(tScS);
    const QueryStat<Coord> lse{smem.lse_log2, tScS}, d_row{smem.dsum, tScS};
    const int m = w.block;
    int prev_stage = -1, buf = 0;
    Ring::Barrier::wait(&smem.qo_full, 0);
    for (int n = walk.next(walk.begin); n < walk.end; n = walk.next(n + 1)) {
      const int stage = st.stage;
      Ring::consumer_wait(smem.ring, st);
      Tensor acc_s = partition_fragment_C(mma_sdp, Shape<Int<kBlockM>, Int<kBlockN>>{});
      Tensor acc_dp = partition_fragment_C(mma_sdp, Shape<Int<kBlockM>, Int<kBlockN>>{});
      wgmma<true>(mma_sdp, tSrQ, tSrK(_, _, _, stage), acc_s);
      wgmma<true>(mma_sdp, tdPrdO, tdPrV(_, _, _, stage), acc_dp);
      Tensor s = rowcol_view(acc_s);
      Tensor dp = rowcol_view(acc_dp);
      const bool mask = pol.template bwd_needs_mask<kBlockM, kBlockN>(m, n);
      if constexpr (Policy::kSplitProbs) {  // P while dP's GEMM runs
        warpgroup_wait<1>();
        warpgroup_fence_operand(acc_s);
        if (prev_stage >= 0) Ring::consumer_release(smem.ring, prev_stage);
        const auto keep = pol.template bwd_p<false>(s, tScS, m * kBlockM, n * kBlockN, mask,
                                                    p.scale_log2, lse);
        warpgroup_wait<0>();
        warpgroup_fence_operand(acc_dp);
        pol.template bwd_ds<false>(s, dp, tScS, d_row, keep);
      } else {
        warpgroup_wait<0>();
        if (prev_stage >= 0) Ring::consumer_release(smem.ring, prev_stage);
        pol.template bwd_probs<false>(s, dp, tScS, m * kBlockM, n * kBlockN, mask, p.scale,
                                      p.scale_log2, lse, d_row);
      }
      // dS to shared memory (buffer buf, which both warpgroups' dQ GEMMs read two blocks ago:
      // each waited for its own before arriving at the previous block's barrier), then dQ += dS K.
      Element* ds = smem.ds + buf * cosize_v<LayoutdS>;
      copy(sm80::convert<Element>(acc_dp),
           thr_sdp.partition_C(make_tensor(make_smem_ptr(ds), LayoutdS{})(_, _, 0)));
      cutlass::arch::fence_view_async_shared();
      sync_consumers();
      Tensor tdQrdS = thr_dq.partition_fragment_A(make_tensor(make_smem_ptr(ds), LayoutdS{})(_, _, 0));
      wgmma<false>(mma_dq, tdQrdS, tdQrKt(_, _, _, stage), acc_dq);
      prev_stage = stage;
      buf ^= 1;
      st.advance();
    }
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc_dq);
    if (prev_stage >= 0) Ring::consumer_release(smem.ring, prev_stage);
  }

  // dQ * scale in the input dtype through Q's tile (every S GEMM, which read it, is done once
  // both warpgroups pass the barrier), stored by TMA (clips rows past seqlen_q and columns past
  // the head dim) or, varlen, by predicated 16-byte stores of the sequence's rows.
  template <class AccQ>
  __device__ static void store(const Params& p, SharedStorage& smem, const WorkTile& w,
                               const SeqBounds& sb, AccQ& acc_dq, int tid) {
    TiledMmadQ mma_dq;
    auto thr = mma_dq.get_thread_slice(tid);
    CUTE_UNROLL
    for (int i = 0; i < size(acc_dq); ++i) acc_dq(i) *= p.scale;
    Tensor sdQ = make_tensor(make_smem_ptr(smem.q), LayoutQ{});
    sync_consumers();
    copy(sm80::convert<Element>(acc_dq), thr.partition_C(sdQ(_, _, 0)));
    cutlass::arch::fence_view_async_shared();
    sync_consumers();
    if (sb.varlen) {
      Tensor g = make_tensor(make_gmem_ptr(p.dq + sb.q_offset(p.dq_stride, w.batch, w.head)),
                             make_shape(sb.seqlen_q, Int<kHeadDim>{}), make_stride(p.dq_stride.row, _1{}));
      store_tile_rows<Element, kConsumerThreads, kHeadDim, TileQ>(
          sdQ(_, _, 0), local_tile(g, TileQ{}, make_coord(w.block, _0{})),
          sb.seqlen_q - w.block * kBlockM, p.head_dim, tid);
      return;
    }
    if (tid == 0) {
      const GmemShape shape{p.seqlen_q, p.head_dim, p.heads, p.batch};
      Tensor g = local_tile(p.tma_dq.get_tma_tensor(shape)(_, _, w.head, w.batch), TileQ{},
                            make_coord(w.block, _0{}));
      auto c = p.tma_dq.get_slice(_0{});
      copy(p.tma_dq, c.partition_S(sdQ(_, _, 0)), c.partition_D(g));
      tma_store_arrive();
      tma_store_wait<0>();  // shared memory stays valid until the store has read it
    }
  }
};

}  // namespace flashkit::cuda::attn::sm90
