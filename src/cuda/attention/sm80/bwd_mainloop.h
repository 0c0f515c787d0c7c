// FlashAttention-2 backward mainloop (Algorithm 2), sm80-class: one CTA per K/V block keeps K, V
// and the dK, dV accumulators on chip and walks the query blocks (of every query head sharing
// this KV head, so GQA/MQA sums happen in registers). Per query block: P recomputed from LSE,
// dV += P^T dO, dS = P * (dP - D), dK += dS^T Q, and dQ += dS K added in fp32 to the scratch
// accumulator by atomics from registers (16-byte reductions on sm_90; FLASHKIT_SM80_BWD_BULK=1
// stages it in shared memory for bulk reduces instead, where that fits); deterministic runs add
// with atomics in key-block order behind a per-block semaphore. The score Policy (score_policy.h)
// picks the query blocks, the masks and the score modifiers.
#pragma once
#include <cmath>
#include <cstdlib>

#include "cuda/attention/params.h"
#include "cuda/attention/score_policy.h"
#include "cuda/attention/seqlen.h"
#include "cuda/attention/sm80/bwd_pre_post.h"
#include "cuda/attention/sm80/tensor_ops.h"
#include "cuda/attention/tile_scheduler.h"
#include "cuda/common/acquire_release.h"
#include "cuda/common/bulk_reduce.h"
#include "cuda/common/cp_async.h"
#include "cuda/common/mbarrier.h"

namespace flashkit::cuda::attn::sm80 {

// FLASHKIT_SM80_BWD_BULK=1 (read per launch, A/B runs): dQ staged in shared memory and added by
// bulk reduces on sm_90. The default, 16-byte atomics from registers, measured 1.5-4% faster
// there with the copies issued after the S GEMM (bench/NOTES-attention.md, session 34).
inline bool sm80_bwd_bulk_dq() {
  const char* e = std::getenv("FLASHKIT_SM80_BWD_BULK");
  return e && e[0] == '1';
}

template <class Element_, int kHeadDim_, int kBlockM_, int kBlockN_, int kWarps_, class Policy_>
struct BwdMainloop {
  using Element = Element_;
  using Policy = Policy_;
  static constexpr int kHeadDim = kHeadDim_, kBlockM = kBlockM_, kBlockN = kBlockN_;
  static constexpr int kWarps = kWarps_, kThreads = kWarps * 32;
  static constexpr int kStages = 2;
  static_assert(kWarps == 8, "the warp grids below are laid out for 8 warps");

  // Warps along M of an (M x N) product over 8 warps: the grid whose warp tile reads the fewest
  // operand rows from shared memory per k step (M/wm + N/wn; ldmatrix traffic bounds these
  // MMAs), ties to more warps along M; each warp tile is whole 16 x 16 steps.
  static constexpr int warps_m(int M, int N) {
    int best = 0;
    for (int wm = 1; wm <= 8; wm *= 2) {
      const int wn = 8 / wm;
      if (M % (16 * wm) != 0 || N % (16 * wn) != 0) continue;
      if (best == 0 || M / wm + N / wn <= M / best + N * best / 8) best = wm;
    }
    return best;
  }
  static constexpr int kSdPWarpsM = warps_m(kBlockM, kBlockN);
  static constexpr int kKVWarpsM = warps_m(kBlockN, kHeadDim);
  static constexpr int kDqWarpsM = warps_m(kBlockM, kHeadDim);
  using MmaSdP = TiledMmaOf<Element, kSdPWarpsM, 8 / kSdPWarpsM>;  // S, dP: (block_m x block_n)
  using MmaKV = TiledMmaOf<Element, kKVWarpsM, 8 / kKVWarpsM>;     // dK, dV: (block_n x hdim)
  using MmaDQ = TiledMmaOf<Element, kDqWarpsM, 8 / kDqWarpsM>;     // dQ: (block_m x hdim)
  static_assert(kSdPWarpsM > 0 && kKVWarpsM > 0 && kDqWarpsM > 0, "no 8-warp grid fits the tiles");
  using LayoutQ = SmemTiles<kBlockM, kHeadDim, kStages>;  // Q and dO
  using LayoutKV = SmemTile<kBlockN, kHeadDim>;
  using LayoutP = SmemTile<kBlockM, kBlockN>;             // P and dS
  using Load = GmemLoad<Element, kThreads, kHeadDim>;

