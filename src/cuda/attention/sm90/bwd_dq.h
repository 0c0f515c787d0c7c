// The Hopper backward's dQ pass for hdim 256 (bench/NOTES-attention.md "dQ pass"): where the
// column-parallel kernel's per-block fp32 dQ adds (64 KB a 64-key block) are bound by the L2's
// reduction rate, dQ is computed row-parallel instead, with no adds at all: one CTA per
// (64-query block, head, batch) streams the K and V tiles of the key blocks its rows see through
// a three-stage TMA ring and accumulates dQ += dS K in registers; the epilogue writes dQ * scale
// once, so the pass is deterministic. The column kernel then skips its dQ GEMM.
// The two consumer warpgroups take different roles (v2 of the pass): warpgroup 0 holds Q in
// registers and computes S = Q K^T and P = exp(S - LSE) (masked), handing P to warpgroup 1 through
// shared memory (fp32, fragment order); warpgroup 1 holds dO in registers, computes dP = dO V^T and
// dS = P (dP - D) and writes dS (bf16) for the dQ GEMM, which both run on halves of the head dim.
// Operands in registers leave only K, V and dS to be read from shared memory (112 KB a key
// block instead of v1's 240 KB, where both warpgroups read Q, dO and split S, dP along the keys),
// and Q / dO need no shared memory past the start: they arrive in the ring's first stage, which
// then serves K and V, so the ring has three stages. Warpgroup 0 issues the next block's S before
// this block's dQ, so one warpgroup's element-wise work overlaps the other's matrix products.
#pragma once
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>

#include "cuda/attention/cta_trace.h"
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
#include "cuda/common/pdl.h"

namespace flashkit::cuda::attn::sm90 {

template <class Element, int kHeadDim, int kStages, class Policy, bool kVarlen>
struct BwdDqKernel {
  // Warpgroup 0 hands warpgroup 1 one float a score: P (masks, window, ALiBi), or for softcap
  // alone P (1 - t^2), the part of dS = P (dP - D) (1 - t^2) that does not depend on dP.
  static_assert(Policy::kSlimScores,
                "the pass hands one float a score, not the policy's per-element state, to dS");
  static_assert(kStages >= 2, "the ring's first stage carries Q and dO");
  static constexpr int kBlockM = 64, kBlockN = 64;  // queries of the CTA, keys of a step
  static constexpr int kConsumerThreads = 256, kThreads = 128 + kConsumerThreads;
  static constexpr uint32_t kProducerRegs = 24, kConsumerRegs = 240;

