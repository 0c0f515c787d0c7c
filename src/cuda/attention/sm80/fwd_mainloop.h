// FlashAttention-2 forward mainloop (Algorithm 1), sm80-class: for one query block, stream K/V
// tiles through a 2-stage cp.async ring (or one K and one V buffer, see kStages), S = Q K^T and
// O += P V on mma.sync, online softmax in registers. Split-Q: warp w owns rows {w*16 .. w*16+15} of
// every 16*kWarps-row slab, so no reduction across warps is needed. The score Policy
// (score_policy.h) picks the key blocks, the masks and the score modifiers. Called by fwd_kernel.h;
// the epilogue finishes O and LSE.
#pragma once
#include <cmath>

#include "cuda/attention/params.h"
#include "cuda/attention/score_policy.h"
#include "cuda/attention/seqlen.h"
#include "cuda/attention/online_softmax.h"
#include "cuda/attention/sm80/tensor_ops.h"
#include "cuda/attention/tile_scheduler.h"

namespace flashkit::cuda::attn::sm80 {

template <class Element_, int kHeadDim_, int kBlockM_, int kBlockN_, int kWarps_, int kStages_,
          class Policy_>
struct FwdMainloop {
  using Element = Element_;
  using Policy = Policy_;
  static constexpr int kHeadDim = kHeadDim_, kBlockM = kBlockM_, kBlockN = kBlockN_;
  static constexpr int kWarps = kWarps_, kThreads = kWarps * 32;
  // K/V buffers of each kind, chosen with the tile (tile_config.h's sm80_fwd_tile): 1 (FA2's one K
  // and one V buffer: hdim 256 plain scores, 64 x 64 on 4 warps) or a 2-stage ring of both.
  static constexpr int kStages = kStages_;
  static_assert(kStages == 1 || kStages == 2, "one buffer of each kind or a 2-stage ring");

  using TiledMma = TiledMmaOf<Element, kWarps, 1>;
  using LayoutQ = SmemTile<kBlockM, kHeadDim>;
  using LayoutKV = SmemTiles<kBlockN, kHeadDim, kStages>;
  using Load = GmemLoad<Element, kThreads, kHeadDim>;
  // Rows of the accumulator one thread holds: 2 per 16-row MMA tile.
  static constexpr int kRowsPerThread = 2 * kBlockM / (16 * kWarps);
  // Up to hdim 128 (4 warps) the next block's K goes out after the S GEMM and its V after the
  // softmax (FA2's order): issued together at the top of the iteration, every warp's copies at
  // once filled the LSU queue in front of the wait and the barrier (forward +1-4%). With 8 warps
  // (hdim 192 / 256) the split measured 3-9% slower, so K and V go out together there, a whole
  // iteration ahead (bench/NOTES-attention.md, session 34).
  static constexpr bool kSplitCopies = kHeadDim <= 128;
  using Softmax = OnlineSoftmax<kRowsPerThread>;

  struct SharedStorage {
    alignas(128) Element q[cosize_v<LayoutQ>];
    alignas(128) Element k[cosize_v<LayoutKV>];
    alignas(128) Element v[cosize_v<LayoutKV>];
  };

  struct Params {
    const Element *q, *k, *v;
    Strides q_stride, k_stride, v_stride;
    const int *cu_seqlens_q, *cu_seqlens_k;
    int seqlen_q, seqlen_k, head_dim, h_ratio;
    float scale, scale_log2;
    typename Policy::Params score;
  };
  static Params to_params(const AttnArguments& a) {
    return {static_cast<const Element*>(a.q), static_cast<const Element*>(a.k),
            static_cast<const Element*>(a.v), a.q_stride, a.k_stride, a.v_stride,
            a.cu_seqlens_q, a.cu_seqlens_k, a.seqlen_q, a.seqlen_k, a.head_dim,
            a.heads / a.kv_heads, a.softmax_scale, a.softmax_scale * float(M_LOG2E),
            Policy::to_params(a)};
  }

