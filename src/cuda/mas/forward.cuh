// The MAS forward kernel: the DP over the band with the state in registers and the decisions as
// bits, the backtrack at the end and, for dense paths, the path itself. Included by
// src/cuda/mas/mas.cu only.
#pragma once
#include <type_traits>

#include "cuda/common/pdl.h"
#include "cuda/mas/device.cuh"
#include "cuda/mas/path_writer.cuh"
#include "cuda/mas/staged.cuh"

namespace flashkit::cuda::mas_kernels {

namespace cg = cooperative_groups;

// One CTA of an item's cluster: rows [row0, row0 + rows), K rows a lane, p.dp_warps warps; with
// p.path set, one more warp zeroes the CTA's share of the item's path meanwhile and CTA 0 writes
// the ones after the backtrack. Every DP warp is a pipeline stage that runs on its own, without
// CTA barriers: it needs its upper neighbour's last row one frame back, which the neighbour
// publishes 32 frames at a time through a shared-memory ring with a full/empty mbarrier pair per
// 32-frame stage (device.cuh; the CTA's first warp: from the previous CTA of the cluster, through
// global memory). The frame loop runs whole 32-frame blocks, unrolled and branch-free (frames past
// ty compute values nobody reads): per frame two shuffles and, per row, a compare, two adds and
// two bit selects (device.cuh `cell`). NB chunks of the likelihood are in registers (NB - 1
// ahead) and L2 is asked for the rows p.l2_blocks blocks ahead, p.l2_group blocks at a time.
// Blocks whose loads all take the vector path and that hold no cell above the diagonal run a copy
// of the block without the slow load path and the mask, so the code the warps spend their time in
// stays small (one warp per scheduler: instruction fetch shows).
// K = 4 serves up to 512 rows a CTA (4 DP warps + 1), K = 8 up to 2048 (8 DP warps, or 7 + 1).
// kStage (v8; K = 4, contiguous aligned rows, not fused): the likelihood comes through a
// shared-memory stage per warp (staged.cuh) and the rings carry whole blocks; the blocks run in
// two copies, plain (inside the row, below every row's diagonal) and general (bounded copies,
// diagonal mask), with nothing else inline.
template <Src S, int K, int NB, bool kVec, bool kStage, int kSlots = 8>
__global__ void __launch_bounds__(max_block_threads(K), 1)
    mas_forward(const Params p) {
  using T = typename Chunk<S>::T;
  constexpr int kCols = Chunk<S>::kCols;
  constexpr int kChunks = 32 / kCols;  // chunks per 32-frame block
  static_assert(kChunks % NB == 0, "each chunk's buffer must be known at compile time");
  constexpr bool kFused = S == Src::fused;
  static_assert(!kStage || (K <= 4 && kVec && !kFused), "the stage serves K = 1, 2, 4 vector rows");
  // Dynamic shared memory: the stage (kStage), then the decision bits when p.bits_smem.
  extern __shared__ uint4 s_dyn[];
  __shared__ __align__(16) float s_ring[kMaxThreads / 32][kRing];
  __shared__ uint64_t s_full[kMaxThreads / 32][kStages];   // ring w, stage s written
  __shared__ uint64_t s_empty[kMaxThreads / 32][kStages];  // ring w, stage s read
  __shared__ int32_t s_start[kMaxText];  // the backtrack's run starts (CTA 0), for write_runs
  // kStage with split items: the previous CTA's last warp writes its last row into s_xring (as a
  // warp does into s_ring, over distributed shared memory), s_xfull[s] gets its lane 0's arrival
  // per stage; s_xempty[s] gets the 32 arrivals of the next CTA's warp 0 once it read a stage.
  [[maybe_unused]] __shared__ __align__(16) float s_xring[kStage ? kRing : 4];
  __shared__ uint64_t s_xfull[kStages], s_xempty[kStages];
  // A path kernel launched after this one with programmatic serialisation (mas.cu, v17) may
  // start now: it zeroes the path on the SMs this grid leaves free and waits for this grid's
  // completion (pdl_wait) before writing the ones. Without such a kernel: a no-op.
  pdl_launch_dependents();
  const int b = blockIdx.x / p.splits, part = blockIdx.x % p.splits;
  int tid;  // kept in a register: re-reading %tid.x in the loop would wait with the loads
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(tid));
  const int lane = tid & 31, warp = tid >> 5, nwarps = p.dp_warps;
  const bool dp = warp < nwarps;
  const int row0 = part * p.rows;
  const int x0 = row0 + tid * K;
  const T* rows = kFused ? nullptr : static_cast<const T*>(p.value) + b * p.vb + x0 * p.vx;

