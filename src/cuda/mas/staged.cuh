// Pieces of the forward kernel's staged frame loop (v8; contiguous, 16-byte aligned likelihood
// rows, K = 4): likelihood chunks copied to shared memory by cp.async with one commit group per
// chunk, and the warp-to-warp ring handed over as whole 32-frame blocks held in registers.
// Included by src/cuda/mas/forward.cuh only.
#pragma once
#include "cuda/mas/device.cuh"

namespace flashkit::cuda::mas_kernels {

// One 16-byte cp.async of row bytes off .. off + 15 into shared address d. kEdge: a piece past the
// row's end (rows are whole 16-byte pieces: a piece is all in or all out) is zero-filled and not
// read (ignore-src); else it is known to lie inside the row.
template <bool kEdge>
__device__ __forceinline__ void copy16(uint32_t d, const char* row, int off, int row_bytes) {
  if constexpr (kEdge) {
    const uint32_t out = off >= row_bytes;
    const char* src = out ? row : row + off;
    asm volatile(
        "{ .reg .pred p; setp.ne.u32 p, %2, 0;\n\t"
        "cp.async.cg.shared.global.L2::256B [%0], [%1], 16, p; }" ::"r"(d),
        "l"(src), "r"(out)
        : "memory");
  } else {
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;" ::"r"(d), "l"(row + off)
                 : "memory");
  }
}

// One lane's staging of kSlots_ chunks (8, 16 or 32: mas.cu's stage_slots, by the shared memory
// the CTA's warps leave): kAhead in flight ahead of the one being read, two slots of slack (a
// slot is refilled a whole chunk after its registers were used). Why not registers (v7): every
// LDG shared one scoreboard, so the first use of any chunk waited for all loads in flight, the
// ones issued a few frames earlier included: a full L2 latency per 32-frame block (ncu, T = 128
// and 512: the block's first shuffle and the loop branch were the top stalls). A commit group
// per chunk makes the wait name exactly the chunk needed. Why deeper than 8 (v9): with one or two
// DP warps per SM (T <= 1024) a warp's 6 chunks in flight (48 frames, ~1 us of DP) hid less than
// a loaded DRAM round trip.
// Slot s of warp w holds, for each of the lane's K rows, the chunk's two 16-byte halves at
// [s][row i][half h][lane] (16 bytes a lane: conflict-free copies and reads). Only the lane
// itself writes and reads its bytes, so nothing is shared between threads.
template <int K, int kSlots_ = 8>
struct Stager {
  static constexpr int kSlots = kSlots_, kAhead = kSlots - 2;
  static_assert((kSlots & (kSlots - 1)) == 0 && kSlots >= 4, "slots: a power of two");
  static constexpr uint32_t kSlotBytes = K * 2 * 32 * 16;
  uint32_t slot0;      // shared address of this lane's bytes in slot 0, row 0, half 0
  const char* row[K];  // the lane's rows; rows >= T point at row T - 1 (never read by the band)
  int row_bytes;       // S * element size

  // Chunk g (bytes 32g .. 32g + 31 of each row) into slot g % kSlots, then one commit group;
  // kEdge: copy16's.
  template <bool kEdge>
  __device__ __forceinline__ void issue(int g) const {
    const uint32_t dst = slot0 + static_cast<uint32_t>(g & (kSlots - 1)) * kSlotBytes;
    const int off = g * 32;
#pragma unroll
    for (int i = 0; i < K; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        copy16<kEdge>(dst + (2 * i + h) * 512, row[i], off + 16 * h, row_bytes);
    asm volatile("cp.async.commit_group;" ::: "memory");
  }

  // Chunk g from its slot into registers (once its group has landed: wait<>).
  __device__ __forceinline__ void read(int g, uint32_t (&buf)[K][8]) const {
    const uint32_t src = slot0 + static_cast<uint32_t>(g & (kSlots - 1)) * kSlotBytes;
#pragma unroll
    for (int i = 0; i < K; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(buf[i][4 * h]), "=r"(buf[i][4 * h + 1]), "=r"(buf[i][4 * h + 2]),
                       "=r"(buf[i][4 * h + 3])
                     : "r"(src + (2 * i + h) * 512)
                     : "memory");
  }
};

// Returns once at most N of this thread's most recent commit groups are still in flight.
template <int N>
__device__ __forceinline__ void stage_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// The warp's neighbour one row up, per frame: lane l gets lane l - 1's value and lane 0 gets
// lane 31's, i.e. the warp's last row, which lane 0 collects for the warp below (t[] in the loop)
// instead of lane 31 storing it every frame.
__device__ __forceinline__ float shfl_rotate(float v, int src_lane) {
  float r;
  asm volatile("shfl.sync.idx.b32 %0, %1, %2, 31, -1;" : "=f"(r) : "f"(v), "r"(src_lane));
  return r;
}

// 32 floats from shared memory (16-byte aligned; every lane reads the same: a broadcast).
__device__ __forceinline__ void lds32(const float* src, float (&v)[32]) {
#pragma unroll
  for (int k = 0; k < 8; ++k)
    asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v[4 * k]), "=f"(v[4 * k + 1]), "=f"(v[4 * k + 2]), "=f"(v[4 * k + 3])
                 : "r"(smem_addr(src + 4 * k))
                 : "memory");
}

// 32 floats to shared memory by one lane (pred) as 8 vector stores.
__device__ __forceinline__ void sts32_if(bool pred, float* dst, const float (&v)[32]) {
#pragma unroll
  for (int k = 0; k < 8; ++k)
    asm volatile(
        "{ .reg .pred p; setp.ne.u32 p, %0, 0; @p st.shared.v4.f32 [%1], {%2, %3, %4, %5}; }" ::"r"(
            static_cast<uint32_t>(pred)),
        "r"(smem_addr(dst + 4 * k)), "f"(v[4 * k]), "f"(v[4 * k + 1]), "f"(v[4 * k + 2]),
        "f"(v[4 * k + 3])
        : "memory");
}

}  // namespace flashkit::cuda::mas_kernels
