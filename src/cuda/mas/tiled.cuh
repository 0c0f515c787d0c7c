// The MAS forward kernel for short texts (v16, bench/NOTES-mas.md): one warp runs the whole DP of
// an item, lane l owning rows R l .. R l + R - 1 (R = 1, 2, 4 or 8: texts up to 256 rows), as a
// wavefront of R x F tiles (F = one 32-byte chunk of a row: 8 fp32 frames, 16 half frames). At
// step s lane l computes frames F (s - l) .. F (s - l) + F - 1 of its rows, so the row above its
// first row (lane l - 1's last) reaches it by F shuffles issued at the end of the step before, a
// whole step ahead of their use, and nothing inside a step waits on another lane: the frame loop
// of the warp-synchronous kernels (one shuffle on the chain of every frame, ~83 cycles a frame at
// T = 128) becomes R F independent cells a step, bound by issue. Costs: 31 extra steps of fill
// (ragged: only the lanes whose rows the path can use), and the likelihood read at a different
// frame by every lane, which each lane stages for itself (Stager: its own slots, kSlots - 2
// chunks in flight, one commit group per chunk). Same cell (cell_pred), same diagonal mask, same
// bit layout ([W][32 R] words in shared memory), same backtrack and run writer as the staged
// kernel, so the paths are the same bit for bit. Included by src/cuda/mas/mas.cu only.
#pragma once
#include "cuda/mas/device.cuh"
#include "cuda/mas/path_writer.cuh"
#include "cuda/mas/staged.cuh"

namespace flashkit::cuda::mas_kernels {

constexpr int kTiledSlots = 16;  // chunks staged per lane (kSlots - 2 in flight), or 32
constexpr int kTiledMaxRows = 8;  // rows a lane: texts up to 256 rows

// Shared memory of the tiled kernel: the lane stages, then the bits ([W][32 R] words).
__host__ __device__ constexpr int tiled_stage_bytes(int r, int slots = kTiledSlots) {
  return slots * r * 1024;
}

// Chunk g of the lane's rows into its slot (guarded by `on`: nothing copied, the group still
// committed, so every lane commits one group a step). A 16-byte piece past the row's end is
// zero-filled and its source ignored (cp.async's ignore-src: not read), so the addresses are the
// row pointer plus the offset, one 64-bit add a row.
template <int R, int kSlots>
__device__ __forceinline__ void tiled_issue(const Stager<R, kSlots>& st, int g, bool on) {
  const uint32_t dst = st.slot0 + static_cast<uint32_t>(g & (kSlots - 1)) * st.kSlotBytes;
  const int off = g * 32;
  const uint32_t out0 = off >= st.row_bytes, out1 = off + 16 >= st.row_bytes;
#pragma unroll
  for (int i = 0; i < R; ++i)
    asm volatile(
        "{ .reg .pred p, q0, q1; setp.ne.u32 p, %2, 0; setp.ne.u32 q0, %3, 0;\n\t"
        "setp.ne.u32 q1, %4, 0;\n\t"
        "@p cp.async.cg.shared.global.L2::256B [%0], [%1], 16, q0;\n\t"
        "@p cp.async.cg.shared.global.L2::256B [%0+512], [%1+16], 16, q1; }" ::"r"(
            dst + 2 * i * 512),
        "l"(st.row[i] + off), "r"(static_cast<uint32_t>(on)), "r"(out0), "r"(out1)
        : "memory");
  asm volatile("cp.async.commit_group;" ::: "memory");
}

// Chunk g from its slot (lanes with `on` only; the others keep their registers).
template <int R, int kSlots>
__device__ __forceinline__ void tiled_read(const Stager<R, kSlots>& st, int g, bool on,
                                           uint32_t (&buf)[R][8]) {
  const uint32_t src = st.slot0 + static_cast<uint32_t>(g & (kSlots - 1)) * st.kSlotBytes;
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      asm volatile(
          "{ .reg .pred p; setp.ne.u32 p, %5, 0;\n\t"
          "@p ld.shared.v4.u32 {%0, %1, %2, %3}, [%4]; }"
          : "+r"(buf[i][4 * h]), "+r"(buf[i][4 * h + 1]), "+r"(buf[i][4 * h + 2]),
            "+r"(buf[i][4 * h + 3])
          : "r"(src + (2 * i + h) * 512), "r"(static_cast<uint32_t>(on))
          : "memory");
}

__device__ __forceinline__ float shfl_up1_or(float v, float lane0_value) {
  float r;
  asm volatile(
      "{ .reg .pred p; shfl.sync.up.b32 %0|p, %1, 1, 0, -1;\n\t"
      "@!p mov.f32 %0, %2; }"
      : "=f"(r)
      : "f"(v), "f"(lane0_value));
  return r;
}

// One CTA per item: warp 0 runs the DP, the backtrack and the runs; warp 1 (p.path set) zeroes the
// item's dense path block meanwhile. Requires p.splits == 1, contiguous 16-byte aligned rows,
// p.rows == 32 R and the bits in shared memory (mas.cu's choose_tiled).
template <Src S, int R, int kSlots>
__global__ void __launch_bounds__(64, 1) mas_forward_tiled(const Params p) {
  using T = typename Chunk<S>::T;
  constexpr int F = Chunk<S>::kCols;    // frames a chunk (a step)
  constexpr int kWordSteps = 32 / F;    // steps a 32-bit word of bits
  using StagerT = Stager<R, kSlots>;
  constexpr int kAhead = StagerT::kAhead;
  extern __shared__ uint4 s_dyn[];
  __shared__ int32_t s_start[32 * kTiledMaxRows];
  const int b = blockIdx.x;
  int tid;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(tid));
  const int lane = tid & 31;
  const bool dp = tid < 32;
  const int x0 = lane * R;

