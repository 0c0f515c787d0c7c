// FlashAttention forward mainloop for Hopper (FA3's structure, dense or varlen): the producer warp
// brings Q and a ring of K and V tiles into swizzled shared memory with TMA; two or three
// consumer warpgroups (64 query rows each) run S = Q K^T on wgmma from shared memory, the online softmax
// in registers (the scale folded into exp2), and O += P V with P straight from registers, the
// softmax of one key block overlapping the P V product of the previous one.
// The score Policy (score_policy.h: PlainScores or GeneralScores, the sm80 forward's hooks) picks
// the key blocks (block-sparse skips included), masks and modifies scores, and drops P.
// Q's buffer passes between producer and consumers through q_full / q_empty; with kOInQ (hdim
// 256, where a separate O tile does not fit) the epilogue stages O in it and frees it only once
// the TMA store has read O, so every tile, one without live key blocks too, takes it in turn.
#pragma once

// sm90 forward v6 knobs (bench/NOTES-attention.md; A/B'd with bench/sm90_fwd_ab.cu), applied
// where two consumer warpgroups ping-pong (hdim 128 and 256; measured no gain at hdim 64's three):
// the softmax's tree reductions and lazy rescale past FWD_LAZY log2 units (online_softmax.h)
// and FWD_PIN, the P V wait kept after the exponentials.
#ifndef FLASHKIT_SM90_FWD_TREE
#define FLASHKIT_SM90_FWD_TREE 1
#endif
#ifndef FLASHKIT_SM90_FWD_LAZY
#define FLASHKIT_SM90_FWD_LAZY 8
#endif
// The fp8 forward's lazy rescale threshold (log2 units; 0: O and l rescaled whenever a row's max
// grows). Off: with a stale max the largest P of a row is not 1 but up to 2^8, and its e4m3
// rounding (up to 6%) lands on the key that dominates the row (an attention sink): measured rms
// error -8%, max error up to -35%, for 4-8% of the speed (bench/NOTES-attention.md).
#ifndef FLASHKIT_SM90_FP8_LAZY
#define FLASHKIT_SM90_FP8_LAZY 0
#endif
// The fp8 forward skips O's rescale in a warp whose rows all kept their max (exact: every alpha
// is 1; with no lazy rescale it ran on every tile): +1-5% (bench/NOTES-attention.md).
#ifndef FLASHKIT_SM90_FP8_SKIP
#define FLASHKIT_SM90_FP8_SKIP 1
#endif
#ifndef FLASHKIT_SM90_FWD_PIN
#define FLASHKIT_SM90_FWD_PIN 1
#endif
// FWD_PIN_MASKS: FWD_PIN for block masks too. Off by default: without the pin the block-mask
// forward measured +2-4% at 4k-16k for density 0.1 at hdim 128 (+1-3% at hdim 64), level at
// 0.25 / 0.5, and between -5% and +3% over three calls for causal 0.1 at 2k-4k (H200, session
// 43, bench/NOTES-attention.md "The pin and block masks").
#ifndef FLASHKIT_SM90_FWD_PIN_MASKS
#define FLASHKIT_SM90_FWD_PIN_MASKS 0
#endif
// FWD_WG_SKIP (plain causal on 192-row query blocks): a consumer warpgroup skips the key blocks
// in which none of its 64 rows sees a key (on the diagonal, the first warpgroups' rows end before
// the last key block starts): 5% of the warpgroup-blocks at 2k, 0.8% at 16k; measured +3% at
// 2k-4k, +2% at 8k (bench/NOTES-attention.md v8).
#ifndef FLASHKIT_SM90_FWD_WG_SKIP
#define FLASHKIT_SM90_FWD_WG_SKIP 1
#endif
#include <cmath>
#include <type_traits>

#include "cuda/attention/params.h"
#include "cuda/attention/score_policy.h"
#include "cuda/attention/seqlen.h"
#include "cuda/attention/online_softmax.h"
#include "cuda/attention/sm90/fp8.h"
#include "cuda/attention/sm90/pipeline.h"
#include "cuda/attention/sm90/traits.h"
#include "cuda/attention/tile_scheduler.h"