  // Runs Algorithm 1's inner loop for one query block; acc_o is left un-scaled (the epilogue
  // divides by l). A block whose rows see no key leaves acc_o = 0 and the stats empty.
  template <class AccO>
  __device__ static void run(const Params& p, SharedStorage& smem, const WorkTile& w,
                             const SeqBounds& sb, AccO& acc_o, Softmax& softmax, int tid) {
    clear(acc_o);
    const int m_block = w.block;
    const Policy pol(p.score, sb, w.batch, w.head, p.scale);
    const BlockRange kr = pol.template key_blocks<kBlockM, kBlockN>(m_block);
    // The first key block to compute (blocks run last to first); block-sparse masks skip some.
    LiveCursor cur;
    int n = pol.template prev_live<kBlockM, kBlockN>(m_block, kr.end - 1, kr.begin, cur);
    if (n < kr.begin) return;
    const int kv_head = w.head / p.h_ratio;

    Tensor mQ = make_tensor(make_gmem_ptr(p.q + sb.q_offset(p.q_stride, w.batch, w.head)),
                            make_shape(sb.seqlen_q, Int<kHeadDim>{}), make_stride(p.q_stride.row, _1{}));
    Tensor mK = make_tensor(make_gmem_ptr(p.k + sb.k_offset(p.k_stride, w.batch, kv_head)),
                            make_shape(sb.seqlen_k, Int<kHeadDim>{}), make_stride(p.k_stride.row, _1{}));
    Tensor mV = make_tensor(make_gmem_ptr(p.v + sb.k_offset(p.v_stride, w.batch, kv_head)),
                            make_shape(sb.seqlen_k, Int<kHeadDim>{}), make_stride(p.v_stride.row, _1{}));
    Tensor gQ = local_tile(mQ, Shape<Int<kBlockM>, Int<kHeadDim>>{}, make_coord(m_block, 0));
    Tensor gK = local_tile(mK, Shape<Int<kBlockN>, Int<kHeadDim>>{}, make_coord(_, 0));  // (BN, D, n)
    Tensor gV = local_tile(mV, Shape<Int<kBlockN>, Int<kHeadDim>>{}, make_coord(_, 0));

    Tensor sQ = make_tensor(make_smem_ptr(smem.q), LayoutQ{});
    Tensor sK = make_tensor(make_smem_ptr(smem.k), LayoutKV{});  // (BN, D, stage)
    Tensor sVt = make_tensor(make_smem_ptr(smem.v),
                             transposed_staged<LayoutKV, kBlockN, kHeadDim, kStages>(LayoutKV{}));

    Load load;
    auto load_thr = load.get_thread_slice(tid);
    Tensor tQgQ = load_thr.partition_S(gQ);
    Tensor tQsQ = load_thr.partition_D(sQ);
    Tensor tKgK = load_thr.partition_S(gK);
    Tensor tKsK = load_thr.partition_D(sK);
    Tensor tVgV = load_thr.partition_S(gV);
    Tensor tVsV = load_thr.partition_D(make_tensor(make_smem_ptr(smem.v), LayoutKV{}));
    Tensor tQc = load_thr.partition_S(make_identity_tensor(Shape<Int<kBlockM>, Int<kHeadDim>>{}));
    Tensor tKVc = load_thr.partition_S(make_identity_tensor(Shape<Int<kBlockN>, Int<kHeadDim>>{}));

    TiledMma mma;
    auto thr_mma = mma.get_thread_slice(tid);
    Tensor tSrQ = thr_mma.partition_fragment_A(sQ);
    Tensor tSrK = thr_mma.partition_fragment_B(sK(_, _, 0));
    Tensor tOrVt = thr_mma.partition_fragment_B(
        make_tensor(make_smem_ptr(smem.v), Layout<Shape<Int<kHeadDim>, Int<kBlockN>>>{}));
    auto copy_q = make_tiled_copy_A(LdsmN<Element>{}, mma);
    auto copy_k = make_tiled_copy_B(LdsmN<Element>{}, mma);
    auto copy_v = make_tiled_copy_B(LdsmT<Element>{}, mma);
    Tensor tSsQ = copy_q.get_thread_slice(tid).partition_S(sQ);
    Tensor tSsK = copy_k.get_thread_slice(tid).partition_S(sK);
    Tensor tOsVt = copy_v.get_thread_slice(tid).partition_S(sVt);
    // Score coordinates (row, col) within the tile, for masking.
    Tensor tScS = rowcol_view(thr_mma.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockN>>{})));