  // dQ of one query block in dq_chunk order ([slab j][thread][4 floats]): staged in shared memory
  // when it fits beside the operands (227 KB on H100/H200: every bucket but hdim 256).
  static constexpr int kDqFloats = kBlockM * kHeadDim;
  // Up to hdim 64 each stage's LSE * log2(e) and D rows come into shared memory by cp.async with
  // Q and dO, read right before the probabilities, instead of global loads held in registers
  // across the S / dP GEMMs: the loop's spill reloads 7 -> 1, backward +2.5-3% (H200); at hdim 128
  // it made ptxas spill where it did not, -1-2% (bench/NOTES-attention.md, session 33).
  static constexpr bool kStatsSmem = kHeadDim <= 64;
  static constexpr size_t kStatsBytes = kStatsSmem ? sizeof(float) * 2 * kStages * kBlockM : 0;
  static constexpr size_t kOperandBytes =
      kStatsBytes +
      sizeof(Element) * (2 * cosize_v<LayoutQ> + 2 * cosize_v<LayoutKV> + 2 * cosize_v<LayoutP>);
  // Where each iteration issues the next query block's copies: after the S GEMM (2), or after the
  // P / dS barrier (3) with no dQ staging compiled in at all, which ptxas turns into the faster
  // program for hdim <= 64 without a mask and the slower one everywhere else (session 34: +3-4%
  // there; -5% hdim 64 causal, -5-7% hdim 128).
  static constexpr bool kSmallDense = kHeadDim <= 64 && Policy::kPlain && !Policy::kCausal;
  static constexpr int kCopiesAt = kSmallDense ? 3 : 2;
  static constexpr bool kStageDq =
      !kSmallDense && kOperandBytes + kDqFloats * sizeof(float) <= 227 * 1024;
  // dQ's adds after the dV GEMM rather than right after the dQ GEMM, so that the atomics' data
  // registers are not the dV GEMM's first fragments, which waited for the LSU to read them (ncu,
  // causal 16k: 4.5% of the stall samples): +0.5-1.3% (session 34), measured for the plain
  // policies up to hdim 128 other than kSmallDense, so only those take it.
  static constexpr bool kDqLate = !kSmallDense && kHeadDim <= 128 && Policy::kPlain;
  // hdim 256 without a mask walks the query blocks in order from the first in every key block:
  // +1.6-2.4% there, where causal hdim 256 loses 1.5-2% and hdim 64 / 128 gained nothing
  // (bench/NOTES-attention.md, sessions 34-35).
  static constexpr bool kNoRotation = kHeadDim == 256 && Policy::kPlain && !Policy::kCausal;
  static_assert(kDqFloats % (4 * kThreads) == 0, "each thread adds whole float4 groups");

  struct SharedStorage {
    alignas(128) Element q[cosize_v<LayoutQ>];
    alignas(128) Element d_o[cosize_v<LayoutQ>];
    alignas(128) Element k[cosize_v<LayoutKV>];
    alignas(128) Element v[cosize_v<LayoutKV>];
    alignas(128) Element p[cosize_v<LayoutP>];
    alignas(128) Element ds[cosize_v<LayoutP>];
    alignas(16) float stats[kStatsSmem ? kStages : 1][2][kStatsSmem ? kBlockM : 4];  // LSE, D rows
    alignas(128) float dq[kStageDq ? kDqFloats : 4];  // the bulk reduces' stage (bulk_dq only)
  };

