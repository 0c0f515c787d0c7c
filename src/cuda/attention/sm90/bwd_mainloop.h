// FlashAttention backward mainloop for Hopper (FA2 Algorithm 2 on wgmma, FA3's backward shape):
// one CTA per K/V block of 128 keys (64 at hdim 256, see kSplitD). The producer warp loads K and V once by TMA, then streams
// Q, dO (TMA) and the rows' LSE and D (bulk copies of the preprocess's row_chunk blocks) of every
// query block, of every query head sharing the KV head, through a ring of mbarrier stages. Two
// consumer warpgroups own 64 keys each and compute the products transposed, keys along M:
// S^T = K Q^T and dP^T = V dO^T from shared memory, P^T and dS^T in registers, which are then
// directly the A operands of dV += P^T dO and dK += dS^T Q; dS^T also goes to shared memory for
// dQ = dS K (both warpgroups' keys form its reduction), which is added in fp32 to the scratch
// accumulator by one bulk reduce per query block (deterministic runs: atomics in key-block turns).
// kSplitD (hdim 256, where 64 keys x 256 columns of dK and dV fill a warpgroup's registers): the
// block's 64 keys are shared, each warpgroup computing S^T and dP^T for half the queries and dK,
// dV and dQ for half the head dim; P^T and dS^T then both pass through shared memory (each
// warpgroup's dV and dK read all queries) and every GEMM reads its operands from there. 224 KB
// of operands leave no room for a staged dQ block, so a block's fp32 dQ (64 KB) is staged in its
// own dO and Q stage (64 KB of bf16) as its dV and dK GEMMs finish reading them, and added by bulk
// reduces; the stage goes back to the producer when they have read it.
// (16-byte atomics instead halved the speed: bench/NOTES-attention.md.)
// Dense or varlen batches (seq_bounds).
// Every score policy (score_policy.h): the general ones recompute P^T and dS^T with the forward's
// modifiers, masks and dropout bits through bwd_probs on the transposed tile, and both roles skip
// the (query block, key block) tiles a block mask drops.
#pragma once
#include <cmath>

#include "cuda/attention/params.h"
#include "cuda/attention/score_policy.h"
#include "cuda/attention/seqlen.h"
#include "cuda/attention/sm80/bwd_pre_post.h"
#include "cuda/attention/sm80/tensor_ops.h"
#include "cuda/attention/sm90/fwd_mainloop.h"
#include "cuda/attention/sm90/pipeline.h"
#include "cuda/attention/sm90/traits.h"
#include "cuda/attention/tile_scheduler.h"
#include "cuda/common/bulk_reduce.h"

// hdim 256: dQ from the row-parallel pass (sm90/bwd_dq.h) instead of fp32 adds per key block
// (1), or the adds (0: bench/NOTES-attention.md "dQ pass" compares them).
#ifndef FLASHKIT_SM90_BWD_DQ_PASS
#define FLASHKIT_SM90_BWD_DQ_PASS 1
#endif
// hdim 256 with the dQ pass: warpgroup roles in the column kernel (1; mma_roles), or S^T and
// dP^T split along the queries (0: the A/B's baseline).
#ifndef FLASHKIT_SM90_BWD_ROLES
#define FLASHKIT_SM90_BWD_ROLES 1
#endif

namespace flashkit::cuda::attn::sm90 {

// Row statistics (LSE, D) of the query rows of a transposed (keys x queries) score tile, read from
// the stage's shared-memory copy: stat[r] is the r-th query row of the thread's fragment.
template <class Coord>
struct QueryStat {
  const float* smem;
  Coord coord;  // the fragment's (query, key) coordinates in (query, key) order
  __device__ __forceinline__ float operator[](int r) const { return smem[get<0>(coord(r, 0))]; }
};

// (keys, queries) accumulator views swapped to (queries, keys), the plain policies' row order.
template <class Layout_>
CUTE_HOST_DEVICE constexpr auto colrow(Layout_ l) {
  auto rc = rowcol(l);
  return make_layout(get<1>(rc), get<0>(rc));
}
template <class T>
CUTE_HOST_DEVICE auto colrow_view(T&& t) {
  return make_tensor(t.data(), colrow(t.layout()));
}

// The backward's S^T / dP^T and dK / dV tiled MMAs: warpgroups stacked along the keys (M), dK and
// dV's A operand (P^T, dS^T) from registers; or, kSplitD (both on the same 64 keys), S^T and dP^T
// split along the queries, dK and dV along the head dim, with A from shared memory.
template <class Element, bool kSplitD, int kBlockN, int kBlockM, int kHeadDim>
struct BwdMmas {
  using SdP = TiledMmaSS<Element, 2, kBlockN, kBlockM, kHeadDim>;
  using dKV = TiledMmaRS<Element, 2, kBlockN, kHeadDim, kBlockM>;
};
template <class Element, int kBlockN, int kBlockM, int kHeadDim>
struct BwdMmas<Element, true, kBlockN, kBlockM, kHeadDim> {
  using SdP = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<Int<kBlockN>, Int<kBlockM / 2>, Int<kHeadDim>>>(),
      Layout<Shape<_1, _2, _1>>{}));
  using dKV = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<Int<kBlockN>, Int<kHeadDim / 2>, Int<kBlockM>>,
                           GMMA::Major::K, GMMA::Major::MN>(),
      Layout<Shape<_1, _2, _1>>{}));
};