    const int rows_q = sb.seqlen_q - m_block * kBlockM;
    auto load_k = [&](int n, int stage) {
      load_tile(load, tKgK(_, _, _, n), tKsK(_, _, _, stage), tKVc, sb.seqlen_k - n * kBlockN, p.head_dim);
    };
    auto load_v = [&](int n, int stage) {
      load_tile(load, tVgV(_, _, _, n), tVsV(_, _, _, stage), tKVc, sb.seqlen_k - n * kBlockN, p.head_dim);
    };
    load_tile(load, tQgQ, tQsQ, tQc, rows_q, p.head_dim);
    load_k(n, 0);
    // Key blocks run from the last to the first, so the masked ones come first.
    if constexpr (kStages == 1) {
      // V's copy runs under the S GEMM and the next K's under the softmax and P V; the two
      // barriers of a block keep each buffer's readers ahead of its next copy.
      cp_async_fence();
      while (n >= kr.begin) {
        const int n_next = pol.template prev_live<kBlockM, kBlockN>(m_block, n - 1, kr.begin, cur);
        cp_async_wait<0>();  // K_n (and Q)
        __syncthreads();     // every warp is done with V's buffer
        load_v(n, 0);
        cp_async_fence();
        Tensor acc_s = partition_fragment_C(mma, Shape<Int<kBlockM>, Int<kBlockN>>{});
        clear(acc_s);
        gemm_ss(mma, acc_s, tSrQ, tSrK, tSsQ, tSsK(_, _, _, 0), copy_q, copy_k);
        cp_async_wait<0>();  // V_n
        __syncthreads();     // every warp is done with K's buffer
        if (n_next >= kr.begin) load_k(n_next, 0);
        cp_async_fence();
        softmax_step(p, pol, softmax, acc_s, acc_o, tScS, m_block, n);
        Tensor rP = convert<Element>(acc_s);
        Tensor tOrP = make_tensor(rP.data(), acc_as_a(rP.layout()));
        gemm_rs(mma, acc_o, tOrP, tOrVt, tOsVt(_, _, _, 0), copy_v);
        n = n_next;
      }
      return finish(acc_o, pol);
    }
    load_v(n, 0);
    cp_async_fence();
    for (int stage = 0; n >= kr.begin; stage ^= 1) {
      const int n_next = pol.template prev_live<kBlockM, kBlockN>(m_block, n - 1, kr.begin, cur);
      if constexpr (!kSplitCopies) {
        if (n_next >= kr.begin) {
          load_k(n_next, stage ^ 1);
          load_v(n_next, stage ^ 1);
        }
        cp_async_fence();
      }
      cp_async_wait<kSplitCopies ? 0 : 1>();  // this block's K and V
      __syncthreads();

      Tensor acc_s = partition_fragment_C(mma, Shape<Int<kBlockM>, Int<kBlockN>>{});
      clear(acc_s);
      gemm_ss(mma, acc_s, tSrQ, tSrK, tSsQ, tSsK(_, _, _, stage), copy_q, copy_k);
      if constexpr (kSplitCopies) {
        if (n_next >= kr.begin) load_k(n_next, stage ^ 1);
        cp_async_fence();
      }

      softmax_step(p, pol, softmax, acc_s, acc_o, tScS, m_block, n);

      if constexpr (kSplitCopies) {
        if (n_next >= kr.begin) load_v(n_next, stage ^ 1);
        cp_async_fence();
      }
      Tensor rP = convert<Element>(acc_s);
      Tensor tOrP = make_tensor(rP.data(), acc_as_a(rP.layout()));
      gemm_rs(mma, acc_o, tOrP, tOrVt, tOsVt(_, _, _, stage), copy_v);
      __syncthreads();  // every warp is done with `stage` before the next prefetch refills it
      n = n_next;
    }
    finish(acc_o, pol);
  }

  // S_n's scores and masks, then the online softmax (P left in acc_s, O rescaled).
  template <class AccS, class AccO, class Coord>
  __device__ __forceinline__ static void softmax_step(const Params& p, const Policy& pol,
                                                      Softmax& softmax, AccS& acc_s, AccO& acc_o,
                                                      const Coord& tScS, int m_block, int n) {
    Tensor s = rowcol_view(acc_s);
    const bool mask = pol.template fwd_needs_mask<kBlockM, kBlockN>(m_block, n);
    pol.fwd_scores(s, tScS, m_block * kBlockM, n * kBlockN, mask, p.scale);
    Tensor o = rowcol_view(acc_o);
    softmax.update(s, o, p.scale_log2);
    pol.fwd_dropout(s, tScS, m_block * kBlockM, n * kBlockN);  // l above counts dropped P too
  }

  template <class AccO>
  __device__ static void finish(AccO& acc_o, const Policy& pol) {
    const float out_scale = pol.fwd_out_scale();  // dropout's 1 / (1 - p), once per row block
    if (out_scale != 1.f) {
      CUTE_UNROLL
      for (int i = 0; i < size(acc_o); ++i) acc_o(i) *= out_scale;
    }
  }
};

}  // namespace flashkit::cuda::attn::sm80
