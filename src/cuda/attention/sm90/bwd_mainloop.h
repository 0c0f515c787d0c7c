// FlashAttention backward mainloop for Hopper (FA2 Algorithm 2 on wgmma, FA3's backward shape):
// one CTA per K/V block of 128 keys (64 at hdim 256: kSplitD). The producer warp loads K and V
// once by TMA, then streams Q, dO (TMA) and the rows' LSE and D (bulk copies of the preprocess's
// row_chunk blocks) of every query block, of every query head sharing the KV head, through a ring
// of mbarrier stages. Two
// consumer warpgroups own 64 keys each and compute the products transposed, keys along M:
// S^T = K Q^T and dP^T = V dO^T from shared memory, P^T and dS^T in registers, which are then
// directly the A operands of dV += P^T dO and dK += dS^T Q; dS^T also goes to shared memory for
// dQ = dS K (both warpgroups' keys form its reduction), which is added in fp32 to the scratch
// accumulator by one bulk reduce per query block (deterministic runs: atomics in key-block turns).
// kSplitD (hdim 256, where 64 keys x 256 columns of dK and dV fill a warpgroup's registers): the
// block's 64 keys are shared and each warpgroup owns one gradient (mma_owner): warpgroup 0
// computes S^T and P^T and accumulates dV += P^T dO, warpgroup 1 computes dP^T and dS^T (P^T
// handed over through shared memory) and accumulates dK += dS^T Q, both with A from registers;
// dQ comes from the row-parallel pass (sm90/bwd_dq.h), as fp32 adds of 64 KB per 64-key block
// were bound by the L2 (bench/NOTES-attention.md "dQ pass").
// Dense or varlen batches (seq_bounds).
// Every score policy (score_policy.h): the general ones recompute P^T and dS^T with the forward's
// modifiers, masks and dropout bits through bwd_probs on the transposed tile, and both roles skip
// the (query block, key block) tiles a block mask drops.
#pragma once
#include <cmath>

#include "cuda/attention/cta_trace.h"
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
// dV's A operand (P^T, dS^T) from registers; or, kSplitD (both on the same 64 keys), one
// warpgroup's: each warpgroup runs one of S^T / dP^T and one of dV / dK over the whole tile.
template <class Element, bool kSplitD, int kBlockN, int kBlockM, int kHeadDim>
struct BwdMmas {
  using SdP = TiledMmaSS<Element, 2, kBlockN, kBlockM, kHeadDim>;
  using dKV = TiledMmaRS<Element, 2, kBlockN, kHeadDim, kBlockM>;
};
template <class Element, int kBlockN, int kBlockM, int kHeadDim>
struct BwdMmas<Element, true, kBlockN, kBlockM, kHeadDim> {
  using SdP = TiledMmaSS<Element, 1, kBlockN, kBlockM, kHeadDim>;
  using dKV = TiledMmaRS<Element, 1, kBlockN, kHeadDim, kBlockM>;
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
  // kSplitD computes no dQ: the row-parallel pass of sm90/bwd_dq.h does (bench/NOTES-
  // attention.md "dQ pass": fp32 adds of 64 KB per 64-key block were bound by the L2).
  // kSplitD's P^T hand-over (mma_dk_owner) relies on two stages: warpgroup 0 can fill buffer
  // j % 2 again only after the stage of step j + 2 (= step j's) is back, which warpgroup 1 gives
  // after reading P^T(j); with a third stage it could overwrite it unread and run its mbarrier a
  // phase ahead.
  static_assert(!kSplitD || kStages == 2, "the owners' P^T hand-over assumes two stages");

  // S^T, dP^T: (keys x queries) over hdim; dK, dV: (keys x hdim) over queries, A from registers,
  // B (Q, dO) read MN-major; dQ: (queries x hdim) over keys, both operands MN-major. dQ's 2
  // warpgroups split its rows (128 queries). kSplitD: each warpgroup runs one of S^T / dP^T over
  // the whole tile and owns one of dV / dK over the whole head dim (A from registers); no dQ.
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
  static constexpr int kZeroFloats = 1024;  // 4 KB of zeros, the source of zero-ahead's stores
  static_assert(kSplitD || kDqFloats % kZeroFloats == 0);