template <class Element_, int kHeadDim_, int kBlockM_, int kBlockN_, int kStages_, class Policy_>
struct BwdMainloop {
  using Element = Element_;
  using Policy = Policy_;
  static constexpr int kHeadDim = kHeadDim_, kBlockM = kBlockM_, kBlockN = kBlockN_;
  static constexpr int kStages = kStages_;
  static constexpr int kConsumerWarpgroups = 2, kConsumerThreads = 256;
  static constexpr bool kSplitD = kBlockN == 64;  // both warpgroups on the same 64 keys
  static_assert(kBlockN == 64 * kConsumerWarpgroups || (kSplitD && kBlockM == 64),
                "each consumer warpgroup owns 64 keys, or both share 64 (block_m 64)");
  static_assert(kBlockM == 64 || kBlockM == 128);
  // dQ staged in its own buffer for one bulk reduce per query block, or (kSplitD) in the block's
  // Q and dO stage (stage_dq_in_stage), or (kDqPass) not computed here at all: the row-parallel
  // pass of sm90/bwd_dq.h computes it.
  static constexpr bool kBulkDq = !kSplitD;
  static constexpr bool kDqPass = kSplitD && FLASHKIT_SM90_BWD_DQ_PASS;
  // kSplitD with the dQ pass: the warpgroups take roles (mma_roles) instead of splitting S^T and
  // dP^T along the queries.
  static constexpr bool kRoles = kDqPass && FLASHKIT_SM90_BWD_ROLES;