  uint32_t buf[kStage ? 2 : NB][K][8];
  using StagerT = Stager<K, kSlots>;
  constexpr int kAhead = StagerT::kAhead;
  StagerT stager{};
  // Fused: the likelihood is computed fused_frames(K) frames at a time into fblk, in chunk
  // order (fetch is called for chunks 0, 1, 2, ... in turn), and handed out a chunk at a time.
  constexpr int kFusedChunks = kFused ? fused_frames(K) / kCols : 1;
  [[maybe_unused]] uint32_t fblk[kFusedChunks][K][8];
  auto fetch = [&](uint32_t(&bf)[K][8], int g, int nrows) {
    if constexpr (kFused) {
      if (x0 < nrows) {
        if constexpr (kFusedChunks == 1) {  // a chunk a call: straight into bf
          fused_chunks<K>(p, b, x0, g * kCols, p.S, reinterpret_cast<uint32_t(&)[1][K][8]>(bf));
        } else {
          if (g % kFusedChunks == 0) fused_chunks<K>(p, b, x0, g * kCols, p.S, fblk);
#pragma unroll
          for (int i = 0; i < K; ++i)
#pragma unroll
            for (int j = 0; j < 8; ++j) bf[i][j] = fblk[g % kFusedChunks][i][j];
        }
      }
    } else {
      load_chunk<S, K, kVec>(p, rows, x0, nrows, g * kCols, bf);
    }
  };
  // Rows < T and frames < S exist whatever the lengths are: start the loads before reading them.
  if (dp) {
    if constexpr (kVec && !kFused) {
      const uint32_t ahead = min(p.l2_blocks * 32, p.S) * sizeof(T);
      if (ahead > 0)
#pragma unroll
        for (int i = 0; i < K; ++i)
          if (x0 + i < p.T) prefetch_l2(rows + i * p.vx, ahead);
    }
    if constexpr (kStage) {
      stager.slot0 = smem_addr(s_dyn) + warp * kSlots * StagerT::kSlotBytes + lane * 16;
      stager.row_bytes = p.S * static_cast<int>(sizeof(T));
      const T* item = static_cast<const T*>(p.value) + b * p.vb;
#pragma unroll
      for (int i = 0; i < K; ++i)
        stager.row[i] = reinterpret_cast<const char*>(item + max(min(x0 + i, p.T - 1), 0) * p.vx);
#pragma unroll
      for (int g = 0; g < kAhead; ++g) stager.template issue<true>(g);
    } else {
#pragma unroll
      for (int u = 0; u < NB - 1; ++u) fetch(buf[u], u, p.T);
    }
  }

  const ItemStart it = begin_item(p, b, part == 0);
  const int tx = it.tx, ty = it.ty;
  const bool valid = it.valid;
  int32_t* const start = it.start;
  int32_t* const dur = it.dur;
  // This CTA's share of the item's path block.
  char* item_path = p.path != nullptr ? p.path + b * p.pb * p.pes : nullptr;
  const int64_t path_bytes = static_cast<int64_t>(p.T) * p.S * p.pes;
  const int64_t zero_lo = path_bytes * part / p.splits,
                zero_hi = path_bytes * (part + 1) / p.splits;
  if (!valid || tx == 0) {  // the whole cluster leaves: tx, ty are the item's; an all-zero path
    if constexpr (kStage) stage_wait<0>();
    if (item_path != nullptr) zero_bytes(item_path, zero_lo, zero_hi, threadIdx.x, blockDim.x);
    return;
  }