  struct Params {
    const Element *q, *k, *v, *d_o;
    Strides q_stride, k_stride, v_stride, do_stride;
    BwdScratch ws;
    int heads, h_ratio, head_dim, num_m_blocks;
    float scale, scale_log2;
    bool deterministic;
    bool bulk_dq;  // stage dQ for bulk reduces (sm_90 code only; never in deterministic runs)
    typename Policy::Params score;
  };
  static bool use_bulk_dq(const AttnArguments& a) {  // read per launch (the A/B knob)
    return kStageDq && !a.deterministic && sm80_bwd_bulk_dq();
  }
  static Params to_params(const AttnArguments& a, BwdScratch ws) {
    return {static_cast<const Element*>(a.q),
            static_cast<const Element*>(a.k),
            static_cast<const Element*>(a.v),
            static_cast<const Element*>(a.dout),
            a.q_stride,
            a.k_stride,
            a.v_stride,
            a.do_stride,
            ws,
            a.heads,
            a.heads / a.kv_heads,
            a.head_dim,
            ceil_div(a.seqlen_q, kBlockM),
            a.softmax_scale,
            a.softmax_scale * float(M_LOG2E),
            a.deterministic,
            use_bulk_dq(a),
            Policy::to_params(a)};
  }

  // After the tile's epilogue, every thread: the key block counts itself in for each query head
  // of its KV head (ws.dq_ready, read by the dQ conversion) once the CTA's dQ adds are complete
  // (thread 0 waits for its bulk reduces; every thread's atomics are fenced).
  __device__ static void signal_dq_ready(const Params& p, const WorkTile& w, int tid) {
    if (!p.ws.dq_ready) return;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (kStageDq && p.bulk_dq && tid == 0) bulk_wait_done();
#endif
    __threadfence();
    __syncthreads();
    if (tid == 0) {
      int* count = p.ws.dq_ready + int64_t(w.batch) * p.heads + int64_t(w.head) * p.h_ratio;
      for (int g = 0; g < p.h_ratio; ++g) fetch_add_acq_rel(count + g, 1);
    }
  }