namespace flashkit::cuda::attn::sm90 {

// FLASHKIT_SM90_FWD_TRACE (A/B harness builds only, bench/sm90_fwd_ab.cu): clock64 of CTA 0's
// consumer warpgroups at the phases of each of its first kTraceTiles tiles, into fwd_trace
// (stamp 8: mma's entry; 9: the policy and key range made; 7: after the tile's first key-block
// walk).
#ifdef FLASHKIT_SM90_FWD_TRACE
constexpr int kTraceTiles = 64, kTraceStamps = 10;
__device__ long long fwd_trace[3][kTraceTiles][kTraceStamps];
__device__ __forceinline__ void fwd_stamp(int tid, int tile, int i, long long v = -1) {
  if (blockIdx.x == 0 && tid % 128 == 0 && tile < kTraceTiles)
    fwd_trace[tid / 128][tile][i] = v < 0 ? clock64() : v;
}
#define FK_FWD_STAMP(...) fwd_stamp(__VA_ARGS__)
// The steady key loop's phases, summed over CTA 0's tiles (cycles, per consumer warpgroup): turn
// wait, K wait + S issue, V wait + P V issue, next-block walk, S wait, softmax, P V wait, rescale.
// Summed in registers over a tile's blocks and added to fwd_loop_phase once a tile
// (FK_FWD_PHASE_FLUSH), so no memory access sits inside the timed phases.
__device__ long long fwd_loop_phase[3][8];
#define FK_FWD_PHASES long long fk_phase[8] = {0, 0, 0, 0, 0, 0, 0, 0}
#define FK_FWD_CLOCK(t) const long long t = clock64()
#define FK_FWD_PHASE(i, t) (fk_phase[i] += clock64() - (t))
#define FK_FWD_PHASE_FLUSH(tid)                                                           \
  do {                                                                                    \
    if (blockIdx.x == 0 && (tid) % 128 == 0)                                              \
      for (int fk_i = 0; fk_i < 8; ++fk_i) fwd_loop_phase[(tid) / 128][fk_i] += fk_phase[fk_i]; \
  } while (0)
#else
#define FK_FWD_STAMP(...) ((void)0)
#define FK_FWD_PHASES ((void)0)
#define FK_FWD_CLOCK(t) ((void)0)
#define FK_FWD_PHASE(...) ((void)0)
#define FK_FWD_PHASE_FLUSH(tid) ((void)0)
#endif

// Global tensors as TMA sees them: (seqlen, hdim, heads, batch), hdim contiguous. The extent in
// hdim is the real head dim, so TMA zero-fills a bucket's tail columns and rows past the end.
// Varlen tensors [tokens, heads, hdim] are one batch entry of all tokens (`rows`); a sequence is
// reached by offsetting the tile coordinates by its first token (cu_seqlens), so a tile may read
// rows of the next sequence: the masks hide those keys (P = 0 against their V rows) and the
// epilogue does not store those query rows.
using GmemShape = Shape<int, int, int, int>;
using GmemStride = Stride<int64_t, _1, int64_t, int64_t>;

struct GmemExtent {
  int rows, batch;  // dense: (seqlen, batch); varlen: (tokens, 1)
  Strides stride;   // varlen: batch stride = row stride (unused; TMA wants multiples of 16 B)
};
inline GmemExtent gmem_extent(const AttnArguments& a, bool keys, const Strides& s) {
  if (!a.cu_seqlens_q) return {keys ? a.seqlen_k : a.seqlen_q, a.batch, s};
  return {keys ? a.total_k : a.total_q, 1, {s.row, s.row, s.head}};
}

template <class Element>
CUTE_HOST_DEVICE auto gmem_tensor(const Element* p, int rows, int hdim, int heads, int batch,
                                  const Strides& s) {
  return make_tensor(make_gmem_ptr(p), GmemShape{rows, hdim, heads, batch},
                     GmemStride{s.row, _1{}, s.head, s.batch});
}
template <class Element>
auto gmem_tensor(const void* p, int hdim, int heads, const GmemExtent& e) {
  return gmem_tensor(static_cast<const Element*>(p), e.rows, hdim, heads, e.batch, e.stride);
}
// The TMA copy (op: SM90_TMA_LOAD or SM90_TMA_STORE) of one of the problem's tensors, `x` with
// `heads` heads over the key rows or the query rows and strides `s`, in `tile`s laid out as `smem`.
template <class Element, class Op, class Smem, class Tile>
auto tma_copy_of(Op op, const AttnArguments& a, const void* x, int heads, bool keys,
                 const Strides& s, Smem smem, Tile tile) {
  return make_tma_copy(op, gmem_tensor<Element>(x, a.head_dim, heads, gmem_extent(a, keys, s)),
                       smem, tile, _1{});
}

// Ping-pong between the consumer warpgroups (FA3 section 3.1), round robin over kWarpgroups:
// each issues its GEMMs only in its turn and passes the turn on right after, so one
// warpgroup's softmax runs while another's GEMMs occupy the tensor cores. One named barrier of
// 256 threads per warpgroup: a turn is a bar.sync on one's own (128 threads) matched by the
// previous warpgroup's bar.arrive (128 threads) when it passed the turn.
template <bool kEnabled, int kWarpgroups>
struct PingPong {
  static constexpr uint32_t kBarrier = 1;  // named barrier ids 1.. (0: the epilogue's)
  int wg;                                  // this consumer warpgroup, 0 .. kWarpgroups-1
  // Calls f(wg). With two warpgroups wg is a compile-time constant on each branch, so the barrier
  // ids are immediates, not registers kept (or spilled) across the mainloop (hdim 256: 9 -> 6
  // local loads per key block, 3 -> 0 stores); with three the branches cost the 160-register
  // hdim 64 kernel more spills than they save (60 -> 88 B), so it keeps the register.
  template <class F>
  __device__ __forceinline__ void with_wg(F f) const {
    if constexpr (kWarpgroups == 2) {
      if (wg == 0) f(_0{});
      else f(_1{});
    } else {
      f(wg);
    }
  }
  __device__ __forceinline__ void wait_turn() const {
    if constexpr (kEnabled)
      with_wg([](auto w) { cutlass::arch::NamedBarrier::sync(256, kBarrier + int(w)); });
  }
  __device__ __forceinline__ void pass_turn() const {
    if constexpr (kEnabled)
      with_wg([](auto w) {
        cutlass::arch::NamedBarrier::arrive(256, kBarrier + (int(w) + 1) % kWarpgroups);
      });
  }
  // Warpgroup 0 goes first; at the end it takes the last turn passed to it, so every arrival
  // is matched before the CTA exits.
  __device__ __forceinline__ void start() const {
    if (wg == kWarpgroups - 1) pass_turn();
  }
  __device__ __forceinline__ void finish() const {
    if (wg == 0) wait_turn();
  }
};

// V as the P V product's B operand, (hdim, keys, stage) in shared memory, and its TMA copy: the
// transposed view of V's (keys, hdim) tiles and V's own copy (16-bit types), or fp8's V^T
// [b, kv_heads, hdim, vt_keys] (sm90/fp8.h) in K-major (hdim, keys) tiles, seen by TMA as (hdim
// rows, vt_keys columns, heads, batch). Separate so that one branch's types are never formed for
// the other (V^T tiles of 80 keys do not exist).
template <bool kFp8, class Element, int kHeadDim, int kBlockN, int kStages>
struct FwdVOperand {
  using LayoutKV = SmemTiles<Element, kBlockN, kHeadDim, kStages>;
  using Layout = decltype(transposed_staged<LayoutKV, kBlockN, kHeadDim, kStages>(LayoutKV{}));
  template <class TmaKV>
  using Tma = TmaKV;
};
template <class Element, int kHeadDim, int kBlockN, int kStages>
struct FwdVOperand<true, Element, kHeadDim, kBlockN, kStages> {
  using Layout = SmemTiles<Element, kHeadDim, kBlockN, kStages>;
  template <class>
  using Tma = decltype(make_tma_copy(SM90_TMA_LOAD{}, gmem_tensor<Element>(nullptr, 0, 0, 0, 0, {}),
                                     SmemTile<Element, kHeadDim, kBlockN>{},
                                     Shape<Int<kHeadDim>, Int<kBlockN>>{}, _1{}));
};

template <class Element_, int kHeadDim_, int kBlockM_, int kBlockN_, int kStages_, bool kPingPong_,
          bool kOInQ_, class Policy_>
struct FwdMainloop {
  using Element = Element_;
  using Policy = Policy_;
  static constexpr int kHeadDim = kHeadDim_, kBlockM = kBlockM_, kBlockN = kBlockN_;
  static constexpr int kStages = kStages_;
  static constexpr bool kOInQ = kOInQ_;  // the epilogue stages O in Q's buffer
  static constexpr int kConsumerWarpgroups = kBlockM / 64;  // 64 query rows each
  using Turns = PingPong<kPingPong_, kConsumerWarpgroups>;
  static constexpr int kConsumerThreads = 128 * kConsumerWarpgroups;