  // S^T, dP^T: (keys x queries) over hdim; dK, dV: (keys x hdim) over queries, A from registers,
  // B (Q, dO) read MN-major; dQ: (queries x hdim) over keys, both operands MN-major. dQ's 2
  // warpgroups split its rows (128 queries) or its columns (64 queries). kSplitD: S^T and dP^T
  // split along the queries, dK and dV along the head dim with A (P^T, dS^T) from shared memory.
  using TiledMmaSdP = typename BwdMmas<Element, kSplitD, kBlockN, kBlockM, kHeadDim>::SdP;
  using TiledMmadKV = typename BwdMmas<Element, kSplitD, kBlockN, kBlockM, kHeadDim>::dKV;
  static constexpr int kDqWgM = kBlockM / 64;
  // See mma(); softcap's P^T and dS^T come from one pass (each score's 1 - t^2 serves dS^T), so
  // it waits for dP^T's GEMM as at block_m 128.
  static constexpr bool kOverlapP = kBlockM == 64 && Policy::kSplitProbs;
  // A block mask's skip scan is a warp ballot: the producer's whole first warp walks the blocks.
  static constexpr bool kWarpProducer = Policy::kHasBlockMask;
  // dS^T alternates between two shared-memory buffers, so no barrier guards its store (see mma()).
  static constexpr int kDsBuffers = 2;
  using TiledMmadQ = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float,
                           Shape<_64, Int<kHeadDim * kDqWgM / 2>, Int<kBlockN>>, GMMA::Major::MN,
                           GMMA::Major::MN>(),
      Layout<Shape<Int<kDqWgM>, Int<2 / kDqWgM>, _1>>{}));

  using TileQ = Shape<Int<kBlockM>, Int<kHeadDim>>;
  using TileKV = Shape<Int<kBlockN>, Int<kHeadDim>>;
  using LayoutQ = SmemTiles<Element, kBlockM, kHeadDim, kStages>;  // Q and dO: (M, D, stage)
  using LayoutQt = decltype(transposed_staged<LayoutQ, kBlockM, kHeadDim, kStages>(LayoutQ{}));
  using LayoutKV = SmemTiles<Element, kBlockN, kHeadDim, 1>;  // (N, D, 1)
  using LayoutKt = decltype(transposed_staged<LayoutKV, kBlockN, kHeadDim, 1>(LayoutKV{}));
  using LayoutdS = SmemTiles<Element, kBlockN, kBlockM, 1>;  // dS^T: (N, M, 1), queries contiguous
  using LayoutdSt = decltype(transposed_staged<LayoutdS, kBlockN, kBlockM, 1>(LayoutdS{}));
  using Ring = TmaRing<kStages>;
  static constexpr uint32_t kBytesQ = kBlockM * kHeadDim * sizeof(Element);
  static constexpr uint32_t kBytesKV = kBlockN * kHeadDim * sizeof(Element);
  static constexpr uint32_t kBytesStats = kBlockM * sizeof(float);
  static constexpr int kDqFloats = kBlockM * kHeadDim;

  using TmaQ =
      decltype(make_tma_copy(SM90_TMA_LOAD{}, gmem_tensor<Element>(nullptr, 0, 0, 0, 0, {}),
                             SmemTile<Element, kBlockM, kHeadDim>{}, TileQ{}, _1{}));
  using TmaKV =
      decltype(make_tma_copy(SM90_TMA_LOAD{}, gmem_tensor<Element>(nullptr, 0, 0, 0, 0, {}),
                             SmemTile<Element, kBlockN, kHeadDim>{}, TileKV{}, _1{}));

  struct SharedStorage {
    alignas(1024) Element q[cosize_v<LayoutQ>];
    alignas(1024) Element d_o[cosize_v<LayoutQ>];
    alignas(1024) Element k[cosize_v<LayoutKV>];  // dK after the mainloop (epilogue)
    alignas(1024) Element v[cosize_v<LayoutKV>];  // dV after the mainloop
    // dS^T's buffers of LayoutdS, then (kSplitD) P^T's
    alignas(1024) Element ds[(kSplitD ? 2 : 1) * kDsBuffers * cosize_v<LayoutdS>];
    alignas(128) float dq[kBulkDq ? kDqFloats : 4];  // one query block's dQ in dq_chunk order
    alignas(16) float lse_log2[kStages][kBlockM];
    alignas(16) float dsum[kStages][kBlockM];
    typename Ring::Storage ring;
    alignas(8) uint64_t kv_full;
    alignas(8) uint64_t pt_full;  // kRoles: P^T of a block written (warpgroup 0's 128 threads)
  };

  struct Params {
    TmaQ tma_q, tma_do;
    TmaKV tma_k, tma_v;
    sm80::BwdScratch ws;
    const int *cu_seqlens_q, *cu_seqlens_k;  // null: dense
    int seqlen_q, seqlen_k, head_dim, heads, h_ratio, batch, num_m_blocks;
    int rows_q, rows_k, tma_batch;  // the TMA tensors' extents (GmemExtent)
    float scale, scale_log2;
    bool deterministic;
    typename Policy::Params score;
  };
  static Params to_params(const AttnArguments& a, const sm80::BwdScratch& ws) {
    auto tma = [&](const void* x, int heads, bool keys, const Strides& s, auto smem, auto tile) {
      return make_tma_copy(SM90_TMA_LOAD{},
                           gmem_tensor<Element>(x, a.head_dim, heads, gmem_extent(a, keys, s)),
                           smem, tile, _1{});
    };
    using SmemQ = SmemTile<Element, kBlockM, kHeadDim>;
    using SmemKV = SmemTile<Element, kBlockN, kHeadDim>;
    return {tma(a.q, a.heads, false, a.q_stride, SmemQ{}, TileQ{}),
            tma(a.dout, a.heads, false, a.do_stride, SmemQ{}, TileQ{}),
            tma(a.k, a.kv_heads, true, a.k_stride, SmemKV{}, TileKV{}),
            tma(a.v, a.kv_heads, true, a.v_stride, SmemKV{}, TileKV{}),
            ws,
            a.cu_seqlens_q,
            a.cu_seqlens_k,
            a.seqlen_q,
            a.seqlen_k,
            a.head_dim,
            a.heads,
            a.heads / a.kv_heads,
            a.batch,
            ceil_div(a.seqlen_q, kBlockM),
            gmem_extent(a, false, a.q_stride).rows,
            gmem_extent(a, true, a.k_stride).rows,
            gmem_extent(a, false, a.q_stride).batch,
            a.softmax_scale,
            a.softmax_scale * float(M_LOG2E),
            a.deterministic,
            Policy::to_params(a)};
  }

  // Sequence w.batch's lengths and first tokens. A varlen grid covers the longest sequence's
  // keys: CTAs past a shorter one's end have nothing to do (`in_sequence`); tiles read rows of
  // the next sequence as the forward's do (sm90/fwd_mainloop.h): the masks give its keys P = 0,
  // its query rows get the chunk padding's LSE +inf and D 0 (so P = dS = 0), and the epilogue
  // stores only this sequence's dK and dV rows.
  __device__ static SeqBounds seq_bounds(const Params& p, const WorkTile& w) {
    return SeqBounds(p.cu_seqlens_q, p.cu_seqlens_k, w.batch, p.seqlen_q, p.seqlen_k);
  }
  __device__ static bool in_sequence(const SeqBounds& sb, const WorkTile& w) {
    return w.block * kBlockN < sb.seqlen_k;
  }

  // One thread, before the block-wide barrier that publishes it.
  __device__ static void init(SharedStorage& smem) {
    Ring::init(smem.ring, kConsumerThreads);
    Ring::Barrier::init(&smem.kv_full, 1);
    Ring::Barrier::init(&smem.pt_full, kConsumerThreads / 2);
  }
  __device__ static void prefetch_descriptors(const Params& p) {
    prefetch_tma_descriptor(p.tma_q.get_tma_descriptor());
    prefetch_tma_descriptor(p.tma_do.get_tma_descriptor());
    prefetch_tma_descriptor(p.tma_k.get_tma_descriptor());
    prefetch_tma_descriptor(p.tma_v.get_tma_descriptor());
  }

  // The query blocks of key block n, one head's, walked by both roles in the same order: each
  // key block starts at a different block (spreading the dQ adds over the rows), except in
  // deterministic runs, whose turns count key blocks in order. Steps whose tile the block mask
  // drops are skipped (next(i): the first live step >= i, count when none).
  struct QueryWalk {
    const Policy& pol;
    int n_block, begin, count, rot;
    __device__ QueryWalk(const Params& p, const Policy& pol_, int n)
        : pol(pol_), n_block(n) {
      const BlockRange mr = pol.template query_blocks<kBlockM, kBlockN>(n_block);
      begin = mr.begin, count = mr.end > mr.begin ? mr.end - mr.begin : 0;
      rot = p.deterministic || count == 0 ? 0 : n_block % count;
    }
    __device__ int at(int i) const { return begin + (i + rot < count ? i + rot : i + rot - count); }
    __device__ int next(int i) const {
      return pol.template next_live_query<kBlockM, kBlockN>(i, count, [&](int j) { return at(j); },
                                                            n_block);
    }
  };

  // Producer (one elected lane, `leader`, issues every copy; with kWarpProducer its whole warp
  // walks the blocks): K and V once, then Q, dO, LSE, D of each live (head, query block).
  __device__ static void load(const Params& p, SharedStorage& smem, const WorkTile& w,
                              const SeqBounds& sb, typename Ring::State& st, bool leader) {
    const int b = w.batch, kv_head = w.head;
    const int tb = sb.varlen ? 0 : b;  // the TMA tensors' batch coordinate
    const GmemShape shape_q{p.rows_q, p.head_dim, p.heads, p.tma_batch};
    const GmemShape shape_k{p.rows_k, p.head_dim, p.heads / p.h_ratio, p.tma_batch};
    // (row, col) coordinates start at the sequence's first token (0 when dense).
    auto seq_q = [&](auto t) { return domain_offset(make_coord(sb.q_start, _0{}), t); };
    auto seq_k = [&](auto t) { return domain_offset(make_coord(sb.k_start, _0{}), t); };
    Tensor gK = local_tile(seq_k(p.tma_k.get_tma_tensor(shape_k)(_, _, kv_head, tb)), TileKV{},
                           make_coord(w.block, _0{}));
    Tensor gV = local_tile(seq_k(p.tma_v.get_tma_tensor(shape_k)(_, _, kv_head, tb)), TileKV{},
                           make_coord(w.block, _0{}));
    Tensor sK = make_tensor(make_smem_ptr(smem.k), LayoutKV{});
    Tensor sV = make_tensor(make_smem_ptr(smem.v), LayoutKV{});
    auto ck = p.tma_k.get_slice(_0{});
    auto cv = p.tma_v.get_slice(_0{});
    if (leader) {
      Ring::Barrier::arrive_and_expect_tx(&smem.kv_full, 2 * kBytesKV);
      copy(p.tma_k.with(smem.kv_full), ck.partition_S(gK), ck.partition_D(sK(_, _, 0)));
      copy(p.tma_v.with(smem.kv_full), cv.partition_S(gV), cv.partition_D(sV(_, _, 0)));
    }

    auto cq = p.tma_q.get_slice(_0{});
    auto cdo = p.tma_do.get_slice(_0{});
    Tensor tQs = cq.partition_D(make_tensor(make_smem_ptr(smem.q), LayoutQ{}));  // (TMA, .., stage)
    Tensor tdOs = cdo.partition_D(make_tensor(make_smem_ptr(smem.d_o), LayoutQ{}));
    const int64_t token0 = sb.q_token(b);
    for (int g = 0; g < p.h_ratio; ++g) {
      const int h = kv_head * p.h_ratio + g;
      const Policy pol(p.score, sb, b, h, p.scale);
      const QueryWalk walk(p, pol, w.block);
      Tensor tQg = cq.partition_S(local_tile(seq_q(p.tma_q.get_tma_tensor(shape_q)(_, _, h, tb)),
                                             TileQ{}, make_coord(_, _0{})));  // (TMA, .., m)
      Tensor tdOg = cdo.partition_S(local_tile(
          seq_q(p.tma_do.get_tma_tensor(shape_q)(_, _, h, tb)), TileQ{}, make_coord(_, _0{})));
      for (int i = walk.next(0); i < walk.count; i = walk.next(i + 1)) {
        const int m = walk.at(i);
        if (leader) {
          uint64_t& full = Ring::producer_acquire(smem.ring, st, 2 * kBytesQ + 2 * kBytesStats);
          copy(p.tma_q.with(full), tQg(_, _, _, m), tQs(_, _, _, st.stage));
          copy(p.tma_do.with(full), tdOg(_, _, _, m), tdOs(_, _, _, st.stage));
          const int64_t at = sm80::row_chunk<kBlockM>(token0, b, m, h, p.heads);
          SM90_BULK_COPY_G2S::copy(p.ws.lse_log2 + at, &full, smem.lse_log2[st.stage], kBytesStats);
          SM90_BULK_COPY_G2S::copy(p.ws.dsum + at, &full, smem.dsum[st.stage], kBytesStats);
        }
        st.advance();
      }
    }
  }

  // Consumers (tid in [0, 256)): dK (unscaled) and dV of the block's keys in acc_dk / acc_dv; dQ
  // added to the scratch per query block. Named barrier kBarrier syncs the 256 consumer threads.
  static constexpr uint32_t kBarrier = 1;
  __device__ static void sync_consumers() {
    cutlass::arch::NamedBarrier::sync(kConsumerThreads, kBarrier);
  }

  // Releases a stage held past its block (stage >= 0).
  __device__ static void release_stage(SharedStorage& smem, int stage) {
    if (stage >= 0) Ring::consumer_release(smem.ring, stage);
  }

  // kSplitD: a block's dQ (acc_dq) into its stage's dO and Q buffers as dV's and then dK's GEMM
  // (the last two in flight) complete. Each warpgroup waits only for its own GEMMs, which read
  // only its half of the head dim: bytes [16 KB wg, 16 KB wg + 16 KB) of each tile (columns
  // 128 wg .. 128 wg + 127 of the 64-column swizzle atoms). So each writes its 32 KB of dQ (16
  // groups of 4 floats a thread) there alone: groups 0-7 in dO's part, 8-15 in Q's, each group's
  // 128 float4 contiguous as in dq_chunk's [group][thread][4] order, where they are 2 KB runs;
  // then the warpgroup's first thread adds the 16 runs by bulk reduces and keeps the stage
  // (`held`) until they have read it; the other threads release it now.
  template <class AccQ, class AccKV>
  __device__ static void stage_dq_in_stage(SharedStorage& smem, const AccQ& acc_dq, AccKV& acc_dk,
                                           AccKV& acc_dv, float* dst, int stage, int& held,
                                           int tid) {
    static_assert(cosize_v<LayoutQ> == kStages * kBlockM * kHeadDim, "stages are contiguous");
    constexpr int kWgThreads = kConsumerThreads / 2;
    constexpr int kGroups = decltype(size(acc_dq))::value / 4;  // per thread
    constexpr int kRun = kWgThreads * 4;                        // floats of one group's run
    static_assert(kGroups / 2 * kRun * sizeof(float) == kBytesQ / 2,
                  "a warpgroup's half of dQ fills its halves of a dO and a Q tile");
    const int wg = tid / kWgThreads, t = tid % kWgThreads;
    constexpr int kPart = kBlockM * kHeadDim / 2;  // elements of a warpgroup's half of a tile
    float* lo = reinterpret_cast<float*>(smem.d_o + stage * kBlockM * kHeadDim + wg * kPart);
    float* hi = reinterpret_cast<float*>(smem.q + stage * kBlockM * kHeadDim + wg * kPart);
    auto put = [&](float* base, int j0) {
      CUTE_UNROLL
      for (int j = 0; j < kGroups / 2; ++j) {
        const int g = j0 + j;
        *reinterpret_cast<float4*>(base + (j * kWgThreads + t) * 4) =
            make_float4(acc_dq(4 * g), acc_dq(4 * g + 1), acc_dq(4 * g + 2), acc_dq(4 * g + 3));
      }
    };
    warpgroup_wait<1>();  // this warpgroup's dV has read its half of dO
    warpgroup_fence_operand(acc_dv);
    put(lo, 0);
    warpgroup_wait<0>();  // its dK, its half of Q
    warpgroup_fence_operand(acc_dk);
    put(hi, kGroups / 2);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    fence_shared_to_async();
    cutlass::arch::NamedBarrier::sync(kWgThreads, kBarrier + 1 + wg);
    if (t == 0) {
      CUTE_UNROLL
      for (int g = 0; g < kGroups; ++g)
        bulk_reduce_add_f32(dst + (g * kConsumerThreads + wg * kWgThreads) * 4,
                            (g < kGroups / 2 ? lo : hi) + (g % (kGroups / 2)) * kRun,
                            kRun * sizeof(float));
      held = stage;
    } else {
      Ring::consumer_release(smem.ring, stage);
    }
#endif
  }
  // The held stage back to the producer once its bulk reduces have read it (thread 0 only).
  __device__ static void release_held(SharedStorage& smem, int& held) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (held >= 0) {
      bulk_wait_read();
      Ring::consumer_release(smem.ring, held);
      held = -1;
    }