  template <class AccKV>
  __device__ static void run(const Params& p, SharedStorage& smem, const WorkTile& w,
                             const SeqBounds& sb, AccKV& acc_dk, AccKV& acc_dv, int tid) {
    clear(acc_dk);
    clear(acc_dv);
    const int n_block = w.block, kv_head = w.head, b = w.batch;
    // The query-block range does not depend on the head (only ALiBi's slope does).
    const BlockRange mr = Policy(p.score, sb, b, kv_head * p.h_ratio, p.scale)
                              .template query_blocks<kBlockM, kBlockN>(n_block);
    const int m_begin = mr.begin, m_end = mr.end;
    if (m_begin >= m_end) return;

    Tensor sQ = make_tensor(make_smem_ptr(smem.q), LayoutQ{});    // (M, D, stage)
    Tensor sdO = make_tensor(make_smem_ptr(smem.d_o), LayoutQ{});
    Tensor sQt = make_tensor(make_smem_ptr(smem.q), transposed_staged<LayoutQ, kBlockM, kHeadDim, kStages>(LayoutQ{}));
    Tensor sdOt = make_tensor(make_smem_ptr(smem.d_o), transposed_staged<LayoutQ, kBlockM, kHeadDim, kStages>(LayoutQ{}));
    Tensor sK = make_tensor(make_smem_ptr(smem.k), LayoutKV{});   // (N, D)
    Tensor sV = make_tensor(make_smem_ptr(smem.v), LayoutKV{});
    Tensor sKt = make_tensor(make_smem_ptr(smem.k), transposed<LayoutKV, kBlockN, kHeadDim>(LayoutKV{}));
    Tensor sP = make_tensor(make_smem_ptr(smem.p), LayoutP{});    // (M, N)
    Tensor sdS = make_tensor(make_smem_ptr(smem.ds), LayoutP{});
    Tensor sPt = make_tensor(make_smem_ptr(smem.p), transposed<LayoutP, kBlockM, kBlockN>(LayoutP{}));
    Tensor sdSt = make_tensor(make_smem_ptr(smem.ds), transposed<LayoutP, kBlockM, kBlockN>(LayoutP{}));

    // K and V of this block, once.
    Load load;
    auto load_thr = load.get_thread_slice(tid);
    {
      Tensor mK = make_tensor(make_gmem_ptr(p.k + sb.k_offset(p.k_stride, b, kv_head)),
                              make_shape(sb.seqlen_k, Int<kHeadDim>{}), make_stride(p.k_stride.row, _1{}));
      Tensor mV = make_tensor(make_gmem_ptr(p.v + sb.k_offset(p.v_stride, b, kv_head)),
                              make_shape(sb.seqlen_k, Int<kHeadDim>{}), make_stride(p.v_stride.row, _1{}));
      auto tile = Shape<Int<kBlockN>, Int<kHeadDim>>{};
      Tensor c = load_thr.partition_S(make_identity_tensor(tile));
      int rows = sb.seqlen_k - n_block * kBlockN;
      load_tile(load, load_thr.partition_S(local_tile(mK, tile, make_coord(n_block, 0))),
                load_thr.partition_D(sK), c, rows, p.head_dim);
      load_tile(load, load_thr.partition_S(local_tile(mV, tile, make_coord(n_block, 0))),
                load_thr.partition_D(sV), c, rows, p.head_dim);
      cp_async_fence();
    }
    Tensor tQc = load_thr.partition_S(make_identity_tensor(Shape<Int<kBlockM>, Int<kHeadDim>>{}));
    Tensor tQsQ = load_thr.partition_D(sQ);
    Tensor tQsdO = load_thr.partition_D(sdO);

    // S = Q K^T and dP = dO V^T.
    MmaSdP mma_sdp;
    auto thr_sdp = mma_sdp.get_thread_slice(tid);
    Tensor tSrQ = thr_sdp.partition_fragment_A(sQ(_, _, 0));
    Tensor tSrK = thr_sdp.partition_fragment_B(sK);
    Tensor tdPrdO = thr_sdp.partition_fragment_A(sdO(_, _, 0));
    Tensor tdPrV = thr_sdp.partition_fragment_B(sV);
    auto ldsm_a_sdp = make_tiled_copy_A(LdsmN<Element>{}, mma_sdp);
    auto ldsm_b_sdp = make_tiled_copy_B(LdsmN<Element>{}, mma_sdp);
    Tensor tSsQ = ldsm_a_sdp.get_thread_slice(tid).partition_S(sQ);
    Tensor tdPsdO = ldsm_a_sdp.get_thread_slice(tid).partition_S(sdO);
    Tensor tSsK = ldsm_b_sdp.get_thread_slice(tid).partition_S(sK);
    Tensor tdPsV = ldsm_b_sdp.get_thread_slice(tid).partition_S(sV);
    Tensor tScS = rowcol_view(thr_sdp.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockN>>{})));
    auto sts_p = make_tiled_copy_C(StsPair<Element>{}, mma_sdp);
    auto sts_p_thr = sts_p.get_thread_slice(tid);
    Tensor tPsP = sts_p_thr.partition_D(sP);
    Tensor tPsdS = sts_p_thr.partition_D(sdS);