  using TmaQ =
      decltype(make_tma_copy(SM90_TMA_LOAD{}, gmem_tensor<Element>(nullptr, 0, 0, 0, 0, {}),
                             SmemTile<Element, kBlockM, kHeadDim>{}, TileQ{}, _1{}));
  using TmaKV =
      decltype(make_tma_copy(SM90_TMA_LOAD{}, gmem_tensor<Element>(nullptr, 0, 0, 0, 0, {}),
                             SmemTile<Element, kBlockN, kHeadDim>{}, TileKV{}, _1{}));

  struct SharedStorage {
    alignas(1024) Element q[cosize_v<LayoutQ>];
    alignas(1024) Element d_o[cosize_v<LayoutQ>];
    alignas(1024) Element k[cosize_v<LayoutKV>];  // kSplitD: dK after the mainloop (epilogue)
    alignas(1024) Element v[cosize_v<LayoutKV>];  // kSplitD: dV after the mainloop
    // dS^T's buffers of LayoutdS; kSplitD: P^T's hand-over buffers (fragment order); after the
    // mainloop (not kSplitD) dK's tile, and at hdim 64 dV's after it
    alignas(1024) Element ds[kDsBuffers * cosize_v<LayoutdS>];
    // one query block's dQ in dq_chunk order; after the mainloop (hdim 128) dV's tile
    alignas(kSplitD ? 128 : 1024) float dq[kSplitD ? 4 : kDqFloats];
    alignas(128) float zeros[kSplitD ? 4 : kZeroFloats];  // zero-ahead's source (zero_ahead)
    alignas(16) float lse_log2[kStages][kBlockM];
    alignas(16) float dsum[kStages][kBlockM];
    typename Ring::Storage ring;
    alignas(8) uint64_t kv_full;
    alignas(8) uint64_t pt_full[kSplitD ? kDsBuffers : 1];  // kSplitD: P^T of a block handed over
  };

