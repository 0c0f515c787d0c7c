// The band kernel (v18; texts up to 256 rows, 16-byte aligned rows): one warp (two past 128 rows,
// v18d) runs the DP of an item in band coordinates with a lane skew, so no shuffle sits on a
// frame's chain and every lane reads the same frames at each step. Included by
// src/cuda/mas/mas.cu only.
//
// Cell (x, k) of the band is frame y = x + k, k in [0, ty - tx]; it reads (x, k - 1) (Cython's
// v_cur, neg at k = 0: the x == y rule) and (x - 1, k) (v_prev; row -1 is 0 at k = 0, else neg).
// Lane l owns rows R l .. R l + R - 1 (R = 1, 2, 4) and at step s computes the R x R tile of k in
// [R (s - l), R (s - l) + R): the rows above it (lane l - 1's last row, same k) were computed at
// step s - 1 and shuffled at its end, so within a step only the tile's own diagonal is a chain.
// Tile row r, column f is frame y = R s + r + f for every lane: a step reads frames R s ..
// R s + 2R - 2 of all rows, so the likelihood streams through a ring of 128-byte row segments in
// frame order (cp.async, one commit group a segment, 4 whole rows a warp instruction). The
// decision bits go to shared memory as words (frame / 32, row) with bit frame % 32, as the staged
// kernel's, and backtrack_one_lane walks them.
#pragma once
#include "cuda/common/pdl.h"
#include "cuda/mas/device.cuh"
#include "cuda/mas/path_writer.cuh"
#include "cuda/mas/staged.cuh"

namespace flashkit::cuda::mas_kernels {

constexpr int kBandMaxText = 256;
constexpr int kBandSegBytes = 128;  // bytes of each row in one segment
// A row's place in a slot: 128 bytes + 16 of padding, rows in the order (r, lane), so the 32
// lanes' 16-byte reads of one tile row fall in 8 different 16-byte bank groups (conflict-free).
constexpr int kBandRowStride = kBandSegBytes + 16;
constexpr int kBandRingBytes = 150 * 1024;  // the DP warps' likelihood rings together
constexpr int kBandStages = 8;              // stages of the ring between two DP warps

// Rows a lane (and frames a step) for T rows on NW DP warps: 1, 2, 4.
__host__ __device__ constexpr int band_rows_per_lane(int T, int NW = 1) {
  return T <= 32 * NW ? 1 : T <= 64 * NW ? 2 : 4;
}
__host__ __device__ constexpr int band_slot_bytes(int R) { return 32 * R * kBandRowStride; }
// Segments in a DP warp's ring: 8, or what kBandRingBytes allows (4 at R = 4 on 2 warps).
__host__ __device__ constexpr int band_segments(int R, int NW) {
  return kBandRingBytes / (NW * band_slot_bytes(R)) < 8 ? kBandRingBytes / (NW * band_slot_bytes(R))
                                                        : 8;
}
// Dynamic shared memory: the rings, then the decision words [ceil(S / 32)][32 R NW].
__host__ __device__ constexpr int band_smem_bytes(int R, int NW, int S) {
  return NW * band_segments(R, NW) * band_slot_bytes(R) + (S + 31) / 32 * 32 * R * NW * 4;
}

// 16 bytes from global src (16-byte aligned) to shared dst, of which the first n (0 .. 16) are
// read and the rest zero-filled; n = 16: the plain copy.
__device__ __forceinline__ void band_copy16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;" ::"r"(dst), "l"(src)
               : "memory");
}
__device__ __forceinline__ void band_copy16_n(uint32_t dst, const void* src, uint32_t n) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(n)
               : "memory");
}