  using TileQ = Shape<Int<kBlockM>, Int<kHeadDim>>;
  using TileKV = Shape<Int<kBlockN>, Int<kHeadDim>>;
  // FP8 (e4m3) inputs: V arrives as V^T in fp8.h's key order, O leaves as bf16; the descale
  // factors fold into the softmax scale (q, k) and the final O (v).
  static constexpr bool kFp8 = sizeof(Element) == 1;
  using OutElement = std::conditional_t<kFp8, cutlass::bfloat16_t, Element>;
  using TiledMmaQK = TiledMmaSS<Element, kConsumerWarpgroups, kBlockM, kBlockN, kHeadDim>;
  using TiledMmaPV = TiledMmaRS<Element, kConsumerWarpgroups, kBlockM, kHeadDim, kBlockN,
                                kFp8 ? GMMA::Major::K : GMMA::Major::MN>;
  using LayoutQ = SmemTile<Element, kBlockM, kHeadDim>;
  using LayoutKV = SmemTiles<Element, kBlockN, kHeadDim, kStages>;
  // V as the (hdim, keys, stage) B operand: a transposed view of V's tiles (16-bit), or V^T's
  // own K-major tiles (fp8).
  using LayoutVt = typename FwdVOperand<kFp8, Element, kHeadDim, kBlockN, kStages>::Layout;
  using TileVt = Shape<Int<kHeadDim>, Int<kBlockN>>;
  // A thread holds 2 rows of its warpgroup's 64.
  static constexpr bool kTwoWarpgroups = kConsumerWarpgroups == 2;
  static constexpr int kLazy = kFp8 ? FLASHKIT_SM90_FP8_LAZY : FLASHKIT_SM90_FWD_LAZY;
  using Softmax = OnlineSoftmax<2, kTwoWarpgroups && bool(FLASHKIT_SM90_FWD_TREE),
                                 kTwoWarpgroups ? kLazy : 0, kFp8 && bool(FLASHKIT_SM90_FP8_SKIP)>;
  // Keep wgmma.wait_group 0 (P V done) after the softmax's exponentials (see mma()); two
  // consumer warpgroups only (hdim 64's three at 160 registers spill with it); block masks only
  // with FWD_PIN_MASKS (above).
  static constexpr bool kExpsBeforePvWait = kTwoWarpgroups && FLASHKIT_SM90_FWD_PIN &&
                                            (FLASHKIT_SM90_FWD_PIN_MASKS || !Policy::kHasBlockMask);
  static constexpr bool kSkipMaskedWg = FLASHKIT_SM90_FWD_WG_SKIP && Policy::kPlain &&
                                        Policy::kCausal && kConsumerWarpgroups == 3 && !kOInQ;
  // Softcap's bounded softmax (OnlineSoftmax::update_bounded) lets P reach 2^40 and keeps a row's
  // largest P >= 2^-120: bf16 (fp32's exponent range) holds that, fp16 (max 65504) does not, so
  // fp16 keeps the running max.
  static constexpr bool kBoundedMax =
      Policy::kBoundedLogits && std::is_same_v<Element, cutlass::bfloat16_t>;
  // hdim 256 compiles the bounded softmax alone (the running max's registers would spill there);
  // the dispatch sends it only problems whose softcap the bound covers (bf16, softcap <= 55.4).
  static constexpr bool kBoundedOnly = kBoundedMax && kHeadDim > 128;
  // ALiBi's row part folded into the softmax (GeneralScores::fwd_scores_rows) up to hdim 128; at
  // hdim 256 its second copy of the score pass raised the spills from 12 to 84 bytes.
  static constexpr bool kRowOffsets = Policy::kRowOffsets && kHeadDim <= 128;
  using Ring = TmaRing<kStages>;
  static constexpr uint32_t kBytesQ = kBlockM * kHeadDim * sizeof(Element);
  static constexpr uint32_t kBytesKV = kBlockN * kHeadDim * sizeof(Element);