  if (dp && lane < kStages) {
    mbar_init(&s_full[warp][lane], 1);    // the producer's lane 31
    mbar_init(&s_empty[warp][lane], 32);  // every lane of the consumer warp
  }
  const bool xring = kStage && p.splits > 1;  // the cluster's CTAs chained through s_xring
  if (xring && threadIdx.x < kStages) {
    mbar_init(&s_xfull[threadIdx.x], 1);
    mbar_init(&s_xempty[threadIdx.x], 32);
  }
  if (xring) {
#if __CUDA_ARCH__ >= 900
    fence_mbarrier_init();
    cg::this_cluster().sync();  // every CTA's barriers exist before any other CTA arrives
#else
    __trap();  // unreachable: choose_split never splits an item below sm_90 (no clusters)
#endif
  } else {
    __syncthreads();
  }
  constexpr int kStageBytes = kStage ? kSlots * StagerT::kSlotBytes : 0;  // a DP warp
  uint32_t* const bits_item =
      p.bits_smem
          ? reinterpret_cast<uint32_t*>(reinterpret_cast<char*>(s_dyn) + nwarps * kStageBytes)
          : p.bits + static_cast<size_t>(b) * p.W * p.Tw + row0;
  const int bstride = p.bits_smem ? p.rows : p.Tw;
  // Warp 0's progress, for the pace of the path warp (split items: long ones; a CTA without rows
  // in the item runs no DP and zeroes at once).
  const int32_t* const pace =
      p.pace_off > 0 && row0 < tx ? p.progress + p.pace_off + b * p.splits + part : nullptr;
  if (!dp) {
    if (item_path != nullptr)
      zero_paced(item_path, zero_lo, zero_hi, lane, pace, ty,
                 pace != nullptr ? min((ty + 255) / 256, 64) : 1);
  } else if (row0 < tx) {
    // Upstream of warp 0: the previous CTA (the staged kernel: s_xring; else the global ring) or
    // the first column's constants.
    const bool from_cta = part > 0 && warp == 0;
    const bool to_cta = part + 1 < p.splits && row0 + p.rows < tx && warp == nwarps - 1;
    const bool lane0 = lane == 0, lane31 = lane == 31, to_cta31 = to_cta && lane31;
    const int32_t* in_progress = p.progress + b * p.splits + part - 1;
    int32_t* out_progress = p.progress + b * p.splits + part;
    const size_t ring_len = static_cast<size_t>(p.W) * 32;
    const float* in_ring = p.ring + (static_cast<size_t>(b) * p.splits + part - 1) * ring_len;
    float* out_ring = p.ring + (static_cast<size_t>(b) * p.splits + part) * ring_len;
    uint64_t* full = warp + 1 < nwarps ? s_full[warp] : nullptr;  // null: no consumer here
    uint32_t* bits_out = bits_item + (x0 - row0);
    const bool live = x0 < tx;  // rows the backtrack reads
    const bool all_live = x0 + K <= tx;
    const int warp_rows_end = row0 + (warp + 1) * 32 * K;
    float q[K];  // Q[x0 + i, y - 1]; Q = neg at frame -1
#pragma unroll
    for (int i = 0; i < K; ++i) q[i] = p.neg;
    // Pieces every frame loop shares: the L2 prefetch of the rows a few blocks ahead, warp 0's
    // progress for the path warp's pace, and (staged loops) lane 0's upstream stage c.
    auto l2_ahead = [&](int c) {
      if constexpr (kVec && !kFused) {
        const int yp = (c + p.l2_blocks) * 32, yend = min(min(yp + 32 * p.l2_group, ty), p.S);
        if (p.l2_blocks > 0 && (c & (p.l2_group - 1)) == 0 && all_live && yp < yend)
#pragma unroll
          for (int i = 0; i < K; ++i) prefetch_l2(rows + i * p.vx + yp, (yend - yp) * sizeof(T));
      }
    };
    auto publish_pace = [&](int frame) {
      if (p.pace_off > 0 && warp == 0 && lane31)
        asm volatile("st.relaxed.gpu.global.s32 [%0], %1;" ::"l"(out_progress + p.pace_off),
                     "r"(min(frame, ty - 1))
                     : "memory");
    };
#if __CUDA_ARCH__ >= 900
    // Distributed-shared-memory addresses of the staged loops' cross-CTA ring (split items).
    uint32_t xempty_prev = 0, xring_next = 0, xfull_next = 0;
    if (kStage && from_cta) xempty_prev = cluster_map(s_xempty, part - 1);
    if (kStage && to_cta) xring_next = cluster_map(s_xring, part + 1), xfull_next = cluster_map(s_xfull, part + 1);
#endif
    // Stage c of lane 0's upstream row into r (frames 32c .. 32c + 31): from the warp above's
    // ring, from the previous CTA's last warp through s_xring, or the item's row -1 (neg).
    auto take_stage = [&](int c, float(&r)[32]) {
      if (warp > 0) {
        mbar_wait(&s_full[warp - 1][c % kStages], (c / kStages) & 1);
        lds32(&s_ring[warp - 1][(32 * c) & (kRing - 1)], r);
        mbar_arrive(&s_empty[warp - 1][c % kStages]);
      } else if (from_cta) {
#if __CUDA_ARCH__ >= 900
        mbar_wait_cluster(&s_xfull[c % kStages], (c / kStages) & 1);
        lds32(&s_xring[(32 * c) & (kRing - 1)], r);
        mbar_arrive_remote(xempty_prev + 8 * (c % kStages));
#endif
      } else {
#pragma unroll
        for (int j = 0; j < 32; ++j) r[j] = p.neg;
      }
    };
    // Stage c of this warp's last row (frames 32c .. 32c + 31, in t) into the next CTA's s_xring
    // by one lane, then that stage's full barrier there (the caller waited for s_xempty).
    auto send_stage = [&](int c, const float(&t)[32]) {
#if __CUDA_ARCH__ >= 900
      const uint32_t dst = xring_next + 4 * ((32 * c) & (kRing - 1));
#pragma unroll
      for (int k = 0; k < 8; ++k)
        st_cluster_v4(dst + 16 * k, t[4 * k], t[4 * k + 1], t[4 * k + 2], t[4 * k + 3]);
      mbar_arrive_remote(xfull_next + 8 * (c % kStages));
#endif
    };
    if constexpr (kStage) {
      // Upstream row, block c at a time: r[j] = Q[row0_warp - 1, 32c + j] (every lane holds all
      // 32; lane 0 uses them), prev = the frame before r[0]. Row -1 of the item (Cython's x == 0
      // case) is 0 at frame -1 and neg after.
      float r[32], t[32];
      float prev = part == 0 && warp == 0 ? 0.f : p.neg;
      const int src_lane = (lane + 31) & 31;
      float recv = shfl_rotate(q[K - 1], src_lane);  // lane 0: the warp's last row (unused)
      stage_wait<kAhead - 1>();
      stager.read(0, buf[0]);
      // One 32-frame block; kGeneral: its copies may cross the row's end, and cells above the
      // diagonal take likelihood 0 (mask_above_diagonal); else neither can happen.
      auto run_block = [&](int c, uint32_t(&bits)[K], auto general) {
        constexpr bool kGeneral = decltype(general)::value;
#pragma unroll
        for (int u = 0; u < kChunks; ++u) {
          const int g = c * kChunks + u;
          stager.template issue<kGeneral>(g + kAhead);  // into chunk g - 2's slot: consumed
          stage_wait<kAhead - 1>();                     // chunk g + 1 has landed
          stager.read(g + 1, buf[(u + 1) & 1]);
          uint32_t(&cur)[K][8] = buf[u & 1];
          if constexpr (kGeneral) mask_above_diagonal<S, K>(cur, x0 - g * kCols);
#pragma unroll
          for (int jj = 0; jj < kCols; ++jj) {
            const int j = u * kCols + jj;  // frame 32c + j
            const float nb = lane0 ? (j == 0 ? prev : r[j - 1]) : recv;
            q[K - 1] = cell_pred(K > 1 ? q[K > 1 ? K - 2 : 0] : nb, q[K - 1], Chunk<S>::get(cur[K - 1], jj),
                                 bits[K - 1], 1u << j);
            recv = shfl_rotate(q[K - 1], src_lane);
            t[j] = recv;
#pragma unroll
            for (int i = K - 2; i >= 0; --i)
              q[i] = cell_pred(i > 0 ? q[i - 1] : nb, q[i], Chunk<S>::get(cur[i], jj), bits[i],
                               1u << j);
          }
        }
      };
      const int nblocks = (ty + 31) / 32;
      // The last chunk a block copies ends at byte 32 * (c * kChunks + kChunks + kAhead).
      const int plain_end = stager.row_bytes / 32 - kChunks - kAhead;
      for (int c = 0; c < nblocks; ++c) {
        take_stage(c, r);
        l2_ahead(c);
        uint32_t bits[K];
#pragma unroll
        for (int i = 0; i < K; ++i) bits[i] = 0;
        if (32 * c >= warp_rows_end && c * kChunks <= plain_end)
          run_block(c, bits, std::false_type{});
        else
          run_block(c, bits, std::true_type{});
        if (live) store_bits<K>(bits_out + static_cast<size_t>(c) * bstride, bits);
        // Lane 0 holds the warp's last row for frames 32c .. 32c + 31: stage c of this warp's
        // ring (once the warp below has read stage c - kStages from the same slots) and, for the
        // CTA's last warp, the next CTA's s_xring.
        if (full != nullptr) {
          mbar_wait(&s_empty[warp][c % kStages], ((c / kStages) & 1) ^ 1);
          sts32_if(lane0, &s_ring[warp][(32 * c) & (kRing - 1)], t);
          if (lane0) mbar_arrive(&full[c % kStages]);
        }
        if (to_cta) {  // stage c of the next CTA's s_xring, once its warp 0 read stage c - 8
#if __CUDA_ARCH__ >= 900
          mbar_wait_cluster(&s_xempty[c % kStages], ((c / kStages) & 1) ^ 1);
#endif
          if (lane0) send_stage(c, t);
        }
        publish_pace(32 * c + 31);
        prev = r[31];
      }
    } else {
      float up = shfl_up1(q[K - 1]);  // Q[x0 - 1, y - 1] from the lane above (lanes > 0)
      // One 32-frame block; kFast: every load it issues takes the vector path and it holds no cell
      // above the diagonal (decided per warp).
      auto run_block = [&](int c, float ring_v, uint32_t(&bits)[K], auto fast) {
        constexpr bool kFast = decltype(fast)::value;
        float* ring_blk = s_ring[warp] + ((32 * c) & (kRing - 1));
        float* out_blk = out_ring + 32 * c;
#pragma unroll
        for (int u = 0; u < kChunks; ++u) {
          const int g = c * kChunks + u;  // chunk index
          if constexpr (kFast)
            load_chunk_vec<S, K>(p, rows, (g + NB - 1) * kCols, buf[(u + NB - 1) % NB]);
          else
            fetch(buf[(u + NB - 1) % NB], g + NB - 1, tx);
          uint32_t(&cur)[K][8] = buf[u % NB];
          if constexpr (!kFast)
            if (g * kCols < warp_rows_end) mask_above_diagonal<S, K>(cur, x0 - g * kCols);
#pragma unroll
          for (int jj = 0; jj < kCols; ++jj) {
            const int j = u * kCols + jj;            // frame 32c + j
            const float ring = shfl_idx(ring_v, j);  // every lane shuffles; lane 0 keeps it
            const float nb = lane0 ? ring : up;
            // The last row first: its shuffle for the next frame then overlaps the other rows.
            q[K - 1] = cell(K > 1 ? q[K > 1 ? K - 2 : 0] : nb, q[K - 1], Chunk<S>::get(cur[K - 1], jj),
                            bits[K - 1], 1u << j);
            up = shfl_up1(q[K - 1]);
            store_if(lane31, ring_blk + j, q[K - 1]);
            if (to_cta31) out_blk[j] = q[K - 1];
#pragma unroll
            for (int i = K - 2; i >= 0; --i)
              q[i] = cell(i > 0 ? q[i - 1] : nb, q[i], Chunk<S>::get(cur[i], jj), bits[i], 1u << j);
          }
        }
      };
      const bool warp_live = __all_sync(kFull, all_live);
      const int nblocks = (ty + 31) / 32;
      for (int c = 0; c < nblocks; ++c) {
        // lane j: Q[row0_warp - 1, 32c - 1 + j]; for the item's row -1 (Cython's x == 0 case) 0 at
        // frame -1, else neg.
        const float ring_v =
            take_upstream(p.neg, s_ring, s_full, s_empty, in_progress, in_ring, from_cta, warp,
                          nwarps, lane, 32 * c, ty, lane == 0 && c == 0 ? 0.f : p.neg);
        l2_ahead(c);
        uint32_t bits[K];
#pragma unroll
        for (int i = 0; i < K; ++i) bits[i] = 0;
        if (kVec && !kFused && warp_live && 32 * c >= warp_rows_end &&
            ((c + 1) * kChunks + NB - 1) * kCols <= p.S)
          run_block(c, ring_v, bits, std::true_type{});
        else
          run_block(c, ring_v, bits, std::false_type{});
        if (live) store_bits<K>(bits_out + static_cast<size_t>(c) * bstride, bits);
        if (lane31) publish(out_progress, to_cta, full, c, min(32 * c + 31, ty - 1));
        publish_pace(32 * c + 31);
      }
    }
  }
  if constexpr (kStage) stage_wait<0>();  // no copy outlives the loop (CTAs without rows too)
  // Every CTA's bit stores (and path zeros) are visible to the first CTA, which walks the path
  // back and writes the ones.
  if (p.splits > 1) {
#if __CUDA_ARCH__ >= 900
    __threadfence();
    cg::this_cluster().sync();
#else
    __trap();  // unreachable: choose_split never splits an item below sm_90 (no clusters)
#endif
  } else {
    __syncthreads();
  }
  if (part != 0) return;
  if (warp == 0)
    if (p.bits_smem) {
      if (lane == 0) backtrack_one_lane(bits_item, bstride, tx, ty, s_start);
    } else {
      backtrack(bits_item, bstride, p.Tw - row0, tx, ty, s_start, lane);
    }
  __syncthreads();  // the starts, for every thread of the CTA
  write_runs(s_start, start, tx, ty, dur, p.dx, item_path, p.px, p.py, p.pes, p.one, threadIdx.x,
             blockDim.x);
}

}  // namespace flashkit::cuda::mas_kernels