  // Where the epilogue stages dK and dV for their TMA stores: in dS^T's buffers and dQ's staging
  // block, free once the mainloop's GEMMs and bulk reduces are done (the configuration measured
  // with the kernel's opaque thread index, bench/NOTES-attention.md v10); kSplitD (hdim 256,
  // whose hand-over buffers are too small) over K and V themselves.
  static constexpr bool kDvInDs = 2 * kBytesKV <= kDsBuffers * cosize_v<LayoutdS> * sizeof(Element);
  static_assert(kSplitD || kBytesKV <= kDsBuffers * cosize_v<LayoutdS> * sizeof(Element),
                "dK's tile fits dS^T's buffers");
  static_assert(kSplitD || kDvInDs || kBytesKV <= kDqFloats * sizeof(float),
                "dV's tile fits dS^T's buffers or dQ's staging block");
  static_assert(kBytesKV % 1024 == 0, "the 128-byte swizzle's atoms stay 1024-byte aligned");
  __device__ static Element* dk_stage(SharedStorage& smem) { return kSplitD ? smem.k : smem.ds; }
  __device__ static Element* dv_stage(SharedStorage& smem) {
    if constexpr (kSplitD) return smem.v;
    else if constexpr (kDvInDs) return smem.ds + kBlockN * kHeadDim;
    else return reinterpret_cast<Element*>(smem.dq);
  }

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
      return tma_copy_of<Element>(SM90_TMA_LOAD{}, a, x, heads, keys, s, smem, tile);
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
    if constexpr (kSplitD)
      for (int i = 0; i < kDsBuffers; ++i) Ring::Barrier::init(&smem.pt_full[i], kConsumerThreads / 2);
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
    LiveCursor cur;  // the block mask's last ballot over this walk's steps
    __device__ int at(int i) const { return begin + (i + rot < count ? i + rot : i + rot - count); }
    __device__ int next(int i) {
      return pol.template next_live_query<kBlockM, kBlockN>(
          i, count, [&](int j) { return at(j); }, n_block, cur);
    }
  };

  // Zero-ahead (p.ws.zero_count set; dense, non-deterministic, hdim 64 / 128). The launch order
  // (grouped_tile) runs the CTAs of G = p.ws.zero_group (batch, KV head) pairs at a time, every
  // CTA of group g before any of group g + 1. The producer's second warp of each CTA of group g
  // zeroes the CTA's share of group g + k's dQ chunks (k = p.ws.zero_ahead: about a wave of CTAs
  // ahead) by bulk stores from a zeroed shared buffer, issued once the CTA's K and V have landed,
  // and once the stores have landed counts the CTA in zero_count[g + k]; the loads of a CTA of
  // group g >= k wait, before its first Q / dO (so before any dQ add of its consumers), until
  // all of group g - k's CTAs have counted in. The first k groups' chunks come zeroed from the
  // preprocess. A CTA waits only on CTAs launched before it, whose counts depend on nothing else
  // (the in-order launch deterministic runs rely on too), so the waits cannot deadlock, and past
  // the first wave the zeroing CTAs started a wave earlier. The preprocess no longer writes the
  // whole accumulator (half its bytes) before the main kernel (bench/NOTES-attention.md v13).
  // CTAs of a group: its pairs' key blocks.
  __device__ static int zero_group_ctas(const Params& p) {
    return p.ws.zero_group * ceil_div(p.seqlen_k, kBlockN);
  }
  __device__ static void zero_ahead(const Params& p, SharedStorage& smem, const WorkTile& w) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if constexpr (!kSplitD) {
      if (!p.ws.zero_count) return;
      float4* z = reinterpret_cast<float4*>(smem.zeros);
      for (int i = threadIdx.x % 32; i < kZeroFloats / 4; i += 32)
        z[i] = make_float4(0.f, 0.f, 0.f, 0.f);
      fence_shared_to_async();
      __syncwarp();
      if (!cute::elect_one_sync()) return;
      // After the CTA's own K and V have landed: its first loads go first.
      Ring::Barrier::wait(&smem.kv_full, 0);
      const int G = p.ws.zero_group, ctas = zero_group_ctas(p);
      const int kv_heads = p.heads / p.h_ratio, pairs = p.batch * kv_heads;
      const int target = w.index / ctas + p.ws.zero_ahead, first = target * G;
      if (first >= pairs) return;  // the last k groups: nothing k groups after them
      const int size = min(G, pairs - first);  // groups before the last are whole
      const int in = w.index % ctas, per_pair = p.h_ratio * p.num_m_blocks;
      for (int c = in; c < size * per_pair; c += ctas) {  // chunks in, in + ctas, ...
        const int pair = first + c / per_pair, rem = c % per_pair;
        const int b = pair / kv_heads, h = (pair % kv_heads) * p.h_ratio + rem / p.num_m_blocks;
        float* dst = sm80::dq_chunk<kBlockM, kHeadDim>(p.ws.dq_accum, int64_t(b) * p.seqlen_q, b,
                                                       rem % p.num_m_blocks, h, p.heads);
        for (int off = 0; off < kDqFloats; off += kZeroFloats)
          bulk_store(dst + off, smem.zeros, kZeroFloats * sizeof(float));
      }
      bulk_commit();
      bulk_wait_done();  // landed, not just read
      fence_global_async();
      fetch_add_acq_rel(p.ws.zero_count + target, 1);
    }
#endif
  }
  // The producer's walking lanes (the leader polls): this CTA's group's chunks are zeroed.
  __device__ static void zero_ahead_wait(const Params& p, const WorkTile& w, bool leader) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if constexpr (!kSplitD) {
      if (!p.ws.zero_count) return;
      const int per_group = zero_group_ctas(p), group = w.index / per_group;
      if (group < p.ws.zero_ahead) return;  // the preprocess zeroed it
      if (leader) {
        while (load_acquire(p.ws.zero_count + group) < per_group) __nanosleep(64);
        fence_global_async();
      }
      __syncwarp(__activemask());
    }