  using TmaQ = decltype(make_tma_copy(SM90_TMA_LOAD{}, gmem_tensor<Element>(nullptr, 0, 0, 0, 0, {}),
                                      LayoutQ{}, TileQ{}, _1{}));
  using TmaKV = decltype(make_tma_copy(SM90_TMA_LOAD{}, gmem_tensor<Element>(nullptr, 0, 0, 0, 0, {}),
                                       SmemTile<Element, kBlockN, kHeadDim>{}, TileKV{}, _1{}));
  using TmaV = typename FwdVOperand<kFp8, Element, kHeadDim, kBlockN, kStages>::template Tma<TmaKV>;

  struct SharedStorage {
    alignas(1024) Element q[cosize_v<LayoutQ>];
    alignas(1024) Element k[cosize_v<LayoutKV>];
    alignas(1024) Element v[cosize_v<LayoutVt>];
    typename Ring::Storage k_ring, v_ring;
    alignas(8) uint64_t q_full, q_empty;
  };

  struct Params {
    TmaQ tma_q;
    TmaKV tma_k;
    TmaV tma_v;
    const int *cu_seqlens_q, *cu_seqlens_k;  // null: dense
    int seqlen_q, seqlen_k, head_dim, heads, kv_heads, batch;
    int rows_q, rows_k, tma_batch;  // the TMA tensors' extents (GmemExtent)
    float scale, scale_log2;
    typename Policy::Params score;
    Descale q_descale, k_descale, v_descale;  // fp8 (params.h)
  };
  static Params to_params(const AttnArguments& a) {
    const GmemExtent eq = gmem_extent(a, false, a.q_stride), ek = gmem_extent(a, true, a.k_stride);
    const GmemExtent ev = gmem_extent(a, true, a.v_stride);
    using SmemKV = SmemTile<Element, kBlockN, kHeadDim>;
    auto tma_v = [&] {
      if constexpr (kFp8) {
        const bool varlen = a.cu_seqlens_k != nullptr;
        const int64_t keys = fp8_vt_cols(varlen, a.batch, a.seqlen_k, a.total_k);
        const Strides vt{a.kv_heads * a.head_dim * keys, keys, a.head_dim * keys};
        return make_tma_copy(SM90_TMA_LOAD{},
                             gmem_tensor(static_cast<const Element*>(a.vt), a.head_dim, int(keys),
                                         a.kv_heads, varlen ? 1 : a.batch, vt),
                             SmemTile<Element, kHeadDim, kBlockN>{}, TileVt{}, _1{});
      } else {
        return make_tma_copy(SM90_TMA_LOAD{}, gmem_tensor<Element>(a.v, a.head_dim, a.kv_heads, ev),
                             SmemKV{}, TileKV{}, _1{});
      }
    };
    return {make_tma_copy(SM90_TMA_LOAD{}, gmem_tensor<Element>(a.q, a.head_dim, a.heads, eq),
                          LayoutQ{}, TileQ{}, _1{}),
            make_tma_copy(SM90_TMA_LOAD{}, gmem_tensor<Element>(a.k, a.head_dim, a.kv_heads, ek),
                          SmemKV{}, TileKV{}, _1{}),
            tma_v(),
            a.cu_seqlens_q, a.cu_seqlens_k, a.seqlen_q, a.seqlen_k, a.head_dim, a.heads,
            a.kv_heads, a.batch, eq.rows, ek.rows, eq.batch, a.softmax_scale,
            a.softmax_scale * float(M_LOG2E), Policy::to_params(a),
            a.q_descale, a.k_descale, a.v_descale};
  }
  // Sequence w.batch's lengths and first tokens; a varlen grid covers the longest sequence, so
  // tiles past a shorter one's end are skipped by every role (`in_sequence`).
  __device__ static SeqBounds seq_bounds(const Params& p, const WorkTile& w) {
    return SeqBounds(p.cu_seqlens_q, p.cu_seqlens_k, w.batch, p.seqlen_q, p.seqlen_k);
  }
  __device__ static bool in_sequence(const SeqBounds& sb, const WorkTile& w) {
    return w.block * kBlockM < sb.seqlen_q;
  }