// Bytes [0, n) of dst zeroed by one warp (lane `lane`) as bulk copies of the 4 KB zero buffer
// `zbuf` (v19c, sm_90): the copy engine's stores, issued while thread 0 walks the decision bits
// back, so they neither compete with the DP's likelihood loads nor queue 16-byte stores in front
// of the walk's shared-memory loads (bench/NOTES-mas.md v19c). The unaligned head and tail go as
// bytes. Returns once the zeros are written (visible to the CTA after a barrier, before the ones
// of write_runs).
__device__ __forceinline__ void zero_bulk(char* dst, int64_t n, uint4* zbuf, int lane) {
#if __CUDA_ARCH__ >= 900
  for (int i = lane; i < 256; i += 32) zbuf[i] = make_uint4(0, 0, 0, 0);
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the zeros, to the async proxy
  __syncwarp();
  const int64_t head =
      min(n, static_cast<int64_t>((16 - reinterpret_cast<uintptr_t>(dst) % 16) % 16));
  const int64_t body = (n - head) / 16 * 16;
  zero_bytes(dst, 0, head, lane, 32);  // the unaligned ends (< 16 bytes each)
  zero_bytes(dst, head + body, n, lane, 32);
  if (lane == 0) {
    const uint32_t src = smem_addr(zbuf);
    for (int64_t off = 0; off < body; off += 4096) {
      const uint32_t bytes = static_cast<uint32_t>(body - off < 4096 ? body - off : 4096);
      asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(
                       reinterpret_cast<uint64_t>(dst + head + off)),
                   "r"(src), "r"(bytes)
                   : "memory");
    }
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    asm volatile("fence.proxy.async.global;" ::: "memory");  // before the ones' generic stores
  }
  __syncwarp();
#else
  zero_bytes(dst, 0, n, lane, 32);
#endif
}

// F floats to shared address `addr` when `pred` (a predicated store: no branch in the DP loop).
template <int F>
__device__ __forceinline__ void band_store_pred(uint32_t addr, const float (&v)[F], bool pred) {
  static_assert(F == 2 || F == 4, "a step's chunk of 2 or 4 frames");
  if constexpr (F == 4)
    asm volatile(
        "{ .reg .pred p; setp.ne.u32 p, %0, 0; @p st.shared.v4.f32 [%1], {%2, %3, %4, %5}; }" ::"r"(
            static_cast<uint32_t>(pred)),
        "r"(addr), "f"(v[0]), "f"(v[1]), "f"(v[2]), "f"(v[3])
        : "memory");
  else
    asm volatile(
        "{ .reg .pred p; setp.ne.u32 p, %0, 0; @p st.shared.v2.f32 [%1], {%2, %3}; }" ::"r"(
            static_cast<uint32_t>(pred)),
        "r"(addr), "f"(v[0]), "f"(v[1])
        : "memory");
}