    // dV += P^T dO and dK += dS^T Q: both operands read transposed.
    MmaKV mma_kv;
    auto thr_kv = mma_kv.get_thread_slice(tid);
    auto plain_nm = Layout<Shape<Int<kBlockN>, Int<kBlockM>>>{};
    auto plain_dm = Layout<Shape<Int<kHeadDim>, Int<kBlockM>>>{};
    Tensor tdVrPt = thr_kv.partition_fragment_A(make_tensor(make_smem_ptr(smem.p), plain_nm));
    Tensor tdVrdOt = thr_kv.partition_fragment_B(make_tensor(make_smem_ptr(smem.d_o), plain_dm));
    Tensor tdKrdSt = thr_kv.partition_fragment_A(make_tensor(make_smem_ptr(smem.ds), plain_nm));
    Tensor tdKrQt = thr_kv.partition_fragment_B(make_tensor(make_smem_ptr(smem.q), plain_dm));
    auto ldsm_a_kv = make_tiled_copy_A(LdsmT<Element>{}, mma_kv);
    auto ldsm_b_kv = make_tiled_copy_B(LdsmT<Element>{}, mma_kv);
    Tensor tdVsPt = ldsm_a_kv.get_thread_slice(tid).partition_S(sPt);
    Tensor tdKsdSt = ldsm_a_kv.get_thread_slice(tid).partition_S(sdSt);
    Tensor tdVsdOt = ldsm_b_kv.get_thread_slice(tid).partition_S(sdOt);
    Tensor tdKsQt = ldsm_b_kv.get_thread_slice(tid).partition_S(sQt);

    // dQ = dS K.
    MmaDQ mma_dq;
    auto thr_dq = mma_dq.get_thread_slice(tid);
    Tensor tdQrdS = thr_dq.partition_fragment_A(sdS);
    Tensor tdQrKt = thr_dq.partition_fragment_B(
        make_tensor(make_smem_ptr(smem.k), Layout<Shape<Int<kHeadDim>, Int<kBlockN>>>{}));
    auto ldsm_a_dq = make_tiled_copy_A(LdsmN<Element>{}, mma_dq);
    auto ldsm_b_dq = make_tiled_copy_B(LdsmT<Element>{}, mma_dq);
    Tensor tdQsdS = ldsm_a_dq.get_thread_slice(tid).partition_S(sdS);
    Tensor tdQsKt = ldsm_b_dq.get_thread_slice(tid).partition_S(sKt);

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const bool bulk_dq = kStageDq && p.bulk_dq;
#else
    constexpr bool bulk_dq = false;  // bulk reduces are sm_90+
#endif