  // One thread, before the block-wide barrier that publishes it.
  __device__ static void init(SharedStorage& smem) {
    Ring::init(smem.k_ring, kConsumerThreads);
    Ring::init(smem.v_ring, kConsumerThreads);
    Ring::Barrier::init(&smem.q_full, 1);
    Ring::Barrier::init(&smem.q_empty, kConsumerThreads);
  }
  // Consumers, kOInQ: this thread no longer touches Q's buffer (the epilogue's O staged in it).
  __device__ static void release_q(SharedStorage& smem) { Ring::Barrier::arrive(&smem.q_empty); }
  __device__ static void prefetch_descriptors(const Params& p) {
    prefetch_tma_descriptor(p.tma_q.get_tma_descriptor());
    prefetch_tma_descriptor(p.tma_k.get_tma_descriptor());
    prefetch_tma_descriptor(p.tma_v.get_tma_descriptor());
  }

  // Where the two sides are in the rings, and how many Q tiles have gone through (Q's phase).
  struct PipelineState {
    typename Ring::State k, v;
    int q_tiles = 0;
  };

  __device__ static Policy policy(const Params& p, const SeqBounds& sb, const WorkTile& w) {
    return Policy(p.score, sb, w.batch, w.head, p.scale);
  }
  // The first key block to compute (blocks run last to first), below kr.begin when none is live;
  // each role walks a tile's blocks with its own cursor (the block mask's last ballot).
  __device__ static int first_live(const Policy& pol, const BlockRange& kr, int m_block,
                                   LiveCursor& c) {
    return pol.template prev_live<kBlockM, kBlockN>(m_block, kr.end - 1, kr.begin, c);
  }
  __device__ static int next_live(const Policy& pol, const BlockRange& kr, int m_block, int n,
                                  LiveCursor& c) {
    return pol.template prev_live<kBlockM, kBlockN>(m_block, n - 1, kr.begin, c);
  }
  // The key block computed at loop position n (positions run as above): n itself, or the
  // policy's order (GeneralScores::key_order: ALiBi from the diagonal outward). Producer and
  // consumers map the same positions, so the ring's stages stay in step.
  __device__ static int key_block(const Policy& pol, const BlockRange& kr, int m_block, int n) {
    return pol.template key_order<kBlockM, kBlockN>(m_block, kr, n);
  }

