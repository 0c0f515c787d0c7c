// The MAS forward kernel: DP over the band with the state in registers, decisions as bits, the
// backtrack at the end. Included by src/cuda/mas/mas.cu only.
#pragma once
#include "cuda/mas/device.cuh"

namespace flashkit::cuda::mas_kernels {

namespace cg = cooperative_groups;

// One CTA of an item's cluster: rows [row0, row0 + rows), K rows per thread. Every warp is a
// pipeline stage that runs on its own, without CTA barriers: it needs its upper neighbour's last
// row one frame back, which the neighbour warp publishes 32 frames at a time through a shared
// memory ring with a full/empty mbarrier pair per 32-frame stage (device.cuh; the CTA's first
// warp: from the previous CTA of the cluster, through global memory). NB chunks of the likelihood
// are in flight per thread (registers), NB - 1 ahead.
template <Src S, int K, int NB, bool kVec>
__global__ void __launch_bounds__(kMaxThreads, 1) mas_forward(const Params p) {
  constexpr int kCols = Chunk<S>::kCols;
  constexpr bool kFused = S == Src::fused;
  __shared__ float s_ring[kMaxThreads / 32][kRing];
  __shared__ uint64_t s_full[kMaxThreads / 32][kStages];   // ring w, stage s written
  __shared__ uint64_t s_empty[kMaxThreads / 32][kStages];  // ring w, stage s read
  const int b = blockIdx.x / p.splits, part = blockIdx.x % p.splits;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  const int tx = item_length(p.tx, p.txs, p.txl, p.tx_line, p.tx_dtype, b);
  const int ty = item_length(p.ty, p.tys, p.tyl, p.ty_line, p.ty_dtype, b);
  const bool valid = tx >= 0 && tx <= p.T && ty >= 0 && ty <= p.S && tx <= ty;
  int32_t* start = p.start + static_cast<size_t>(b) * p.Tw;
  int32_t* dur = p.dur + b * p.db;
  if (part == 0) {
    for (int x = (valid ? tx : 0) + threadIdx.x; x < p.T; x += blockDim.x)
      start[x] = 0, dur[x * p.dx] = 0;
    if (threadIdx.x == 0) p.bad[b] = valid ? 0 : 1;
  }
  if (!valid || tx == 0) return;  // the whole cluster leaves: tx, ty are the item's

  const int row0 = part * p.rows;
  const int x0 = row0 + threadIdx.x * K;
  const bool active = x0 < tx;
  uint32_t* gbits = p.bits + static_cast<size_t>(b) * p.W * p.Tw;
  if (lane < kStages) {
    mbar_init(&s_full[warp][lane], 1);    // the producer's lane 31
    mbar_init(&s_empty[warp][lane], 32);  // every lane of the consumer warp
  }
  __syncthreads();
  if (row0 < tx) {
    // Upstream of warp 0: the previous CTA (global ring) or the first column's constants.
    const bool from_cta = part > 0 && warp == 0;
    const bool to_cta = part + 1 < p.splits && row0 + p.rows < tx && warp == nwarps - 1;
    const int32_t* in_progress = p.progress + b * p.splits + part - 1;
    const float* in_ring = p.ring + (static_cast<size_t>(b) * p.splits + part - 1) * p.S;
    float* out_ring = p.ring + (static_cast<size_t>(b) * p.splits + part) * p.S;
    uint64_t* full = warp + 1 < nwarps ? s_full[warp] : nullptr;  // null: no consumer here
    float q[K];  // Q[x0 + i, y - 1]; the initial column is never read by a band cell
    uint32_t bits[K];
#pragma unroll
    for (int i = 0; i < K; ++i) q[i] = p.neg, bits[i] = 0;
    float ring_v = p.neg;  // lane j: Q[x0_warp - 1, (y & ~31) - 1 + j]

    auto fetch = [&](uint32_t(&buf)[K][8], int c) {
      if (!active) return;
      if constexpr (kFused)
        fused_chunk<K>(p, b, x0, c * 8, ty, buf);
      else
        load_chunk<S, K, kVec>(p, b, x0, tx, ty, c * kCols, buf);
    };
    // Every 32 frames (rare paths, kept out of line: the frame loop is unrolled and must stay
    // within the instruction cache).
    auto sync_upstream = [&](int y) {
      ring_v = take_upstream(p.neg, s_ring, s_full, s_empty, in_progress, in_ring, from_cta, warp,
                             nwarps, lane, y, ty, ring_v);
    };
    // The DP over the chunk's frames: Q[x, y] = max(Q[x, y-1], Q[x-1, y-1]) + value[x, y] with
    // Cython's constants at x == y and x == 0; its decision is the backtrack bit. Branch-free
    // except for the warp-uniform 32-frame bookkeeping.
    auto steps = [&](const uint32_t(&buf)[K][8], int c) {
#pragma unroll
      for (int j = 0; j < kCols; ++j) {
        const int y = c * kCols + j;
        if (y >= ty) break;
        if ((y & 31) == 0) sync_upstream(y);
        const float up = __shfl_up_sync(kFull, q[K - 1], 1);
        const float ring = __shfl_sync(kFull, ring_v, y & 31);
        const float first = warp > 0 || part > 0 ? ring : (y == 0 ? 0.f : p.neg);
        const float nb = lane > 0 ? up : first;
#pragma unroll
        for (int i = K - 1; i >= 0; --i) {
          const float v_cur = x0 + i == y ? p.neg : q[i];
          uint32_t bit;
          const float m = cython_max(i > 0 ? q[i - 1] : nb, v_cur, bit);
          q[i] = mas::add_rn(m, Chunk<S>::get(buf[i], j));
          bits[i] |= bit << (y & 31);
        }
        if (lane == 31) {
          s_ring[warp][y & (kRing - 1)] = q[K - 1];
          if (to_cta) out_ring[y] = q[K - 1];
        }
        if (((y & 31) == 30 || y == ty - 1) && lane == 31)
          publish(p.progress + b * p.splits + part, to_cta, full, y);
        if ((y & 31) == 31 || y == ty - 1) {
          if (active) {
            uint4* dst = reinterpret_cast<uint4*>(gbits + static_cast<size_t>(y >> 5) * p.Tw + x0);
#pragma unroll
            for (int i = 0; i < K; i += 4)
              dst[i / 4] = make_uint4(bits[i], bits[i + 1], bits[i + 2], bits[i + 3]);
          }
#pragma unroll
          for (int i = 0; i < K; ++i) bits[i] = 0;
        }
      }
    };

    const int nchunks = (ty + kCols - 1) / kCols;
    uint32_t buf[NB][K][8];
#pragma unroll
    for (int u = 0; u < NB - 1; ++u)
      if (u < nchunks) fetch(buf[u], u);
    for (int c0 = 0; c0 < nchunks; c0 += NB) {
#pragma unroll
      for (int u = 0; u < NB; ++u) {
        const int c = c0 + u;
        if (c >= nchunks) break;
        if (c + NB - 1 < nchunks) fetch(buf[(u + NB - 1) % NB], c + NB - 1);
        steps(buf[u], c);
      }
    }
  }
  // Every CTA's bit stores are visible to the first CTA's warp 0, which walks the path back.
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
  if (part == 0 && warp == 0) backtrack(p, tx, ty, gbits, start, dur, lane);
}

}  // namespace flashkit::cuda::mas_kernels