#endif
  }

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
    zero_ahead_wait(p, w, leader);

    auto cq = p.tma_q.get_slice(_0{});
    auto cdo = p.tma_do.get_slice(_0{});
    Tensor tQs = cq.partition_D(make_tensor(make_smem_ptr(smem.q), LayoutQ{}));  // (TMA, .., stage)
    Tensor tdOs = cdo.partition_D(make_tensor(make_smem_ptr(smem.d_o), LayoutQ{}));
    const int64_t token0 = sb.q_token(b);
    for (int g = 0; g < p.h_ratio; ++g) {
      const int h = kv_head * p.h_ratio + g;
      const Policy pol(p.score, sb, b, h, p.scale);
      QueryWalk walk(p, pol, w.block);
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

  // Thread 0 of the consumers, which issued every dQ bulk reduce of the CTA, counts the key block
  // in for each query head of its KV head once those reduces have completed (a completed bulk
  // reduce is visible to this thread's generic proxy; the add releases it to the conversion's
  // acquire). kPending: bulk groups issued since (the epilogue's stores) that may stay in flight.
  template <int kPending>
  __device__ static void signal_dq_ready(const Params& p, const WorkTile& w, int tid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (!p.ws.dq_ready || tid != 0) return;
    asm volatile("cp.async.bulk.wait_group %0;" ::"n"(kPending) : "memory");
    int* count = p.ws.dq_ready + int64_t(w.batch) * p.heads + int64_t(w.head) * p.h_ratio;
    for (int g = 0; g < p.h_ratio; ++g) fetch_add_acq_rel(count + g, 1);
#endif
  }

  // Releases a stage held past its block (stage >= 0).
  __device__ static void release_stage(SharedStorage& smem, int stage) {
    if (stage >= 0) Ring::consumer_release(smem.ring, stage);
  }

  // ---- kSplitD (hdim 256): one gradient per warpgroup (bench/NOTES-attention.md "owners") ----
  // The (head of the group g, walk index i) steps of the key block in the producer's order: seek
  // moves (g, i) to the first live step at or after it (false past the last).
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
        QueryWalk walk(p, pol, n_block);
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
  // P^T's hand-over buffer `buf` seen by thread t: [16-byte chunk j][thread] (conflict-free).
  __device__ static uint4* pt_slot(SharedStorage& smem, int buf, int t) {
    return reinterpret_cast<uint4*>(smem.ds + buf * cosize_v<LayoutdS>) + t;
  }

  // The pipeline both owners run over the key block's steps: per step j, `first(acc_x, stage)`
  // issues S^T or dP^T, `elementwise(acc_x, g, i, stage, j)` turns it into the bf16 A operand of
  // `second(r, stage)`, which issues dV or dK. Step j+1's first GEMM is issued before waiting for
  // step j's second, whose completion gives the stage back (a whole step before the producer
  // needs it again). The first step is peeled so that every wait is unconditional (a wait under a
  // run-time condition makes ptxas serialise every wgmma). This and both owners are forced
  // inline: where ptxas called one instead (the softcap kernel with by_mask), the 128-float
  // accumulator went to local memory (bench/NOTES-attention.md, session 39 v4).
  template <class Acc, class TiledMma, class First, class Elementwise, class Second>
  __device__ __forceinline__ static void owner_pipeline(SharedStorage& smem, const Steps& steps,
                                                        Acc& acc, typename Ring::State& st,
                                                        const TiledMma& mma, First&& first,
                                                        Elementwise&& elementwise,
                                                        Second&& second) {
    Ring::Barrier::wait(&smem.kv_full, 0);
    int g = 0, i = 0;
    if (!steps.seek(g, i)) return;
    int stage = st.stage, j = 0;
    Ring::consumer_wait(smem.ring, st);
    FK_BWD_TRACE_MARK(0, kBwdTraceFirstData);
    Tensor acc_x = partition_fragment_C(mma, Shape<Int<kBlockN>, Int<kBlockM>>{});
    first(acc_x, stage);
    warpgroup_wait<0>();
    auto r = elementwise(acc_x, g, i, stage, j);
    FK_BWD_TRACE_MARK(0, kBwdTraceFirstBlock);
    st.advance();
    for (++i; steps.seek(g, i); ++i) {
      second(r, stage);
      const int next = st.stage;
      Ring::consumer_wait(smem.ring, st);
      first(acc_x, next);
      warpgroup_wait<1>();  // the last step's second GEMM
      warpgroup_fence_operand(acc);
      Ring::consumer_release(smem.ring, stage);
      warpgroup_wait<0>();  // this step's first
      stage = next;
      r = elementwise(acc_x, g, i, stage, ++j);
      st.advance();
    }
    second(r, stage);
    warpgroup_wait<0>();
    FK_BWD_TRACE_MARK(0, kBwdTraceLoopEnd);
    warpgroup_fence_operand(acc);
    Ring::consumer_release(smem.ring, stage);
  }

  // Warpgroup 0 owns dV (acc, all of hdim): S^T = K Q^T, P^T in registers, handed over to
  // warpgroup 1 in buffer j % 2 (whose previous content warpgroup 1 read before it gave back the
  // stage this step's load waited for), dV += P^T dO with A = P^T from registers.
  template <class Acc>
  __device__ __forceinline__ static void mma_dv_owner(const Params& p, SharedStorage& smem,
                                                      const WorkTile& w, const Steps& steps,
                                                      Acc& acc, typename Ring::State& st, int t) {
    // Masks, window or ALiBi hand over P^T; softcap alone P^T (1 - t^2) instead, dS^T's factor
    // that does not depend on dP^T.
    static_assert(Policy::kSlimScores, "P^T is handed over, not the policy's per-score state");
    TiledMmaSdP mma;
    TiledMmadKV mma_kv;
    auto thr = mma.get_thread_slice(t);
    Tensor tSrK = thr.partition_fragment_A(make_tensor(make_smem_ptr(smem.k), LayoutKV{})(_, _, 0));
    Tensor tSrQ = thr.partition_fragment_B(make_tensor(make_smem_ptr(smem.q), LayoutQ{}));
    Tensor tdVrdOt = mma_kv.get_thread_slice(t).partition_fragment_B(
        make_tensor(make_smem_ptr(smem.d_o), LayoutQt{}));
    auto qk = make_layout(Shape<Int<kBlockN>, Int<kBlockM>>{}, make_stride(E<1>{}, E<0>{}));
    Tensor tScS = colrow_view(thr.partition_C(make_coord_tensor(qk)));
    using Coord = decltype(tScS);
    owner_pipeline(
        smem, steps, acc, st, mma,
        [&](auto& acc_s, int stage) { wgmma<true>(mma, tSrK, tSrQ(_, _, _, stage), acc_s); },
        [&](auto& acc_s, int g, int i, int stage, int j) {
          warpgroup_fence_operand(acc_s);
          const Policy pol = steps.policy(g);
          const int m = steps.block(g, i);
          const QueryStat<Coord> lse{smem.lse_log2[stage], tScS};
          Tensor s = colrow_view(acc_s);
          const bool mask = pol.template bwd_needs_mask<kBlockM, kBlockN>(m, w.block);
          // The 16-bit tile for warpgroup 1 into buffer j % 2, announced.
          auto hand_over = [&](const auto& frag) {
            const uint4* src = reinterpret_cast<const uint4*>(raw_pointer_cast(frag.data()));
            uint4* dst = pt_slot(smem, j & 1, t);
            CUTE_UNROLL
            for (int k = 0; k < int(size(frag)) / 8; ++k) dst[k * 128] = src[k];
            Ring::Barrier::arrive(&smem.pt_full[j & 1]);
          };
          if constexpr (!Policy::kBoundedLogits) {
            by_mask<Policy>(mask, [&](auto masked) {
              pol.template bwd_p<true>(s, tScS, m * kBlockM, w.block * kBlockN, masked,
                                       p.scale_log2, lse);
            });
            Tensor rP = sm80::convert<Element>(acc_s);
            hand_over(rP);
            return rP;
          } else {  // softcap: P^T (1 - t^2) handed over (stored before P^T's conversion)
            Tensor rPd = make_fragment_like<Element>(acc_s);
            Tensor pd = colrow_view(rPd);
            by_mask<Policy>(mask, [&](auto masked) {
              pol.bwd_p_with(
                  s, tScS, m * kBlockM, w.block * kBlockN, masked, p.scale_log2, lse,
                  [&](int r, int c, float t) { pd(r, c) = Element(s(r, c) * (1.f - t * t)); });
            });
            hand_over(rPd);
            return sm80::convert<Element>(acc_s);
          }
        },
        [&](auto& rP, int stage) { a_reg_gemm(mma_kv, rP, tdVrdOt(_, _, _, stage), acc); });
  }

  // Warpgroup 1 owns dK: dP^T = V dO^T, then (P^T handed over: buffer j % 2's barrier completes
  // its (j / 2)-th phase) dS^T = P^T (dP^T - D) in registers and dK += dS^T Q. It gives a stage
  // back before waiting for the next P^T, so warpgroup 0, which needs that stage for its next
  // step, is never two hand-overs ahead on one buffer.
  template <class Acc>
  __device__ __forceinline__ static void mma_dk_owner(SharedStorage& smem, const Steps& steps,
                                                      Acc& acc, typename Ring::State& st, int t) {
    TiledMmaSdP mma;
    TiledMmadKV mma_kv;
    auto thr = mma.get_thread_slice(t);
    Tensor tdPrV = thr.partition_fragment_A(make_tensor(make_smem_ptr(smem.v), LayoutKV{})(_, _, 0));
    Tensor tdPrdO = thr.partition_fragment_B(make_tensor(make_smem_ptr(smem.d_o), LayoutQ{}));
    Tensor tdKrQt = mma_kv.get_thread_slice(t).partition_fragment_B(
        make_tensor(make_smem_ptr(smem.q), LayoutQt{}));
    auto qk = make_layout(Shape<Int<kBlockN>, Int<kBlockM>>{}, make_stride(E<1>{}, E<0>{}));
    Tensor tScS = colrow_view(thr.partition_C(make_coord_tensor(qk)));
    using Coord = decltype(tScS);
    owner_pipeline(
        smem, steps, acc, st, mma,
        [&](auto& acc_dp, int stage) { wgmma<true>(mma, tdPrV, tdPrdO(_, _, _, stage), acc_dp); },
        [&](auto& acc_dp, int, int, int stage, int j) {
          Tensor rP = make_fragment_like<Element>(acc_dp);
          Ring::Barrier::wait(&smem.pt_full[j & 1], uint32_t(j >> 1) & 1);
          uint4* dst = reinterpret_cast<uint4*>(raw_pointer_cast(rP.data()));
          const uint4* src = pt_slot(smem, j & 1, t);
          CUTE_UNROLL
          for (int k = 0; k < int(size(rP)) / 8; ++k) dst[k] = src[k * 128];
          warpgroup_fence_operand(acc_dp);
          const QueryStat<Coord> d_row{smem.dsum[stage], tScS};
          Tensor dp = colrow_view(acc_dp);
          Tensor pt = colrow_view(rP);
          CUTE_UNROLL
          for (int r = 0; r < size<0>(dp); ++r) {
            CUTE_UNROLL
            for (int c = 0; c < size<1>(dp); ++c) dp(r, c) = float(pt(r, c)) * (dp(r, c) - d_row[r]);
          }
          return sm80::convert<Element>(acc_dp);
        },
        [&](auto& rdS, int stage) { a_reg_gemm(mma_kv, rdS, tdKrQt(_, _, _, stage), acc); });
  }

  // acc += A B with A an accumulator-shaped bf16 fragment in registers (P^T or dS^T).
  template <class TiledMma, class Frag, class FragB, class Acc>
  __device__ static void a_reg_gemm(TiledMma& mma, Frag& r, const FragB& b, Acc& acc) {
    Tensor a = make_tensor(r.data(), acc_as_a(r.layout()));
    warpgroup_fence_operand(a);
    wgmma<false>(mma, a, b, acc);
    warpgroup_fence_operand(a);
  }

  // kSplitD consumers: warpgroup 0 accumulates dV, warpgroup 1 dK (unscaled), each in `acc`.
  template <class Acc>
  __device__ static void mma_owner(const Params& p, SharedStorage& smem, const WorkTile& w,
                                   const SeqBounds& sb, Acc& acc, typename Ring::State& st,
                                   int tid) {
    clear(acc);
    const Steps steps{p, sb, w.batch, w.head, w.block};
    if (cutlass::canonical_warp_group_idx() == 1) mma_dv_owner(p, smem, w, steps, acc, st, tid);
    else mma_dk_owner(smem, steps, acc, st, tid - 128);
  }

  template <class AccKV>
  __device__ static void mma(const Params& p, SharedStorage& smem, const WorkTile& w,
                             const SeqBounds& sb, AccKV& acc_dk, AccKV& acc_dv,
                             typename Ring::State& st, int tid) {
    static_assert(!kSplitD, "kSplitD runs mma_owner");
    clear(acc_dk);
    clear(acc_dv);
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

    const bool bulk_dq = !p.deterministic;
    const int wg = cutlass::canonical_warp_group_idx() - 1;  // keys [64 wg, 64 wg + 64) of the tile
    const int64_t token0 = sb.q_token(b);
    // At block_m 64, dK's GEMM of a query block completes during the next block's S^T (wgmma
    // batches complete in order), so its stage is released there: prev_stage, -1 before the first
    // block. At 128 (hdim 64) dS^T held for it beside S^T and dP^T makes ptxas serialise the
    // wgmmas, so each block waits for its dK.
    int prev_stage = -1;
    int ds_buf = 0;  // dS^T's buffer of the block
    Ring::Barrier::wait(&smem.kv_full, 0);
    for (int g = 0; g < p.h_ratio; ++g) {
      const int h = w.head * p.h_ratio + g;
      const Policy pol(p.score, sb, b, h, p.scale);
      QueryWalk walk(p, pol, n_block);
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
        const bool mask = pol.template bwd_needs_mask<kBlockM, 64>(m, 2 * n_block + wg);
        const QueryStat<Coord> lse{smem.lse_log2[stage], tScS}, d_row{smem.dsum[stage], tScS};
        if constexpr (kOverlapP) {
          warpgroup_wait<1>();
          warpgroup_fence_operand(acc_s);
          release_stage(smem, prev_stage);
          const auto keep = by_mask<Policy>(mask, [&](auto masked) {
            return pol.template bwd_p<true>(s, tScS, m * kBlockM, n_block * kBlockN, masked,
                                            p.scale_log2, lse);
          });
          warpgroup_wait<0>();
          warpgroup_fence_operand(acc_dp);
          pol.template bwd_ds<true>(s, dp, tScS, d_row, keep);
        } else {
          warpgroup_wait<0>();
          by_mask<Policy>(mask, [&](auto masked) {
            pol.template bwd_probs<true>(s, dp, tScS, m * kBlockM, n_block * kBlockN, masked,
                                         p.scale, p.scale_log2, lse, d_row);
          });
        }
        Tensor rP = sm80::convert<Element>(acc_s);
        Tensor rdS = sm80::convert<Element>(acc_dp);
        Tensor tdVrP = make_tensor(rP.data(), acc_as_a(rP.layout()));
        warpgroup_fence_operand(tdVrP);
        wgmma<false>(mma_dkv, tdVrP, tdVrdOt(_, _, _, stage), acc_dv);
        Tensor tdKrdS = make_tensor(rdS.data(), acc_as_a(rdS.layout()));

        // dS^T to shared memory for dQ = dS K (while dV's GEMM runs), into the buffer that both
        // warpgroups' dQ GEMMs read two blocks ago: each waited for its own, and the other one's
        // wait came before it arrived at the previous block's barrier below (so no barrier
        // here). The last bulk reduce must also have read the dQ staging buffer (thread 0 waits
        // before the barrier after the store). dQ's GEMM goes before dK's, so dQ is staged and
        // added while dK's runs (whose register operand rdS is not written meanwhile).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        if (bulk_dq && tid == 0) bulk_wait_read();
#endif
        Element* ds = smem.ds + ds_buf * cosize_v<LayoutdS>;
        copy(rdS, thr_sdp.partition_C(make_tensor(make_smem_ptr(ds), LayoutdS{})(_, _, 0)));
        cutlass::arch::fence_view_async_shared();
        sync_consumers();
        Tensor acc_dq = partition_fragment_C(mma_dq, TileQ{});
        Tensor tdQrdS = thr_dq.partition_fragment_A(make_tensor(make_smem_ptr(ds), LayoutdSt{})(_, _, 0));
        wgmma<true>(mma_dq, tdQrdS, tdQrKt, acc_dq);
        warpgroup_fence_operand(tdKrdS);
        wgmma<false>(mma_dkv, tdKrdS, tdKrQt(_, _, _, stage), acc_dk);
        warpgroup_wait<1>();
        warpgroup_fence_operand(tdVrP);
        warpgroup_fence_operand(acc_dq);

        float* dq_dst = sm80::dq_chunk<kBlockM, kHeadDim>(p.ws.dq_accum, token0, b, m, h, p.heads);
        if (bulk_dq) {
          sm80::stage_dq<kConsumerThreads>(smem.dq, acc_dq, tid);
          sync_consumers();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
          if (tid == 0) bulk_reduce_add_f32(dq_dst, smem.dq, kDqFloats * sizeof(float));
#endif
        } else {
          sm80::add_dq<kConsumerThreads>(acc_dq, dq_dst, semaphore ? semaphore + m : nullptr,
                                         pol.template dq_turn<kBlockM, kBlockN>(m, n_block), tid,
                                         [] { sync_consumers(); });
        }
        ds_buf ^= 1;
        if constexpr (kOverlapP) {
          prev_stage = stage;
        } else {
          warpgroup_wait<0>();
          warpgroup_fence_operand(tdKrdS);
          Ring::consumer_release(smem.ring, st);
        }
        st.advance();
      }
    }
    warpgroup_wait<0>();  // the last dK (the epilogue reads acc_dk)
    release_stage(smem, prev_stage);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (bulk_dq && tid == 0) bulk_wait_read();  // the CTA's shared memory outlives the reads
#endif
  }
};

}  // namespace flashkit::cuda::attn::sm90