  // Producer (the whole warp: a block mask's skip scan is a warp ballot; `leader` issues every
  // wait and copy): Q once the consumers are done with the last one, then K and V of every live
  // key block, last to first, each as soon as its stage is free (with kOInQ Q after the first K).
  // With kOInQ a tile without live key blocks gets Q's buffer too (no copy: a bare arrival
  // completes q_full), for its epilogue.
  __device__ static void load(const Params& p, SharedStorage& smem, const WorkTile& w,
                              const SeqBounds& sb, PipelineState& st, bool leader) {
    const Policy pol = policy(p, sb, w);
    const BlockRange kr = pol.template key_blocks<kBlockM, kBlockN>(w.block);
    LiveCursor cur;
    int n = first_live(pol, kr, w.block, cur);
    const bool live = n >= kr.begin;
    if (!live && !kOInQ) return;
    const int kv_head = w.head / (p.heads / p.kv_heads);
    const int b = sb.varlen ? 0 : w.batch;
    Tensor mQ = p.tma_q.get_tma_tensor(GmemShape{p.rows_q, p.head_dim, p.heads, p.tma_batch});
    Tensor mK = p.tma_k.get_tma_tensor(GmemShape{p.rows_k, p.head_dim, p.kv_heads, p.tma_batch});
    // (row, col) coordinates start at the sequence's first token (0 when dense).
    auto seq_q = [&](auto t) { return domain_offset(make_coord(sb.q_start, _0{}), t); };
    auto seq_k = [&](auto t) { return domain_offset(make_coord(sb.k_start, _0{}), t); };
    Tensor gQ = local_tile(seq_q(mQ(_, _, w.head, b)), TileQ{}, make_coord(w.block, _0{}));
    Tensor gK = local_tile(seq_k(mK(_, _, kv_head, b)), TileKV{}, make_coord(_, _0{}));  // (BN, D, n)
    // V's tiles (BN, D, n), or fp8's V^T tiles (D, BN, n) (varlen: from the sequence's first
    // column, fp8_vt_start).
    auto gV = [&] {
      if constexpr (kFp8) {
        const int cols = int(fp8_vt_cols(sb.varlen, p.batch, p.seqlen_k, p.rows_k));
        Tensor mVt = p.tma_v.get_tma_tensor(GmemShape{p.head_dim, cols, p.kv_heads, p.tma_batch});
        const int col0 = sb.varlen ? int(fp8_vt_start(w.batch, sb.k_start)) : 0;
        return local_tile(domain_offset(make_coord(_0{}, col0), mVt(_, _, kv_head, b)), TileVt{},
                          make_coord(_0{}, _));
      } else {
        Tensor mV =
            p.tma_v.get_tma_tensor(GmemShape{p.rows_k, p.head_dim, p.kv_heads, p.tma_batch});
        return local_tile(seq_k(mV(_, _, kv_head, b)), TileKV{}, make_coord(_, _0{}));
      }
    }();
    Tensor sQ = make_tensor(make_smem_ptr(smem.q), LayoutQ{});
    Tensor sK = make_tensor(make_smem_ptr(smem.k), LayoutKV{});  // (BN, D, stage)
    Tensor sV = make_tensor(make_smem_ptr(smem.v), std::conditional_t<kFp8, LayoutVt, LayoutKV>{});
    auto cq = p.tma_q.get_slice(_0{});
    auto ck = p.tma_k.get_slice(_0{});
    auto cv = p.tma_v.get_slice(_0{});
    Tensor tKg = ck.partition_S(gK);  // (TMA, .., n)
    Tensor tKs = ck.partition_D(sK);  // (TMA, .., stage)
    Tensor tVg = cv.partition_S(gV);
    Tensor tVs = cv.partition_D(sV);

    auto load_q = [&] {
      if (leader) {
        Ring::Barrier::wait(&smem.q_empty, (st.q_tiles & 1) ^ 1);
        if (live) {
          Ring::Barrier::arrive_and_expect_tx(&smem.q_full, kBytesQ);
          copy(p.tma_q.with(smem.q_full), cq.partition_S(gQ), cq.partition_D(sQ));
        } else {
          Ring::Barrier::arrive(&smem.q_full);
        }
      }
      ++st.q_tiles;
    };
    // With kOInQ the buffer comes free only at the end of the last tile's epilogue: the first K
    // goes ahead of Q, so that its load overlaps that epilogue.
    if (!kOInQ || !live) load_q();
    for (bool first = true; n >= kr.begin; n = next_live(pol, kr, w.block, n, cur), first = false) {
      if (leader) {
        uint64_t& kb = Ring::producer_acquire(smem.k_ring, st.k, kBytesKV);
        copy(p.tma_k.with(kb), tKg(_, _, _, key_block(pol, kr, w.block, n)),
             tKs(_, _, _, st.k.stage));
      }
      if (kOInQ && first) load_q();
      if (leader) {
        uint64_t& vb = Ring::producer_acquire(smem.v_ring, st.v, kBytesKV);
        copy(p.tma_v.with(vb), tVg(_, _, _, key_block(pol, kr, w.block, n)),
             tVs(_, _, _, st.v.stage));
      }
      st.k.advance();
      st.v.advance();
    }
  }

  // Consumers (tid in [0, kConsumerThreads)): acc_o un-scaled O of the tile's rows, softmax its
  // stats. A tile whose rows see no key leaves acc_o = 0 and the stats empty (the epilogue writes
  // 0, -inf); with kOInQ it still waits for Q's buffer, where its epilogue stages those zeros.
  // trace_tile: the tile's index in this CTA, for FLASHKIT_SM90_FWD_TRACE's stamps (fwd_kernel.h).
  template <class AccO>
  __device__ static void mma(const Params& p, SharedStorage& smem, const WorkTile& w,
                             const SeqBounds& sb, AccO& acc_o, Softmax& softmax, PipelineState& st,
                             const Turns& turns, int tid, int trace_tile = 0) {
    (void)trace_tile;
    FK_FWD_STAMP(tid, trace_tile, 8);
    clear(acc_o);
    const Policy pol = policy(p, sb, w);
    const BlockRange kr = pol.template key_blocks<kBlockM, kBlockN>(w.block);
    // (the stamp's value depends on the policy and the range, so it is taken after both; both
    // are >= 0, so it is always -1: a clock read)
    FK_FWD_STAMP(tid, trace_tile, 9, (int(pol.seqlen_k) | kr.end) >= 0 ? -1 : 0);
    LiveCursor cur;
    int n = first_live(pol, kr, w.block, cur);
    FK_FWD_STAMP(tid, trace_tile, 7);
    if (n < kr.begin) {
      if constexpr (kOInQ) Ring::Barrier::wait(&smem.q_full, st.q_tiles++ & 1);
      return;
    }
    const int row0 = w.block * kBlockM;

    TiledMmaQK mma_qk;
    TiledMmaPV mma_pv;
    auto thr_qk = mma_qk.get_thread_slice(tid);
    Tensor sQ = make_tensor(make_smem_ptr(smem.q), LayoutQ{});
    Tensor sK = make_tensor(make_smem_ptr(smem.k), LayoutKV{});
    Tensor sVt = make_tensor(make_smem_ptr(smem.v), LayoutVt{});  // (D, BN, stage)
    // The operand descriptors depend only on the warpgroup; built from an index the compiler
    // knows to be warp-uniform (a shuffle from lane 0, as FA3 does), they live in uniform
    // registers: no R2UR copy before each wgmma (static count, hdim 128 dense loop: 526 -> 479
    // instructions an iteration; bench/NOTES-attention.md "sm90 forward v5").
    const int wg = __shfl_sync(0xffffffffu, tid / 128, 0);
    auto wg_qk = mma_qk.get_thread_slice(wg * 128);
    auto wg_pv = mma_pv.get_thread_slice(wg * 128);
    Tensor tSrQ = wg_qk.partition_fragment_A(sQ);
    Tensor tSrK = wg_qk.partition_fragment_B(sK);   // (MMA, N, K, stage) descriptors
    Tensor tOrV = wg_pv.partition_fragment_B(sVt);  // (MMA, D, K, stage)
    // (row, col) of each score within the tile, for the masks.
    Tensor cS = rowcol_view(thr_qk.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockN>>{})));
    Tensor o = rowcol_view(acc_o);