  StagerT st{};
  if (dp) {  // rows < T and frames < S exist whatever the lengths are: start the copies now
    st.slot0 = smem_addr(s_dyn) + lane * 16;
    st.row_bytes = p.S * static_cast<int>(sizeof(T));
    const T* item = static_cast<const T*>(p.value) + b * p.vb;
#pragma unroll
    for (int i = 0; i < R; ++i)
      st.row[i] = reinterpret_cast<const char*>(item + max(min(x0 + i, p.T - 1), 0) * p.vx);
#pragma unroll
    for (int g = 0; g < kAhead; ++g) tiled_issue(st, g, true);
    // FLASHKIT_MAS_TILED_L2=1 (measuring): ask L2 for the lane's whole rows now (one bulk
    // prefetch a row), so the chunk copies later find them there.
#if __CUDA_ARCH__ >= 900
    if (p.tiled_l2)
#pragma unroll
      for (int i = 0; i < R; ++i)
        if (x0 + i < p.T && st.row_bytes >= 16)
          asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(st.row[i]),
                       "r"(st.row_bytes & ~15)
                       : "memory");
#endif
  }

  const int2 len = item_lengths(p, b);
  const int tx = len.x, ty = len.y;
  const bool valid = tx >= 0 && tx <= p.T && ty >= 0 && ty <= p.S && tx <= ty;
  int32_t* start = p.start + static_cast<size_t>(b) * p.Tw;
  int32_t* dur = p.dur + b * p.db;
  for (int x = (valid ? tx : 0) + tid; x < p.T; x += blockDim.x) start[x] = 0, dur[x * p.dx] = 0;
  if (tid == 0) p.bad[b] = valid ? 0 : 1;
  char* item_path = p.path != nullptr ? p.path + b * p.pb * p.pes : nullptr;
  const int64_t path_bytes = static_cast<int64_t>(p.T) * p.S * p.pes;
  if (!valid || tx == 0) {
    stage_wait<0>();
    if (item_path != nullptr) zero_bytes(item_path, 0, path_bytes, tid, blockDim.x);
    return;
  }
  uint32_t* const bits = reinterpret_cast<uint32_t*>(reinterpret_cast<char*>(s_dyn) +
                                                     tiled_stage_bytes(R, kSlots));
  constexpr int bstride = 32 * R;

  if (!dp) {
    if (item_path != nullptr) zero_bytes(item_path, 0, path_bytes, lane, 32);
  } else {
    const int nblk = (ty + F - 1) / F;        // chunks of frames the path can use
    const int lanes = (tx + R - 1) / R;       // lanes whose rows it can use
    const int nsteps = nblk + lanes - 1;
    const bool lane0 = lane == 0;
    float q[R];     // Q[x0 + i, y - 1] of the lane's current frame y
    float recv[F];  // Q[x0 - 1, y0 .. y0 + F - 1] of this step (the lane above, step before)
    float prev = 0.f;  // Q[x0 - 1, y0 - 1]
    uint32_t word[R];
    uint32_t buf[R][8];
#pragma unroll
    for (int i = 0; i < R; ++i) q[i] = p.neg, word[i] = 0;
#pragma unroll
    for (int j = 0; j < F; ++j) recv[j] = p.neg;
    for (int s = 0; s < nsteps; ++s) {
      const int k = s - lane;  // this lane's chunk
      const bool active = k >= 0 && k < nblk;
      tiled_issue(st, k + kAhead, k >= 0 && (k + kAhead) * F < ty);
      stage_wait<kAhead>();  // chunk k has landed (every later group is one of the kAhead)
      tiled_read(st, k, active, buf);
      if (k == 0) {  // the lane's first frame: Q = neg at frame -1, row -1 is 0 there
#pragma unroll
        for (int i = 0; i < R; ++i) q[i] = p.neg, word[i] = 0;
        prev = lane0 ? 0.f : p.neg;
      }
      const int d = x0 - k * F;  // row minus frame of the tile's corner
      if (__any_sync(kFull, active && d > 1 - R)) mask_above_diagonal<S, R>(buf, d);
      uint32_t sb[R];
#pragma unroll
      for (int i = 0; i < R; ++i) sb[i] = 0;
      float t[F];  // the lane's last row, frames y0 .. y0 + F - 1
#pragma unroll
      for (int j = 0; j < F; ++j) {
        const float nb = j == 0 ? prev : recv[j - 1];
#pragma unroll
        for (int i = R - 1; i >= 0; --i)
          q[i] = cell_pred(i > 0 ? q[i > 0 ? i - 1 : 0] : nb, q[i], Chunk<S>::get(buf[i], j),
                           sb[i], 1u << j);
        t[j] = q[R - 1];
      }
      prev = recv[F - 1];
#pragma unroll
      for (int j = 0; j < F; ++j) recv[j] = shfl_up1_or(t[j], p.neg);
      const int part = k & (kWordSteps - 1);
#pragma unroll
      for (int i = 0; i < R; ++i) word[i] |= sb[i] << (part * F);
      if (active && (part == kWordSteps - 1 || k == nblk - 1)) {
        store_bits<R>(bits + static_cast<size_t>(k / kWordSteps) * bstride + x0, word);
#pragma unroll
        for (int i = 0; i < R; ++i) word[i] = 0;
      }
    }
  }
  stage_wait<0>();
  __syncthreads();  // the bits (and the path's zeros) before the walk and the ones
  if (tid == 0) backtrack_one_lane(bits, bstride, tx, ty, s_start);
  __syncthreads();
  write_runs(s_start, start, tx, ty, dur, p.dx, item_path, p.px, p.py, p.pes, p.one, tid,
             blockDim.x);
}

}  // namespace flashkit::cuda::mas_kernels