// NW = 2 DP warps (v18d): warp w owns rows 32 R w .. 32 R (w + 1) - 1 and runs the same loop on
// its own steps (its tile frames offset by 32 R w, so its segments are its own); lane 0 of warp 1
// takes the row above from warp 0's lane 31 through a shared-memory ring of kBandStages stages of
// kSpg chunks with a full / empty mbarrier pair per stage (lane 31 stores a chunk a step and
// arrives on full at the end of the block that completes a stage; lane 0 loads the stage's kSpg
// chunks into registers at the start of its block and arrives on empty at once, v19). Warp 1 runs
// 32 / kSpg + 1 blocks behind.
template <Src S, int R, int NW>
__global__ void __launch_bounds__(32 * NW + 96, 1) mas_forward_band(const Params p) {
  using T = typename Chunk<S>::T;
  constexpr int kEs = sizeof(T), F = R;
  constexpr int kSegFrames = kBandSegBytes / kEs;  // 32 (fp32) or 64 (16-bit)
  constexpr int kSpg = kSegFrames / F;             // steps a segment
  constexpr int kPiece = F * kEs;                  // bytes of a row a step reads
  constexpr int kWords = kPiece < 4 ? 1 : kPiece / 4;
  constexpr int kNW = kSegFrames / 32;  // decision words of a row a segment spans
  constexpr int kRows = 32 * R;
  constexpr int kSlot = band_slot_bytes(R), kSeg = band_segments(R, NW);
  constexpr int kXChunks = kBandStages * kSpg;  // chunks of the ring between warps
  static_assert(kSpg >= 1 && kSegFrames % F == 0, "a step's frames inside one segment");
  static_assert(NW == 1 || (32 % kSpg == 0 && kRows % kSegFrames == 0), "warp 1's frames");
  extern __shared__ uint4 s_dyn[];
  __shared__ int32_t s_start[kBandMaxText];
  __shared__ __align__(16) float s_x[NW > 1 ? kXChunks * F : 4];
  __shared__ uint64_t s_xfull[kBandStages], s_xempty[kBandStages];
  __shared__ uint4 s_zero[256];  // zero_bulk's source (p.band_bulk)
  pdl_launch_dependents();
  // The warp index broadcast from lane 0: ptxas then knows every branch on it is warp-uniform,
  // so the DP loop's shuffles need no divergence check (BRA.DIV), which would cut the unrolled
  // steps into separate scheduling blocks (v19).
  const int tid = threadIdx.x, lane = tid & 31, b = blockIdx.x;
  const int warp = __shfl_sync(0xffffffffu, tid >> 5, 0);
  const bool dp = warp < NW;
  // FLASHKIT_MAS_TRACE (mas.cu): clock64 at the phases, CTA 0, lane 0 of each DP warp.
  int64_t* const trace =
      p.trace != nullptr && b == 0 && lane == 0 && dp ? p.trace + 8 * warp : nullptr;
  auto stamp = [&](int i) {
    if (trace != nullptr) trace[i] = clock64();
  };
  stamp(0);
  char* const ring = reinterpret_cast<char*>(s_dyn) + (dp ? warp : 0) * kSeg * kSlot;
  uint32_t* const bits =
      reinterpret_cast<uint32_t*>(reinterpret_cast<char*>(s_dyn) + NW * kSeg * kSlot);
  const int row0 = dp ? kRows * warp : 0;  // the warp's first row
  const int gofs = row0 / kSegFrames;      // its block g reads segment g + gofs (frames + row0)
  const char* item = static_cast<const char*>(p.value) + b * p.vb * kEs;
  const int row_bytes = p.S * kEs;
  if (NW > 1 && tid < kBandStages) mbar_init(&s_xfull[tid], 1), mbar_init(&s_xempty[tid], 1);

  // Segment g (bytes 128 g .. 128 g + 127 of each row < T) into slot g % kSeg, one commit group:
  // lane t copies 16-byte piece u = t % 8 of rows q + 4 i (q = t / 8), i.e. 4 whole 128-byte
  // rows a warp instruction. Row row0 + R l + r sits at place r * 32 + l of the warp's slot.
  const int q = lane >> 3, u = lane & 7;
  const int copies = p.T > row0 + q ? (p.T - row0 - q + 3) / 4 : 0;  // i with a row < T
  const int lane_place = (q % R) * 32 + q / R;
  const uint32_t dst0 = smem_addr(ring) + lane_place * kBandRowStride + 16 * u;
  const char* src0 = item + static_cast<int64_t>(row0 + q) * p.vx * kEs + 16 * u;
  const int64_t step4 = 4 * p.vx * kEs;
  auto issue = [&](int g) {
    const int off = (g + gofs) * kBandSegBytes;
    const uint32_t dst = dst0 + (g % kSeg) * kSlot;
    const char* src = src0 + off;
    if (off + kBandSegBytes <= row_bytes) {
#pragma unroll
      for (int i = 0; i < 8 * R; ++i, src += step4)
        if (i < copies) band_copy16(dst + (4 / R) * i * kBandRowStride, src);
    } else {
      const int n = min(max(row_bytes - off - 16 * u, 0), 16);
#pragma unroll
      for (int i = 0; i < 8 * R; ++i, src += step4)
        if (i < copies && n > 0) band_copy16_n(dst + (4 / R) * i * kBandRowStride, src, n);
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  };
  // Rows < T and bytes < S exist whatever the lengths are: the first segments go out now.
  if (dp)
#pragma unroll 1
    for (int g = 0; g < kSeg - 1; ++g) issue(g);
  if (NW > 1) __syncthreads();  // the ring's mbarriers (item_lengths' barrier follows reads)
  stamp(1);

  const ItemStart it = begin_item(p, b, true);
  stamp(2);
  const int tx = it.tx, ty = it.ty;
  const bool valid = it.valid;
  char* item_path = p.path != nullptr ? p.path + b * p.pb * p.pes : nullptr;
  const int64_t path_bytes = static_cast<int64_t>(p.T) * p.S * p.pes;
  const int zero_threads = static_cast<int>(blockDim.x) - 32 * NW;

  if (!valid || tx == 0) {  // an all-zero path; the copies in flight land before the CTA leaves
    asm volatile("cp.async.wait_all;" ::: "memory");
    if (item_path != nullptr) zero_bytes(item_path, 0, path_bytes, tid, blockDim.x);
    return;
  }

  if (!dp) {
    // p.band_bulk: the zeros go during the backtrack, below (the DP's loads run alone).
    if (item_path != nullptr && !p.band_bulk)
      zero_bytes(item_path, 0, path_bytes, tid - 32 * NW, zero_threads);
  } else if (row0 < tx) {
    const float neg = p.neg;
    const int nch = (ty - tx + F) / F;  // chunks of the band's ty - tx + 1 columns
    const int nsteps = nch + min((tx - row0 + R - 1) / R, 32) - 1;  // the last live lane's last
    const int nblocks = (nsteps + kSpg) / kSpg;  // steps -1 .. nsteps - 1, kSpg a block
    const int maxst = (nch - 1) / kSpg;          // the ring's last stage with a live chunk
    const bool from_warp = NW > 1 && warp > 0;
    const bool to_warp = NW > 1 && warp == 0 && kRows < tx;
    float qlast[R];  // Q[x, k - 1] of the lane's rows at its next chunk's first column
    float up[F];     // Q[R lane - 1, k] of the next step (lane 0: row -1)
#pragma unroll
    for (int r = 0; r < R; ++r) qlast[r] = neg;
#pragma unroll
    for (int f = 0; f < F; ++f) up[f] = neg;
    uint32_t pa[R][kWords], pb[R][kWords];  // pieces s and s + 1 of the lane's rows
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int w = 0; w < kWords; ++w) pa[r][w] = pb[r][w] = 0;
    // Decision words: [0] the previous segment's last word, [m] word m - 1 of this segment's.
    uint32_t acc[R][kNW + 1];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int m = 0; m <= kNW; ++m) acc[r][m] = 0;
    auto store_words = [&](int wi, int m) {  // word wi of the lane's rows from acc[.][m]
      if (wi < 0 || wi >= p.W) return;
      uint32_t* dst = bits + wi * (kRows * NW) + row0 + R * lane;
      if constexpr (R == 1) {
        dst[0] = acc[0][m];
      } else if constexpr (R == 2) {
        *reinterpret_cast<uint2*>(dst) = make_uint2(acc[0][m], acc[1][m]);
      } else {
        *reinterpret_cast<uint4*>(dst) = make_uint4(acc[0][m], acc[1][m], acc[2][m], acc[3][m]);
      }
    };
    const char* lane_ring = ring + lane * kBandRowStride;
    const uint32_t sx_addr = smem_addr(s_x);
#pragma unroll 1
    for (int g = 0; g < nblocks; ++g) {
      stage_wait<kSeg - 2>();  // this lane's copies of segment g have landed
      __syncwarp();            // every lane's have, and every lane has read slot (g - 1) % kSeg
      if (g + kSeg - 1 < nblocks)
        issue(g + kSeg - 1);
      else
        asm volatile("cp.async.commit_group;" ::: "memory");
      // Lane 0 of warp 1 takes stage g of the ring (the block's kSpg chunks of the row above)
      // into registers at once and frees it (v19: no shared-memory load waits inside the steps);
      // lane 31 of warp 0 stores stage xst (chunks s - 31 of its steps) once warp 1 has freed it.
      const bool x_wait = from_warp && g <= maxst;
      float xin[NW > 1 ? kSpg : 1][F];
      if constexpr (NW > 1) {
#pragma unroll
        for (int j = 0; j < kSpg; ++j)
#pragma unroll
          for (int f = 0; f < F; ++f) xin[j][f] = neg;
        if (x_wait) {
          mbar_wait(&s_xfull[g % kBandStages], (g / kBandStages) & 1);
          if (lane == 0) {
#pragma unroll
            for (int j = 0; j < kSpg; ++j)
              if (g * kSpg + j < nch)
#pragma unroll
                for (int f = 0; f < F; ++f) xin[j][f] = s_x[((g * kSpg + j) % kXChunks) * F + f];
            mbar_arrive(&s_xempty[g % kBandStages]);
          }
        }
      }
      const int xst = g - 32 / kSpg;
      const bool x_send = to_warp && xst >= 0 && xst <= maxst;
      if (x_send && xst >= kBandStages)
        mbar_wait(&s_xempty[xst % kBandStages], ((xst / kBandStages) & 1) ^ 1);
      const char* slot = lane_ring + (g % kSeg) * kSlot;
#pragma unroll
      for (int j = 0; j < kSpg; ++j) {
        const int s = g * kSpg + j - 1;  // this step; it reads piece s + 1 = piece j of segment g
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const char* src = slot + r * 32 * kBandRowStride + j * kPiece;
#pragma unroll
          for (int w = 0; w < kWords; ++w) pa[r][w] = pb[r][w];
          if constexpr (kPiece == 2) {
            pb[r][0] = *reinterpret_cast<const uint16_t*>(src);
          } else if constexpr (kPiece == 4) {
            pb[r][0] = *reinterpret_cast<const uint32_t*>(src);
          } else if constexpr (kPiece == 8) {
            const uint2 v = *reinterpret_cast<const uint2*>(src);
            pb[r][0] = v.x, pb[r][1] = v.y;
          } else {
            const uint4 v = *reinterpret_cast<const uint4*>(src);
            pb[r][0] = v.x, pb[r][1] = v.y, pb[r][2] = v.z, pb[r][3] = v.w;
          }
        }
        if (s >= 0) {
          float q[R][F];
#pragma unroll
          for (int r = 0; r < R; ++r)
#pragma unroll
            for (int f = 0; f < F; ++f) {
              const int e = r + f;  // frame R s + e: piece s element e, or piece s + 1's e - F
              const float v = e < F ? Chunk<S>::get(pa[r], e) : Chunk<S>::get(pb[r], e - F);
              const int fr = F * (j - 1) + e + 32;  // frame - 32 (kSpg g - 1) in this block
              q[r][f] = cell_pred<true>(r > 0 ? q[r - 1][f] : up[f], f > 0 ? q[r][f - 1] : qlast[r],
                                        v, acc[r][fr >> 5], 1u << (fr & 31));
            }
          const bool started = s >= lane;  // else the tile lies before the band: k < 0
#pragma unroll
          for (int r = 0; r < R; ++r) qlast[r] = started ? q[r][F - 1] : neg;
          if constexpr (NW > 1) {  // lane 31: chunk s - 31 of the warp's last row, into stage xst
            band_store_pred<F>(sx_addr + ((s - 31) % kXChunks) * F * 4, q[R - 1],
                               x_send && lane == 31);
          }
          // The lane above's last row; lane 0: row -1 (neg) or, in warp 1, warp 0's last row
          // (chunk s + 1, loaded at the block's start).
#pragma unroll
          for (int f = 0; f < F; ++f) {
            const float t = shfl_up1(q[R - 1][f]);
            float in = neg;
            if constexpr (NW > 1) in = xin[j][f];
            up[f] = lane == 0 ? in : t;
          }
        } else if (lane == 0) {  // for step 0: row -1 at k = 0 (Cython's y == 0), warp 1's chunk 0
          if constexpr (NW > 1) {
#pragma unroll
            for (int f = 0; f < F; ++f) up[f] = from_warp ? xin[0][f] : (f == 0 ? 0.f : neg);
          } else {
            up[0] = 0.f;
          }
        }
        // The previous segment's last word is complete after step j = 0, word m after j = 32 m / F.
        if (j == 0) store_words((g + gofs) * kNW - 1, 0);
#pragma unroll
        for (int m = 1; m < kNW; ++m)
          if (j == 32 * m / F) store_words((g + gofs) * kNW + m - 1, m);
      }
      if (x_send && lane == 31) mbar_arrive(&s_xfull[xst % kBandStages]);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        acc[r][0] = acc[r][kNW];
#pragma unroll
        for (int m = 1; m <= kNW; ++m) acc[r][m] = 0;
      }
    }
    store_words((nblocks + gofs) * kNW - 1, 0);
    stamp(3);
  }
  asm volatile("cp.async.wait_all;" ::: "memory");  // no copy outlives the CTA
  __syncthreads();  // the decision words (the DP warps), the zero warps' zeros (!p.band_bulk)
  stamp(4);
  if (tid == 0) {
    const int steps = backtrack_one_lane(bits, kRows * NW, tx, ty, s_start);
    if (trace != nullptr) trace[7] = steps;
  }
  // v19c: the path's zeros as bulk copies by the zero warp while thread 0 walks the bits back
  // (no likelihood loads left to queue behind them).
  if (p.band_bulk && warp == NW && item_path != nullptr)
    zero_bulk(item_path, path_bytes, s_zero, lane);
  stamp(5);
  __syncthreads();
  write_runs(s_start, it.start, tx, ty, it.dur, p.dx, item_path, p.px, p.py, p.pes, p.one, tid,
             blockDim.x);
  stamp(6);
}

}  // namespace flashkit::cuda::mas_kernels