  // S, dP: (queries x keys) over hdim, one warpgroup each, A (Q, dO) from registers; dQ: (queries
  // x hdim) over keys, the warpgroups on halves of hdim, A = dS from shared memory (keys
  // contiguous), B = K read MN-major.
  using TiledMmaSdP = decltype(make_tiled_mma(
      GMMA::rs_op_selector<Element, Element, float, Shape<Int<kBlockM>, Int<kBlockN>, Int<kHeadDim>>>()));
  using TiledMmadQ = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<Int<kBlockM>, Int<kHeadDim / 2>, Int<kBlockN>>,
                           GMMA::Major::K, GMMA::Major::MN>(),
      Layout<Shape<_1, _2, _1>>{}));
  using TileQ = Shape<Int<kBlockM>, Int<kHeadDim>>;
  using TileKV = Shape<Int<kBlockN>, Int<kHeadDim>>;
  // K and V: (N, D, stage); stage 0 first holds Q (in K's place) and dO (in V's), the epilogue
  // stages dQ in K's stage 0. kBlockM == kBlockN, so a stage is also a Q tile.
  using LayoutKV = SmemTiles<Element, kBlockN, kHeadDim, kStages>;
  using LayoutKt = decltype(transposed_staged<LayoutKV, kBlockN, kHeadDim, kStages>(LayoutKV{}));
  using LayoutdS = SmemTiles<Element, kBlockM, kBlockN, 1>;  // dS: (M, N, 1), keys contiguous
  using Ring = TmaRing<kStages>;
  static constexpr uint32_t kBytesQ = kBlockM * kHeadDim * sizeof(Element);
  static constexpr uint32_t kBytesKV = kBlockN * kHeadDim * sizeof(Element);
  static constexpr uint32_t kBytesStats = kBlockM * sizeof(float);
  static constexpr int kAccS = kBlockM * kBlockN / 128;  // S / dP accumulator floats a thread

  using SmemQ = SmemTile<Element, kBlockM, kHeadDim>;
  using SmemKV = SmemTile<Element, kBlockN, kHeadDim>;
  using TmaQ = decltype(make_tma_copy(SM90_TMA_LOAD{}, gmem_tensor<Element>(nullptr, 0, 0, 0, 0, {}),
                                      SmemQ{}, TileQ{}, _1{}));
  using TmaKV = decltype(make_tma_copy(SM90_TMA_LOAD{}, gmem_tensor<Element>(nullptr, 0, 0, 0, 0, {}),
                                       SmemKV{}, TileKV{}, _1{}));
  using TmaStore = decltype(make_tma_copy(
      SM90_TMA_STORE{}, gmem_tensor<Element>(nullptr, 0, 0, 0, 0, {}), SmemQ{}, TileQ{}, _1{}));

  struct SharedStorage {
    alignas(1024) Element k[cosize_v<LayoutKV>];
    alignas(1024) Element v[cosize_v<LayoutKV>];
    alignas(1024) Element ds[2 * cosize_v<LayoutdS>];  // two buffers: no barrier guards a store
    alignas(16) float p[kBlockM * kBlockN];              // P, [float4 j][thread] of warpgroup 0
    alignas(16) float lse_log2[kBlockM];
    alignas(16) float dsum[kBlockM];
    typename Ring::Storage ring;
    alignas(8) uint64_t p_full;  // P of a block written: warpgroup 0's 128 threads arrive
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
      return tma_copy_of<Element>(SM90_TMA_LOAD{}, a, x, heads, keys, s, smem, tile);
    };
    return {load(a.q, a.heads, false, a.q_stride, SmemQ{}, TileQ{}),
            load(a.dout, a.heads, false, a.do_stride, SmemQ{}, TileQ{}),
            load(a.k, a.kv_heads, true, a.k_stride, SmemKV{}, TileKV{}),
            load(a.v, a.kv_heads, true, a.v_stride, SmemKV{}, TileKV{}),
            tma_copy_of<Element>(SM90_TMA_STORE{}, a, a.dq, a.heads, false, a.dq_stride, SmemQ{},
                                 TileQ{}),
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

  // Named barriers (CUTLASS adds its reserved count) of all 256 consumer threads: any, and dS of
  // a block written (both warpgroups wait). P's hand-over is an mbarrier (p_full): its arrival
  // releases the 128 writers' stores, which a named barrier's arrive does not promise.
  static constexpr uint32_t kBarrier = 1, kBarrierdS = 3;
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
    // Launched programmatically behind the main kernel (bwd_launch.h), whose results it does not
    // read: it starts on the SMs the main kernel's last wave leaves idle, and its last CTA waits
    // for the main kernel's completion, so that work after this pass follows that kernel too.
    if (blockIdx.x == gridDim.x - 1) pdl_wait();
    auto& smem = *reinterpret_cast<SharedStorage*>(smem_raw);
    if (threadIdx.x == 0) {
      Ring::init(smem.ring, kConsumerThreads);
      Ring::Barrier::init(&smem.p_full, 128);
      cutlass::arch::fence_barrier_init();
    }
    __syncthreads();
    const WorkTile w = SingleTileScheduler::initial_work(p.scheduler);
    FK_BWD_TRACE_ENTRY(1, w);
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
      clear(acc_dq);
      // The role by warpgroup index (warp-uniform to the compiler, unlike tid < 128: wgmmas in a
      // branch it deems divergent get serialised).
      if (cutlass::canonical_warp_group_idx() == 1) mma_s(p, smem, w, pol, walk, acc_dq, st, tid);
      else mma_dp(p, smem, walk, acc_dq, st, tid);
      FK_BWD_TRACE_MARK(1, kBwdTraceLoopEnd);
      store(p, smem, w, sb, acc_dq, tid);
      FK_BWD_TRACE_EXIT(1);
    }
  }

  // Producer (one thread): Q, dO, LSE and D of the block into the ring's first stage, then K and V
  // of each key block.
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
    uint64_t& qo_full = Ring::producer_acquire(smem.ring, st, 2 * kBytesQ + 2 * kBytesStats);
    copy(p.tma_q.with(qo_full), cq.partition_S(gQ),
         cq.partition_D(make_tensor(make_smem_ptr(smem.k), LayoutKV{})(_, _, st.stage)));
    copy(p.tma_do.with(qo_full), cdo.partition_S(gdO),
         cdo.partition_D(make_tensor(make_smem_ptr(smem.v), LayoutKV{})(_, _, st.stage)));
    const int64_t at = sm80::row_chunk<kBlockM>(sb.q_token(b), b, w.block, h, p.heads);
    SM90_BULK_COPY_G2S::copy(p.ws.lse_log2 + at, &qo_full, smem.lse_log2, kBytesStats);
    SM90_BULK_COPY_G2S::copy(p.ws.dsum + at, &qo_full, smem.dsum, kBytesStats);
    st.advance();

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

  // Q (warpgroup 0) or dO (warpgroup 1) from the ring's first stage into the S / dP GEMM's A
  // registers, once; the stage then goes back to the ring.
  template <class Frag>
  __device__ static void operand_to_registers(SharedStorage& smem, Element* stage_tiles,
                                              Frag& frag, typename Ring::State& st, int t) {
    TiledMmaSdP mma;
    Ring::consumer_wait(smem.ring, st);
    FK_BWD_TRACE_MARK(1, kBwdTraceFirstData);
    Tensor s = make_tensor(make_smem_ptr(stage_tiles), LayoutKV{})(_, _, st.stage);
    copy(mma.get_thread_slice(t).partition_A(s), frag);
    Ring::consumer_release(smem.ring, st);
    st.advance();
    warpgroup_fence_operand(frag);
  }

  // The dQ GEMM of one key block: dQ[:, half] += dS K[:, half] (this thread's warpgroup's half).
  template <class AccQ>
  __device__ static void dq_gemm(SharedStorage& smem, int buf, int stage, AccQ& acc_dq, int tid) {
    TiledMmadQ mma_dq;
    auto thr_dq = mma_dq.get_thread_slice(tid);
    Tensor sKt = make_tensor(make_smem_ptr(smem.k), LayoutKt{});  // (D, N, stage)
    Tensor tdQrdS = thr_dq.partition_fragment_A(
        make_tensor(make_smem_ptr(smem.ds + buf * cosize_v<LayoutdS>), LayoutdS{})(_, _, 0));
    wgmma<false>(mma_dq, tdQrdS, thr_dq.partition_fragment_B(sKt)(_, _, _, stage), acc_dq);
  }

  // Warpgroup 0 (t = tid in [0, 128)): per key block n, S(n) = Q K^T, then (once warpgroup 1's
  // dS of the previous block is written) that block's dQ GEMM, P(n) while it runs, P(n) handed
  // over; the previous block's stage released once its dQ GEMM is done. The first block is
  // peeled off so that every path waits for every wgmma unconditionally (a wait under a run-time
  // condition makes ptxas serialise all of them).
  template <class AccQ>
  __device__ static void mma_s(const Params& p, SharedStorage& smem, const WorkTile& w,
                               const Policy& pol, const KeyWalk& walk, AccQ& acc_dq,
                               typename Ring::State& st, int t) {
    TiledMmaSdP mma;
    auto thr = mma.get_thread_slice(t);
    Tensor sK = make_tensor(make_smem_ptr(smem.k), LayoutKV{});
    Tensor tSrK = thr.partition_fragment_B(sK);  // (MMA, N, K, stage)
    Tensor tSrQ = thr.partition_fragment_A(sK(_, _, 0));
    operand_to_registers(smem, smem.k, tSrQ, st, t);
    Tensor tScS = rowcol_view(thr.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockN>>{})));
    using Coord = decltype(tScS);
    const QueryStat<Coord> lse{smem.lse_log2, tScS};
    float4* p_out = reinterpret_cast<float4*>(smem.p) + t;
    const int m = w.block;
    // S(n) issued into acc_s (the caller waits for it).
    auto s_gemm = [&](auto& acc_s, int stage) {
      warpgroup_fence_operand(tSrQ);
      wgmma<true>(mma, tSrQ, tSrK(_, _, _, stage), acc_s);
      warpgroup_fence_operand(tSrQ);
    };
    // P(n) from the finished S(n), written for warpgroup 1 (whose read of P(n-1) came before its
    // arrival at dS(n-1)'s barrier, which this warpgroup has passed) and announced.
    auto hand_over_p = [&](auto& acc_s, int n) {
      warpgroup_fence_operand(acc_s);
      Tensor s = rowcol_view(acc_s);
      by_mask<Policy>(pol.template bwd_needs_mask<kBlockM, kBlockN>(m, n), [&](auto masked) {
        if constexpr (!Policy::kBoundedLogits)
          pol.template bwd_p<false>(s, tScS, m * kBlockM, n * kBlockN, masked, p.scale_log2, lse);
        else
          pol.bwd_p_with(s, tScS, m * kBlockM, n * kBlockN, masked, p.scale_log2, lse,
                         [&](int r, int c, float t) { s(r, c) *= 1.f - t * t; });
      });
      CUTE_UNROLL
      for (int j = 0; j < kAccS / 4; ++j)
        p_out[j * 128] = make_float4(acc_s(4 * j), acc_s(4 * j + 1), acc_s(4 * j + 2), acc_s(4 * j + 3));
      Ring::Barrier::arrive(&smem.p_full);
    };
    int n = walk.next(walk.begin);
    if (n >= walk.end) return;
    int prev_stage = st.stage, buf = 0;
    {
      Ring::consumer_wait(smem.ring, st);
      Tensor acc_s = partition_fragment_C(mma, Shape<Int<kBlockM>, Int<kBlockN>>{});
      s_gemm(acc_s, prev_stage);
      warpgroup_wait<0>();
      hand_over_p(acc_s, n);
      st.advance();
    }
    for (n = walk.next(n + 1); n < walk.end; n = walk.next(n + 1)) {
      const int stage = st.stage;
      Ring::consumer_wait(smem.ring, st);
      Tensor acc_s = partition_fragment_C(mma, Shape<Int<kBlockM>, Int<kBlockN>>{});
      s_gemm(acc_s, stage);
      cutlass::arch::NamedBarrier::sync(kConsumerThreads, kBarrierdS);  // dS(n-1) written
      dq_gemm(smem, buf, prev_stage, acc_dq, t);
      warpgroup_wait<1>();  // S(n)
      hand_over_p(acc_s, n);
      warpgroup_wait<0>();  // dQ(n-1)
      warpgroup_fence_operand(acc_dq);
      Ring::consumer_release(smem.ring, prev_stage);
      prev_stage = stage;
      buf ^= 1;
      st.advance();
    }
    cutlass::arch::NamedBarrier::sync(kConsumerThreads, kBarrierdS);
    dq_gemm(smem, buf, prev_stage, acc_dq, t);
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc_dq);
    Ring::consumer_release(smem.ring, prev_stage);
  }

  // Warpgroup 1 (tid in [128, 256)): per key block n, dP(n) = dO V^T (the previous block's dQ
  // GEMM ahead of it), then dS(n) = P(n) (dP(n) - D) once P(n) is handed over, dS to shared
  // memory (buffers alternate per step of the walk: both warpgroups' dQ GEMMs two steps back, its
  // last readers, are done — warpgroup 0 waits for its own before handing over P(n)), then its
  // half of block n's dQ.
  template <class AccQ>
  __device__ static void mma_dp(const Params& p, SharedStorage& smem, const KeyWalk& walk,
                                AccQ& acc_dq, typename Ring::State& st, int tid) {
    const int t = tid - 128;
    TiledMmaSdP mma;
    auto thr = mma.get_thread_slice(t);
    Tensor sV = make_tensor(make_smem_ptr(smem.v), LayoutKV{});
    Tensor tdPrV = thr.partition_fragment_B(sV);  // (MMA, N, K, stage)
    Tensor tdPrdO = thr.partition_fragment_A(sV(_, _, 0));
    operand_to_registers(smem, smem.v, tdPrdO, st, t);
    Tensor tScS = rowcol_view(thr.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockN>>{})));
    using Coord = decltype(tScS);
    const QueryStat<Coord> d_row{smem.dsum, tScS};
    const float4* p_in = reinterpret_cast<const float4*>(smem.p) + t;
    int prev_stage = -1, buf = 0;
    uint32_t p_phase = 0;
    for (int n = walk.next(walk.begin); n < walk.end; n = walk.next(n + 1)) {
      const int stage = st.stage;
      Ring::consumer_wait(smem.ring, st);
      Tensor acc_dp = partition_fragment_C(mma, Shape<Int<kBlockM>, Int<kBlockN>>{});
      warpgroup_fence_operand(tdPrdO);
      wgmma<true>(mma, tdPrdO, tdPrV(_, _, _, stage), acc_dp);
      warpgroup_fence_operand(tdPrdO);
      warpgroup_wait<0>();  // dP(n) and the previous block's dQ
      warpgroup_fence_operand(acc_dp);
      warpgroup_fence_operand(acc_dq);
      if (prev_stage >= 0) Ring::consumer_release(smem.ring, prev_stage);
      Tensor acc_p = make_fragment_like(acc_dp);
      Ring::Barrier::wait(&smem.p_full, p_phase);
      p_phase ^= 1;
      CUTE_UNROLL
      for (int j = 0; j < kAccS / 4; ++j) {
        const float4 v = p_in[j * 128];
        acc_p(4 * j) = v.x, acc_p(4 * j + 1) = v.y, acc_p(4 * j + 2) = v.z, acc_p(4 * j + 3) = v.w;
      }
      Tensor dp = rowcol_view(acc_dp);
      PlainScores<false>::bwd_ds(rowcol_view(acc_p), dp, d_row);  // dS = P' (dP - D)
      Element* ds = smem.ds + buf * cosize_v<LayoutdS>;
      copy(sm80::convert<Element>(acc_dp),
           thr.partition_C(make_tensor(make_smem_ptr(ds), LayoutdS{})(_, _, 0)));
      cutlass::arch::fence_view_async_shared();
      cutlass::arch::NamedBarrier::sync(kConsumerThreads, kBarrierdS);
      dq_gemm(smem, buf, stage, acc_dq, tid);
      prev_stage = stage;
      buf ^= 1;
      st.advance();
    }
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc_dq);
    if (prev_stage >= 0) Ring::consumer_release(smem.ring, prev_stage);
  }

  // dQ * scale in the input dtype through K's first stage (every GEMM, and every TMA load, is
  // done once both warpgroups pass the barrier), stored by TMA (clips rows past seqlen_q and
  // columns past the head dim) or, varlen, by predicated 16-byte stores of the sequence's rows.
  template <class AccQ>
  __device__ static void store(const Params& p, SharedStorage& smem, const WorkTile& w,
                               const SeqBounds& sb, AccQ& acc_dq, int tid) {
    TiledMmadQ mma_dq;
    CUTE_UNROLL
    for (int i = 0; i < size(acc_dq); ++i) acc_dq(i) *= p.scale;
    Tensor sdQ = make_tensor(make_smem_ptr(smem.k), LayoutKV{})(_, _, 0);
    sync_consumers();
    stsm_tile<Element>(mma_dq, tid, sm80::convert<Element>(acc_dq), sdQ);
    cutlass::arch::fence_view_async_shared();
    sync_consumers();
    if (sb.varlen) {
      Tensor g = make_tensor(make_gmem_ptr(p.dq + sb.q_offset(p.dq_stride, w.batch, w.head)),
                             make_shape(sb.seqlen_q, Int<kHeadDim>{}), make_stride(p.dq_stride.row, _1{}));
      store_tile_rows<Element, kConsumerThreads, kHeadDim, TileQ>(
          sdQ, local_tile(g, TileQ{}, make_coord(w.block, _0{})), sb.seqlen_q - w.block * kBlockM,
          p.head_dim, tid);
      return;
    }
    if (tid == 0) {
      const GmemShape shape{p.seqlen_q, p.head_dim, p.heads, p.batch};
      Tensor g = local_tile(p.tma_dq.get_tma_tensor(shape)(_, _, w.head, w.batch), TileQ{},
                            make_coord(w.block, _0{}));
      auto c = p.tma_dq.get_slice(_0{});
      copy(p.tma_dq, c.partition_S(sdQ), c.partition_D(g));
      tma_store_arrive();
      tma_store_wait<0>();  // shared memory stays valid until the store has read it
    }
  }
};

}  // namespace flashkit::cuda::attn::sm90