#endif
  }

  // ---- kRoles (hdim 256 with the dQ pass; bench/NOTES-attention.md "column kernel roles") ----
  // Warpgroup 0 computes S^T = K Q^T (m64n64, one warpgroup) and P^T, written (bf16) to shared
  // memory where it is dV's A operand and, handed over by the pt_full mbarrier, warpgroup 1's
  // input for dS^T; warpgroup 1 computes dP^T = V dO^T and dS^T = P^T (dP^T - D), written for dK.
  // Both then run dV += P^T dO and dK += dS^T Q on their halves of the head dim. Warpgroup 0
  // issues block j's S^T before block j-1's dV / dK, so its exponentials run under them and
  // warpgroup 1's dS^T step under S^T. 224 KB of operand reads a block instead of 288.
  using TiledMmaSdP1 = TiledMmaSS<Element, 1, kBlockN, kBlockM, kHeadDim>;
  static constexpr uint32_t kBarrierdS = 4;  // dS^T of a block written (both warpgroups wait)

  // The (head of the group g, walk index i) steps of the key block, in the producer's order:
  // seek moves (g, i) to the first live step at or after it (false past the last).
  struct Steps {
    const Params& p;
    const SeqBounds& sb;
    int b, kv_head, n_block;
    __device__ Policy policy(int g) const {
      return Policy(p.score, sb, b, kv_head * p.h_ratio + g, p.scale);
    }
    __device__ bool seek(int& g, int& i) const {
      for (; g < p.h_ratio; ++g, i = 0) {
        const Policy pol = policy(g);
        const QueryWalk walk(p, pol, n_block);
        i = walk.next(i);
        if (i < walk.count) return true;
      }
      return false;
    }
    __device__ int block(int g, int i) const {
      const Policy pol = policy(g);
      return QueryWalk(p, pol, n_block).at(i);
    }
  };

  __device__ static auto pt_buffer(SharedStorage& smem, int buf) {
    return make_tensor(make_smem_ptr(smem.ds + (kDsBuffers + buf) * cosize_v<LayoutdS>), LayoutdS{})(_, _, 0);
  }
  __device__ static auto ds_buffer(SharedStorage& smem, int buf) {
    return make_tensor(make_smem_ptr(smem.ds + buf * cosize_v<LayoutdS>), LayoutdS{})(_, _, 0);
  }
  // This warpgroup's halves of dV += P^T dO and dK += dS^T Q of the block in `stage`.
  template <class AccKV>
  __device__ static void dkv_gemms(SharedStorage& smem, int buf, int stage, AccKV& acc_dk,
                                   AccKV& acc_dv, int tid) {
    TiledMmadKV mma_dkv;
    auto thr = mma_dkv.get_thread_slice(tid);
    Tensor tdVrdOt = thr.partition_fragment_B(make_tensor(make_smem_ptr(smem.d_o), LayoutQt{}));
    Tensor tdKrQt = thr.partition_fragment_B(make_tensor(make_smem_ptr(smem.q), LayoutQt{}));
    wgmma<false>(mma_dkv, thr.partition_fragment_A(pt_buffer(smem, buf)), tdVrdOt(_, _, _, stage), acc_dv);
    wgmma<false>(mma_dkv, thr.partition_fragment_A(ds_buffer(smem, buf)), tdKrQt(_, _, _, stage), acc_dk);
  }

  // Warpgroup 0 (tid in [0, 128)). The first step is peeled off so that every path waits for
  // every wgmma unconditionally (ptxas serialises them all otherwise).
  template <class AccKV>
  __device__ static void mma_s_role(const Params& p, SharedStorage& smem, const WorkTile& w,
                                    const SeqBounds& sb, AccKV& acc_dk, AccKV& acc_dv,
                                    typename Ring::State& st, int tid) {
    static_assert(Policy::kPlain, "P^T is handed over, not the policy's per-score state");
    const Steps steps{p, sb, w.batch, w.head, w.block};
    TiledMmaSdP1 mma;
    auto thr = mma.get_thread_slice(tid);
    Tensor tSrK = thr.partition_fragment_A(make_tensor(make_smem_ptr(smem.k), LayoutKV{})(_, _, 0));
    Tensor tSrQ = thr.partition_fragment_B(make_tensor(make_smem_ptr(smem.q), LayoutQ{}));
    auto qk = make_layout(Shape<Int<kBlockN>, Int<kBlockM>>{}, make_stride(E<1>{}, E<0>{}));
    Tensor tScS = colrow_view(thr.partition_C(make_coord_tensor(qk)));
    using Coord = decltype(tScS);
    // S^T of step (g, i) in `stage` is in acc_s: P^T to buffer buf, announced.
    auto hand_over_pt = [&](auto& acc_s, int g, int i, int stage, int buf) {
      warpgroup_fence_operand(acc_s);
      const Policy pol = steps.policy(g);
      const int m = steps.block(g, i);
      const QueryStat<Coord> lse{smem.lse_log2[stage], tScS};
      Tensor s = colrow_view(acc_s);
      pol.template bwd_p<true>(s, tScS, m * kBlockM, w.block * kBlockN,
                               pol.template bwd_needs_mask<kBlockM, kBlockN>(m, w.block),
                               p.scale_log2, lse);
      copy(sm80::convert<Element>(acc_s), thr.partition_C(pt_buffer(smem, buf)));
      cutlass::arch::fence_view_async_shared();
      Ring::Barrier::arrive(&smem.pt_full);
    };
    Ring::Barrier::wait(&smem.kv_full, 0);
    int g = 0, i = 0;
    if (!steps.seek(g, i)) return;
    int prev_stage = st.stage, buf = 0;
    {
      Ring::consumer_wait(smem.ring, st);
      Tensor acc_s = partition_fragment_C(mma, Shape<Int<kBlockN>, Int<kBlockM>>{});
      wgmma<true>(mma, tSrK, tSrQ(_, _, _, prev_stage), acc_s);
      warpgroup_wait<0>();
      hand_over_pt(acc_s, g, i, prev_stage, buf);
      st.advance();
    }
    for (++i; steps.seek(g, i); ++i) {
      const int stage = st.stage;
      Ring::consumer_wait(smem.ring, st);
      Tensor acc_s = partition_fragment_C(mma, Shape<Int<kBlockN>, Int<kBlockM>>{});
      wgmma<true>(mma, tSrK, tSrQ(_, _, _, stage), acc_s);
      cutlass::arch::NamedBarrier::sync(kConsumerThreads, kBarrierdS);  // dS^T of the last step
      dkv_gemms(smem, buf, prev_stage, acc_dk, acc_dv, tid);
      warpgroup_wait<2>();  // S^T
      buf ^= 1;
      hand_over_pt(acc_s, g, i, stage, buf);
      warpgroup_wait<0>();  // the last step's dV, dK
      warpgroup_fence_operand(acc_dv);
      warpgroup_fence_operand(acc_dk);
      Ring::consumer_release(smem.ring, prev_stage);
      prev_stage = stage;
      st.advance();
    }
    cutlass::arch::NamedBarrier::sync(kConsumerThreads, kBarrierdS);
    dkv_gemms(smem, buf, prev_stage, acc_dk, acc_dv, tid);
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc_dv);
    warpgroup_fence_operand(acc_dk);
    Ring::consumer_release(smem.ring, prev_stage);
  }

  // Warpgroup 1 (tid in [128, 256)): dP^T (behind its previous dV / dK), then dS^T once P^T is
  // handed over, written to buffer j % 2 (whose last readers, both warpgroups' dK of step j-2,
  // are done: warpgroup 0 waits for its own before handing over P^T(j)), then its dV / dK.
  template <class AccKV>
  __device__ static void mma_dp_role(const Params& p, SharedStorage& smem, const WorkTile& w,
                                     const SeqBounds& sb, AccKV& acc_dk, AccKV& acc_dv,
                                     typename Ring::State& st, int tid) {
    const Steps steps{p, sb, w.batch, w.head, w.block};
    TiledMmaSdP1 mma;
    auto thr = mma.get_thread_slice(tid - 128);
    Tensor tdPrV = thr.partition_fragment_A(make_tensor(make_smem_ptr(smem.v), LayoutKV{})(_, _, 0));
    Tensor tdPrdO = thr.partition_fragment_B(make_tensor(make_smem_ptr(smem.d_o), LayoutQ{}));
    auto qk = make_layout(Shape<Int<kBlockN>, Int<kBlockM>>{}, make_stride(E<1>{}, E<0>{}));
    Tensor tScS = colrow_view(thr.partition_C(make_coord_tensor(qk)));
    using Coord = decltype(tScS);
    Ring::Barrier::wait(&smem.kv_full, 0);
    int prev_stage = -1, buf = 0;
    uint32_t phase = 0;
    for (int g = 0, i = 0; steps.seek(g, i); ++i) {
      const int stage = st.stage;
      Ring::consumer_wait(smem.ring, st);
      Tensor acc_dp = partition_fragment_C(mma, Shape<Int<kBlockN>, Int<kBlockM>>{});
      wgmma<true>(mma, tdPrV, tdPrdO(_, _, _, stage), acc_dp);
      warpgroup_wait<0>();  // dP^T and the last step's dV, dK
      warpgroup_fence_operand(acc_dp);
      warpgroup_fence_operand(acc_dv);
      warpgroup_fence_operand(acc_dk);
      if (prev_stage >= 0) Ring::consumer_release(smem.ring, prev_stage);
      Ring::Barrier::wait(&smem.pt_full, phase);
      phase ^= 1;
      Tensor pt = make_fragment_like<Element>(acc_dp);
      copy(thr.partition_C(pt_buffer(smem, buf)), pt);
      const QueryStat<Coord> d_row{smem.dsum[stage], tScS};
      Tensor dp = colrow_view(acc_dp);
      Tensor p_t = colrow_view(pt);
      CUTE_UNROLL
      for (int r = 0; r < size<0>(dp); ++r) {
        CUTE_UNROLL
        for (int c = 0; c < size<1>(dp); ++c) dp(r, c) = float(p_t(r, c)) * (dp(r, c) - d_row[r]);
      }
      copy(sm80::convert<Element>(acc_dp), thr.partition_C(ds_buffer(smem, buf)));
      cutlass::arch::fence_view_async_shared();
      cutlass::arch::NamedBarrier::sync(kConsumerThreads, kBarrierdS);
      dkv_gemms(smem, buf, stage, acc_dk, acc_dv, tid);
      prev_stage = stage;
      buf ^= 1;
      st.advance();
    }
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc_dv);
    warpgroup_fence_operand(acc_dk);
    if (prev_stage >= 0) Ring::consumer_release(smem.ring, prev_stage);
  }

  template <class AccKV>
  __device__ static void mma(const Params& p, SharedStorage& smem, const WorkTile& w,
                             const SeqBounds& sb, AccKV& acc_dk, AccKV& acc_dv,
                             typename Ring::State& st, int tid) {
    clear(acc_dk);
    clear(acc_dv);
    if constexpr (kRoles) {
      if (cutlass::canonical_warp_group_idx() == 1) mma_s_role(p, smem, w, sb, acc_dk, acc_dv, st, tid);
      else mma_dp_role(p, smem, w, sb, acc_dk, acc_dv, st, tid);
      return;
    }
    const int b = w.batch, n_block = w.block;
    TiledMmaSdP mma_sdp;
    TiledMmadKV mma_dkv;
    TiledMmadQ mma_dq;
    auto thr_sdp = mma_sdp.get_thread_slice(tid);
    auto thr_dkv = mma_dkv.get_thread_slice(tid);
    auto thr_dq = mma_dq.get_thread_slice(tid);
    Tensor sQ = make_tensor(make_smem_ptr(smem.q), LayoutQ{});
    Tensor sdO = make_tensor(make_smem_ptr(smem.d_o), LayoutQ{});
    Tensor sQt = make_tensor(make_smem_ptr(smem.q), LayoutQt{});  // (D, M, stage)
    Tensor sdOt = make_tensor(make_smem_ptr(smem.d_o), LayoutQt{});
    Tensor sK = make_tensor(make_smem_ptr(smem.k), LayoutKV{});
    Tensor sV = make_tensor(make_smem_ptr(smem.v), LayoutKV{});
    Tensor sKt = make_tensor(make_smem_ptr(smem.k), LayoutKt{});     // (D, N, 1)
    Tensor tSrK = thr_sdp.partition_fragment_A(sK(_, _, 0));
    Tensor tdPrV = thr_sdp.partition_fragment_A(sV(_, _, 0));
    Tensor tSrQ = thr_sdp.partition_fragment_B(sQ);  // (MMA, M, K, stage) descriptors
    Tensor tdPrdO = thr_sdp.partition_fragment_B(sdO);
    Tensor tdVrdOt = thr_dkv.partition_fragment_B(sdOt);  // (MMA, D, M, stage)
    Tensor tdKrQt = thr_dkv.partition_fragment_B(sQt);
    Tensor tdQrKt = thr_dq.partition_fragment_B(sKt(_, _, 0));
    // (query, key) coordinates of each score within the tile, in the policy's (row, col) order.
    auto qk = make_layout(Shape<Int<kBlockN>, Int<kBlockM>>{}, make_stride(E<1>{}, E<0>{}));
    Tensor tScS = colrow_view(thr_sdp.partition_C(make_coord_tensor(qk)));
    using Coord = decltype(tScS);

    const bool bulk_dq = kBulkDq && !p.deterministic;
    const int wg = cutlass::canonical_warp_group_idx() - 1;  // keys [64 wg, 64 wg + 64) of the tile
    const int64_t token0 = sb.q_token(b);
    // At block_m 64, dK's GEMM of a query block completes during the next block's S^T (wgmma
    // batches complete in order), so its stage is released there: prev_stage, -1 before the first
    // block. At 128 (hdim 64) dS^T held for it beside S^T and dP^T makes ptxas serialise the
    // wgmmas, so each block waits for its dK.
    int prev_stage = -1;
    int ds_buf = 0;  // dS^T's buffer of the block
    int held = -1;  // kSplitD: the stage thread 0 keeps for its bulk reduces (-1: none)
    Ring::Barrier::wait(&smem.kv_full, 0);
    for (int g = 0; g < p.h_ratio; ++g) {
      const int h = w.head * p.h_ratio + g;
      const Policy pol(p.score, sb, b, h, p.scale);
      const QueryWalk walk(p, pol, n_block);
      int* semaphore =
          p.deterministic ? p.ws.semaphore + (int64_t(b) * p.heads + h) * p.num_m_blocks : nullptr;
      for (int i = walk.next(0); i < walk.count; i = walk.next(i + 1)) {
        const int m = walk.at(i), stage = st.stage;
        Ring::consumer_wait(smem.ring, st);
        Tensor acc_s = partition_fragment_C(mma_sdp, Shape<Int<kBlockN>, Int<kBlockM>>{});
        Tensor acc_dp = partition_fragment_C(mma_sdp, Shape<Int<kBlockN>, Int<kBlockM>>{});
        wgmma<true>(mma_sdp, tSrK, tSrQ(_, _, _, stage), acc_s);
        wgmma<true>(mma_sdp, tdPrV, tdPrdO(_, _, _, stage), acc_dp);

        // P^T = exp2(S^T scale log2(e) - LSE) with the policy's modifiers and masks, and dS^T =
        // P^T (dP^T - D) (dropout and softcap's 1 - t^2 in the policy). At block_m 64 the
        // exponentials (and dropout draws) run while dP^T's GEMM does, the dropout bits passed
        // on to dS^T; at 128 (hdim 64) dP^T's accumulator in flight beside P^T's would spill, so
        // both wait for it, as softcap does (its t would have to be kept per score).
        Tensor s = colrow_view(acc_s);
        Tensor dp = colrow_view(acc_dp);
        // The element mask runs only where this warpgroup's 64 keys cross the diagonal or seqlen_k.
        const bool mask = kSplitD ? pol.template bwd_needs_mask<kBlockM, kBlockN>(m, n_block)
                                  : pol.template bwd_needs_mask<kBlockM, 64>(m, 2 * n_block + wg);
        const QueryStat<Coord> lse{smem.lse_log2[stage], tScS}, d_row{smem.dsum[stage], tScS};
        if constexpr (kOverlapP) {
          warpgroup_wait<1>();
          warpgroup_fence_operand(acc_s);
          release_stage(smem, prev_stage);
          auto p_t = [&](auto masked) {
            return pol.template bwd_p<true>(s, tScS, m * kBlockM, n_block * kBlockN, masked,
                                            p.scale_log2, lse);
          };
          // General policies: one branch per block to a masked or an unmasked copy (a run-time
          // mask in the element loop cost ~200 instructions a thread on every block; the sm80
          // backward keeps the bool: two copies tripled its spills at 255 registers).
          const auto keep = [&] {
            if constexpr (Policy::kPlain) return p_t(mask);
            else return mask ? p_t(std::true_type{}) : p_t(std::false_type{});
          }();
          warpgroup_wait<0>();
          warpgroup_fence_operand(acc_dp);
          pol.template bwd_ds<true>(s, dp, tScS, d_row, keep);
        } else {
          warpgroup_wait<0>();
          release_stage(smem, prev_stage);  // kSplitD: the previous block's dV and dK are done
          prev_stage = -1;
          pol.template bwd_probs<true>(s, dp, tScS, m * kBlockM, n_block * kBlockN, mask, p.scale,
                                       p.scale_log2, lse, d_row);
        }
        Tensor rP = sm80::convert<Element>(acc_s);
        Tensor rdS = sm80::convert<Element>(acc_dp);
        // A (keys, queries) tile of this warpgroup's fragment to a LayoutdS buffer.
        auto to_smem = [&](const auto& r, Element* buf) {
          copy(r, thr_sdp.partition_C(make_tensor(make_smem_ptr(buf), LayoutdS{})(_, _, 0)));
        };
        // dS^T's buffer of the block: both warpgroups' GEMMs read it two blocks ago; each waited
        // for its own, and the other one's wait came before it arrived at the previous block's
        // barrier below (so no barrier guards the store). The same holds for P^T's (kSplitD).
        Element* ds = smem.ds + ds_buf * cosize_v<LayoutdS>;
        Tensor acc_dq = partition_fragment_C(mma_dq, TileQ{});
        auto dq_gemm = [&] {  // dQ = dS K, both operands from shared memory
          Tensor tdQrdS =
              thr_dq.partition_fragment_A(make_tensor(make_smem_ptr(ds), LayoutdSt{})(_, _, 0));
          wgmma<true>(mma_dq, tdQrdS, tdQrKt, acc_dq);
        };
        // Where dQ goes: this query block's chunk of the scratch (taken where it is used: earlier,
        // its address arithmetic moved into the GEMMs' issue and changed their schedule).
        auto dq_dst = [&] {
          return sm80::dq_chunk<kBlockM, kHeadDim>(p.ws.dq_accum, token0, b, m, h, p.heads);
        };
        if constexpr (kSplitD) {
          // P^T and dS^T (this warpgroup's queries of them) to shared memory, then dQ, dV += P^T
          // dO and dK += dS^T Q from there, in that order. Before the barrier, the thread that
          // issued the previous block's bulk reduces waits for them to have read their stage and
          // releases it (`held`).
          Element* pt = ds + kDsBuffers * cosize_v<LayoutdS>;
          to_smem(rP, pt);
          to_smem(rdS, ds);
          cutlass::arch::fence_view_async_shared();
          release_held(smem, held);
          sync_consumers();
          auto a_op = [&](Element* buf) {
            return thr_dkv.partition_fragment_A(make_tensor(make_smem_ptr(buf), LayoutdS{})(_, _, 0));
          };
          if constexpr (!kDqPass) dq_gemm();  // kDqPass: dQ comes from sm90/bwd_dq.h
          wgmma<false>(mma_dkv, a_op(pt), tdVrdOt(_, _, _, stage), acc_dv);
          wgmma<false>(mma_dkv, a_op(ds), tdKrQt(_, _, _, stage), acc_dk);
          if constexpr (!kDqPass) {
            warpgroup_wait<2>();
            warpgroup_fence_operand(acc_dq);
            // Deterministic runs add dQ by atomics in turns while dV's and dK's GEMMs run (they
            // complete during the next block's S^T, whose warpgroup_wait<1> releases the stage);
            // otherwise dQ goes to this block's own stage once they are done
            // (stage_dq_in_stage), which returns the stage to the producer.
            if (p.deterministic)
              sm80::add_dq<kConsumerThreads>(acc_dq, dq_dst(), semaphore + m,
                                             pol.template dq_turn<kBlockM, kBlockN>(m, n_block),
                                             tid, [] { sync_consumers(); });
            else
              stage_dq_in_stage(smem, acc_dq, acc_dk, acc_dv, dq_dst(), stage, held, tid);
          }
        } else {
          Tensor tdVrP = make_tensor(rP.data(), acc_as_a(rP.layout()));
          warpgroup_fence_operand(tdVrP);
          wgmma<false>(mma_dkv, tdVrP, tdVrdOt(_, _, _, stage), acc_dv);
          Tensor tdKrdS = make_tensor(rdS.data(), acc_as_a(rdS.layout()));

          // dS^T to shared memory for dQ = dS K (while dV's GEMM runs). The last bulk reduce must
          // also have read the dQ staging buffer (thread 0 waits before the barrier after the
          // store). dQ's GEMM goes before dK's, so dQ is staged and added while dK's runs (whose
          // register operand rdS is not written meanwhile).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
          if (bulk_dq && tid == 0) bulk_wait_read();
#endif
          to_smem(rdS, ds);
          cutlass::arch::fence_view_async_shared();
          sync_consumers();
          dq_gemm();
          warpgroup_fence_operand(tdKrdS);
          wgmma<false>(mma_dkv, tdKrdS, tdKrQt(_, _, _, stage), acc_dk);
          warpgroup_wait<1>();
          warpgroup_fence_operand(tdVrP);
          warpgroup_fence_operand(acc_dq);
          float* dst = dq_dst();
          if (bulk_dq) {
            sm80::stage_dq<kConsumerThreads>(smem.dq, acc_dq, tid);
            sync_consumers();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
            if (tid == 0) bulk_reduce_add_f32(dst, smem.dq, kDqFloats * sizeof(float));
#endif
          } else {
            sm80::add_dq<kConsumerThreads>(acc_dq, dst, semaphore ? semaphore + m : nullptr,
                                           pol.template dq_turn<kBlockM, kBlockN>(m, n_block), tid,
                                           [] { sync_consumers(); });
          }
          if constexpr (!kOverlapP) {
            warpgroup_wait<0>();
            warpgroup_fence_operand(tdKrdS);
            Ring::consumer_release(smem.ring, st);
          }
        }
        ds_buf ^= 1;
        // (kSplitD without deterministic turns: the stage went back with its dQ, stage_dq_in_stage.)
        if constexpr (kOverlapP || kSplitD)
          prev_stage = kSplitD && !kDqPass && !p.deterministic ? -1 : stage;
        st.advance();
      }
    }
    warpgroup_wait<0>();  // the last dK (the epilogue reads acc_dk)
    release_stage(smem, prev_stage);
    release_held(smem, held);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (bulk_dq && tid == 0) bulk_wait_read();  // the CTA's shared memory outlives the reads
#endif
  }
};

}  // namespace flashkit::cuda::attn::sm90