    // S = Q K_n^T on the tensor cores, then the masks; K_n's stage is free once S is in registers.
    auto scores = [&](auto& acc_s) {
      Ring::consumer_wait(smem.k_ring, st.k);
      wgmma<true>(mma_qk, tSrQ, tSrK(_, _, _, st.k.stage), acc_s);
    };
    float row_off[Softmax::kRows];  // the policy's row offsets of S_n (ALiBi), for its softmax
    auto scores_done = [&](auto& acc_s, int pos, bool last, bool release_k = true) {
      if (release_k) {
        Ring::consumer_release(smem.k_ring, st.k);
        st.k.advance();
      }
      // After the tile's last S, Q is free: the producer loads the next tile's Q while this
      // warpgroup finishes the last P V and the epilogue (with kOInQ, once O's store has read it).
      if (last && !kOInQ) Ring::Barrier::arrive(&smem.q_empty);
      Tensor s = rowcol_view(acc_s);
      const int n = key_block(pol, kr, w.block, pos);
      const bool masked = pol.template fwd_needs_mask<kBlockM, kBlockN>(w.block, n);
      if constexpr (kRowOffsets)
        pol.template fwd_scores_rows<kBlockM, kBlockN>(s, cS, row0, n * kBlockN, masked,
                                                       p.scale, row_off);
      else
        pol.template fwd_scores<Policy::kBoundedLogits>(s, cS, row0, n * kBlockN, masked, p.scale);
    };
    // The online softmax of S_n (l sums P before dropout drops some of it, as on sm80).
    // fp8: S is (q / q_descale) (k / k_descale)^T; the descales join the softmax scale.
    float scale_log2 = p.scale_log2;
    if constexpr (kFp8) {
      const int kv_head = w.head / (p.heads / p.kv_heads);
      scale_log2 *= p.q_descale.at(w.batch, kv_head) * p.k_descale.at(w.batch, kv_head);
    }
    // Bounded scores (softcap alone): unit scores t (fwd_scores<true>), and with bf16 P the first
    // block's max kept for the tile where the bound allows (m_floor +inf: the running max).
    if constexpr (Policy::kBoundedLogits) scale_log2 *= pol.fwd_unit_scale();
    const float m_floor = kBoundedMax ? pol.fwd_max_floor_log2() : INFINITY;
    const bool bounded = kBoundedOnly || (kBoundedMax && m_floor != INFINITY);
    auto softmax_of = [&](auto& acc_s, int pos, float(&alpha)[Softmax::kRows], bool first) {
      Tensor s = rowcol_view(acc_s);
      if (bounded) {
        softmax.update_bounded(s, scale_log2, m_floor, first);
        // Never read (O is not rescaled), but without them ptxas schedules the hdim 64 / 128
        // softcap kernels differently, 1.5 points slower at hdim 128 (bench/NOTES-attention.md,
        // session 39).
        CUTE_UNROLL
        for (int r = 0; r < Softmax::kRows; ++r) alpha[r] = 1.f;
      } else {
        softmax.template update_stats<kRowOffsets>(s, alpha, scale_log2, row_off);
      }
      pol.fwd_dropout(s, cS, row0, key_block(pol, kr, w.block, pos) * kBlockN);
    };
    // O += P V_n; V_n's stage is freed by pv_done once the product has completed.
    auto pv = [&](auto& tOrP) {
      Ring::consumer_wait(smem.v_ring, st.v);
      warpgroup_fence_operand(tOrP);
      wgmma<false>(mma_pv, tOrP, tOrV(_, _, _, st.v.stage), acc_o);
    };
    auto pv_done = [&](auto& tOrP) {
      warpgroup_fence_operand(tOrP);
      Ring::consumer_release(smem.v_ring, st.v);
      st.v.advance();
    };