    for (int g = 0; g < p.h_ratio; ++g) {
      const int h = kv_head * p.h_ratio + g;
      const Policy pol(p.score, sb, b, h, p.scale);
      Tensor mQ = make_tensor(make_gmem_ptr(p.q + sb.q_offset(p.q_stride, b, h)),
                              make_shape(sb.seqlen_q, Int<kHeadDim>{}), make_stride(p.q_stride.row, _1{}));
      Tensor mdO = make_tensor(make_gmem_ptr(p.d_o + sb.q_offset(p.do_stride, b, h)),
                               make_shape(sb.seqlen_q, Int<kHeadDim>{}), make_stride(p.do_stride.row, _1{}));
      Tensor tQgQ = load_thr.partition_S(local_tile(mQ, Shape<Int<kBlockM>, Int<kHeadDim>>{}, make_coord(_, 0)));
      Tensor tQgdO = load_thr.partition_S(local_tile(mdO, Shape<Int<kBlockM>, Int<kHeadDim>>{}, make_coord(_, 0)));
      const int64_t token0 = sb.q_token(b);
      auto load_q = [&](int m, int stage) {
        load_tile(load, tQgQ(_, _, _, m), tQsQ(_, _, _, stage), tQc, sb.seqlen_q - m * kBlockM, p.head_dim);
        load_tile(load, tQgdO(_, _, _, m), tQsdO(_, _, _, stage), tQc, sb.seqlen_q - m * kBlockM, p.head_dim);
        if constexpr (kStatsSmem) {  // a 16-byte piece of the LSE or D row a thread
          constexpr int kPieces = kBlockM / 4;
          static_assert(2 * kPieces <= kThreads, "a thread a piece of the LSE and D rows");
          if (tid < 2 * kPieces) {
            const int which = tid / kPieces, piece = tid % kPieces;
            const float* src = (which == 0 ? p.ws.lse_log2 : p.ws.dsum) +
                               row_chunk<kBlockM>(token0, b, m, h, p.heads) + 4 * piece;
            cp_async_16(smem_addr(&smem.stats[stage][which][4 * piece]), src);
          }
        }
      };
      int* semaphore = p.ws.semaphore + (int64_t(b) * p.heads + h) * p.num_m_blocks;

      // The K/V blocks of one head all add into the same dQ rows; starting each at a different
      // query block spreads their atomics over the rows instead of piling onto one block's
      // addresses. Deterministic runs keep the natural order their semaphores count in, and so
      // does kNoRotation (FA2's order: every key block walks the query blocks from the first).
      const int count = m_end - m_begin;
      const int rot = p.deterministic || kNoRotation ? 0 : n_block % count;
      auto m_at = [&](int i) { return m_begin + (i + rot < count ? i + rot : i + rot - count); };
      // The next query block at or after step i that the block mask keeps (count: none).
      LiveCursor cur;
      auto next_live = [&](int i) {
        return pol.template next_live_query<kBlockM, kBlockN>(i, count, m_at, n_block, cur);
      };
      int i = next_live(0);
      if (i < count) load_q(m_at(i), 0);
      cp_async_fence();
      for (int stage = 0; i < count; stage ^= 1) {
        const int m = m_at(i);
        const int i_next = next_live(i + 1);

        // Per-row LSE (log2 units; +inf on padding rows and rows without keys, so P = 0) and D,
        // laid out by the preprocess kernel for whole blocks: no bounds checks here. From global
        // memory now (hdim > 64), or from this stage's copy after the GEMMs (kStatsSmem).
        constexpr int kRows = decltype(size<0>(tScS))::value;
        float lse_log2[kRows], d_row[kRows];
        auto read_stats = [&](const float* lse, const float* dsum) {
          CUTE_UNROLL
          for (int r = 0; r < kRows; ++r) {
            const int row = get<0>(tScS(r, 0));
            lse_log2[r] = lse[row];
            d_row[r] = dsum[row];
          }
        };
        if constexpr (!kStatsSmem) {
          const int64_t at = row_chunk<kBlockM>(token0, b, m, h, p.heads);
          read_stats(p.ws.lse_log2 + at, p.ws.dsum + at);
        }
        cp_async_wait<0>();  // this stage's copies, issued during the last iteration
        __syncthreads();

        Tensor acc_s = partition_fragment_C(mma_sdp, Shape<Int<kBlockM>, Int<kBlockN>>{});
        clear(acc_s);
        gemm_ss(mma_sdp, acc_s, tSrQ, tSrK, tSsQ(_, _, _, stage), tSsK, ldsm_a_sdp, ldsm_b_sdp);
        // The next query block's copies go out now, not at the top of the iteration: issued there
        // by every warp at once, they filled the LSU queue right before the wait and the barrier,
        // and the S GEMM's ldmatrix loads and the reuse of their address registers waited behind
        // them (ncu: 8-10% of the loop's stall samples; +1-4% backward here, session 34).
        auto issue_next = [&] {
          if (i_next < count) load_q(m_at(i_next), stage ^ 1);
          cp_async_fence();
        };
        if constexpr (kCopiesAt == 2) issue_next();
        Tensor acc_dp = partition_fragment_C(mma_sdp, Shape<Int<kBlockM>, Int<kBlockN>>{});
        clear(acc_dp);
        gemm_ss(mma_sdp, acc_dp, tdPrdO, tdPrV, tdPsdO(_, _, _, stage), tdPsV, ldsm_a_sdp, ldsm_b_sdp);

        Tensor s = rowcol_view(acc_s);
        Tensor dp = rowcol_view(acc_dp);
        if constexpr (kStatsSmem) read_stats(smem.stats[stage][0], smem.stats[stage][1]);
        const bool mask = pol.template bwd_needs_mask<kBlockM, kBlockN>(m, n_block);
        pol.bwd_probs(s, dp, tScS, m * kBlockM, n_block * kBlockN, mask, p.scale, p.scale_log2,
                      lse_log2, d_row);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        if (bulk_dq && tid == 0) bulk_wait_read();  // the last block's staged dQ has been read
#endif
        copy(sts_p, sts_p_thr.retile_S(convert<Element>(acc_s)), tPsP);
        copy(sts_p, sts_p_thr.retile_S(convert<Element>(acc_dp)), tPsdS);
        __syncthreads();
        if constexpr (kCopiesAt == 3) issue_next();

        // dQ first: its atomics (or staging stores) drain while the dV and dK MMAs run; with
        // kDqLate they go out after the dV GEMM. The two orders are written out separately on
        // purpose: one shared form changed ptxas's output for the policies that keep the first
        // order (measured and tested as written, session 34).
        float* dq_dst = dq_chunk<kBlockM, kHeadDim>(p.ws.dq_accum, token0, b, m, h, p.heads);
        if constexpr (!kDqLate) {
          {
            Tensor acc_dq = partition_fragment_C(mma_dq, Shape<Int<kBlockM>, Int<kHeadDim>>{});
            clear(acc_dq);
            gemm_ss(mma_dq, acc_dq, tdQrdS, tdQrKt, tdQsdS, tdQsKt, ldsm_a_dq, ldsm_b_dq);
            if (bulk_dq)
              stage_dq<kThreads>(smem.dq, acc_dq, tid);
            else
              add_dq<kThreads>(
                  acc_dq, dq_dst, p.deterministic ? semaphore + m : nullptr,
                  p.deterministic ? pol.template dq_turn<kBlockM, kBlockN>(m, n_block) : 0, tid,
                  [] { __syncthreads(); });
          }
          gemm_ss(mma_kv, acc_dv, tdVrPt, tdVrdOt, tdVsPt, tdVsdOt(_, _, _, stage), ldsm_a_kv,
                  ldsm_b_kv);
        } else {  // kDqLate: the adds after the dV GEMM
          Tensor acc_dq = partition_fragment_C(mma_dq, Shape<Int<kBlockM>, Int<kHeadDim>>{});
          clear(acc_dq);
          gemm_ss(mma_dq, acc_dq, tdQrdS, tdQrKt, tdQsdS, tdQsKt, ldsm_a_dq, ldsm_b_dq);
          auto add_block_dq = [&] {
            if (bulk_dq)
              stage_dq<kThreads>(smem.dq, acc_dq, tid);
            else
              add_dq<kThreads>(
                  acc_dq, dq_dst, p.deterministic ? semaphore + m : nullptr,
                  p.deterministic ? pol.template dq_turn<kBlockM, kBlockN>(m, n_block) : 0, tid,
                  [] { __syncthreads(); });
          };
          gemm_ss(mma_kv, acc_dv, tdVrPt, tdVrdOt, tdVsPt, tdVsdOt(_, _, _, stage), ldsm_a_kv,
                  ldsm_b_kv);
          add_block_dq();
        }
        gemm_ss(mma_kv, acc_dk, tdKrdSt, tdKrQt, tdKsdSt, tdKsQt(_, _, _, stage), ldsm_a_kv, ldsm_b_kv);
        __syncthreads();  // P, dS and this Q/dO stage are rewritten next iteration
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        // Every warp's staged dQ is written: thread 0 adds the whole block with one bulk reduce
        // (a reduce per warp, each in a uniform-operand retry loop, measured 1-3% slower at hdim
        // 64 / 128: bench/NOTES-attention.md, session 33).
        if (bulk_dq && tid == 0) bulk_reduce_add_f32(dq_dst, smem.dq, kDqFloats * sizeof(float));
#endif
        i = i_next;
      }
    }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (bulk_dq && tid == 0) bulk_wait_read();  // the CTA's shared memory outlives the reads
#endif
  }
};

}  // namespace flashkit::cuda::attn::sm80