    if constexpr (kSkipMaskedWg) {
      // Key blocks past this warpgroup's last visible key (blocks run last to first, so they come
      // first): its turn taken without a GEMM (every warpgroup takes the same number of turns),
      // the blocks' K / V stages released unread, Q released if one was the tile's last.
      const int last_key = min(row0 + 64 * wg + 63, pol.seqlen_q - 1) + pol.diag;
      const int n_seen = last_key < 0 ? -1 : last_key / kBlockN;
      while (n > n_seen && n >= kr.begin) {
        turns.wait_turn();
        turns.pass_turn();
        const int nn = next_live(pol, kr, w.block, n, cur);
        Ring::consumer_release(smem.k_ring, st.k);
        st.k.advance();
        Ring::consumer_release(smem.v_ring, st.v);
        st.v.advance();
        if (nn < kr.begin) Ring::Barrier::arrive(&smem.q_empty);
        n = nn;
      }
      if (n < kr.begin) {  // these rows see no key: O = 0, empty stats (the epilogue: 0, -inf)
        turns.wait_turn();  // the final P V's turn
        turns.pass_turn();
        Ring::Barrier::wait(&smem.q_full, st.q_tiles++ & 1);  // Q's phase, kept in step
        return;
      }
    }
    Ring::Barrier::wait(&smem.q_full, st.q_tiles & 1);
    FK_FWD_STAMP(tid, trace_tile, 1);
    FK_FWD_STAMP(tid, trace_tile, 6, kr.end - kr.begin);
    // Live key blocks run last to first (the masked ones first). Intra-warpgroup pipelining
    // (FA3's Algorithm 2): while P_{n'} V_{n'} (n' the previous live block) runs on the tensor
    // cores, this warpgroup waits only for S_n = Q K_n^T and computes its softmax; O is rescaled
    // once P V has landed. The next live block is looked up while the GEMMs run.
    Tensor acc_s = partition_fragment_C(mma_qk, Shape<Int<kBlockM>, Int<kBlockN>>{});
    turns.wait_turn();
    scores(acc_s);
    turns.pass_turn();
    int n_next = next_live(pol, kr, w.block, n, cur);
    warpgroup_wait<0>();
    scores_done(acc_s, n, n_next < kr.begin);
    float alpha[Softmax::kRows];
    softmax_of(acc_s, n, alpha, true);  // O is still 0: no rescale
    FK_FWD_STAMP(tid, trace_tile, 2);
    // P as the A operand of O += P V: 16-bit P in the accumulator's own layout (acc_as_a), fp8 P
    // as the ((4, 2, 2), 1, BN / 32) fragment in fp8.h's key order.
    auto make_p = [&] {
      if constexpr (kFp8)
        return make_tensor<Element>(Layout<Shape<Shape<_4, _2, _2>, _1, Int<kBlockN / 32>>>{});
      else
        return make_tensor<Element>(acc_as_a(acc_s.layout()));
    };
    Tensor tOrP = make_p();
    auto to_p = [&] {
      if constexpr (kFp8) {
        p_to_fp8_a(acc_s, tOrP);
      } else {
        Tensor rP = make_tensor(tOrP.data(), acc_s.layout());
        CUTE_UNROLL
        for (int i = 0; i < size(acc_s); ++i) rP(i) = static_cast<Element>(acc_s(i));
      }
    };
    to_p();
    FK_FWD_PHASES;
    for (n = n_next; n >= kr.begin; n = n_next) {
      FK_FWD_CLOCK(t0);
      turns.wait_turn();
      FK_FWD_PHASE(0, t0);
      FK_FWD_CLOCK(t1);
      scores(acc_s);  // S_n, issued first so that it completes first
      FK_FWD_PHASE(1, t1);
      FK_FWD_CLOCK(t2);
      pv(tOrP);       // O += P_{n'} V_{n'}
      FK_FWD_PHASE(2, t2);
      turns.pass_turn();
      FK_FWD_CLOCK(t3);
      n_next = next_live(pol, kr, w.block, n, cur);
      FK_FWD_PHASE(3, t3);
      FK_FWD_CLOCK(t4);
      warpgroup_wait<1>();
      FK_FWD_PHASE(4, t4);
      FK_FWD_CLOCK(t5);
      scores_done(acc_s, n, n_next < kr.begin, !kExpsBeforePvWait);
      softmax_of(acc_s, n, alpha, false);
      FK_FWD_PHASE(5, t5);
      if constexpr (kExpsBeforePvWait) {
        // ptxas hoists wgmma.wait_group 0 over independent ALU work up to the last memory
        // operation before it, so the exponentials would run after P V has completed. K_n's
        // release is that anchor: issued only now, as an arrival predicated on the row sums
        // (>= 0 or NaN: it always arrives), it depends on every exponential, and the wait
        // follows it. K_n's stage is free since wait<1>; the producer sees it a softmax later.
        Ring::consumer_release_after(smem.k_ring, st.k, softmax.stat[0].l + softmax.stat[1].l);
        st.k.advance();
      }
      FK_FWD_CLOCK(t6);
      warpgroup_wait<0>();
      FK_FWD_PHASE(6, t6);
      FK_FWD_CLOCK(t7);
      pv_done(tOrP);
      if (!bounded) Softmax::rescale(o, alpha);
      to_p();
      FK_FWD_PHASE(7, t7);
    }
    FK_FWD_PHASE_FLUSH(tid);
    FK_FWD_STAMP(tid, trace_tile, 3);
    turns.wait_turn();
    pv(tOrP);
    turns.pass_turn();
    warpgroup_wait<0>();
    pv_done(tOrP);
    ++st.q_tiles;
    float out_scale = pol.fwd_out_scale();  // dropout's 1 / (1 - p), once per tile
    if constexpr (kFp8)
      out_scale *= p.v_descale.at(w.batch, w.head / (p.heads / p.kv_heads));
    if (out_scale != 1.f) {
      CUTE_UNROLL
      for (int i = 0; i < size(acc_o); ++i) acc_o(i) *= out_scale;
    }
  }
};

}  // namespace flashkit::cuda::attn::sm90
