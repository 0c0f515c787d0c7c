// Device building blocks of the MAS forward kernel (forward.cuh): exact Cython max, length and
// likelihood loads, the parameter block, the bit backtrack and the warp-to-warp ring protocol
// (shared-memory mbarriers). Included by src/cuda/mas/mas.cu only.
#pragma once
#include <cooperative_groups.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/mas_likelihood.h"
#include "flashkit/tensor.h"

namespace flashkit::cuda::mas_kernels {

constexpr int kMaxText = 2048;     // 256 threads x 8 rows
constexpr int kMaxThreads = 256;   // 8 warps: one shared-memory ring each
constexpr int kMaxChannels = 256;  // fused: channels (a bound on the work per frame)
constexpr unsigned kFull = 0xffffffffu;
constexpr int kL2Ahead = 6;  // chunks (48 fp32 frames) prefetched into L2 ahead of the loads

// Cython's max(v_cur, v_prev) = (v_prev > v_cur) ? v_prev : v_cur, and the decision as a bit.
// Exact compare: the library builds with fast math (flush-to-zero); Cython does not flush.
__device__ __forceinline__ float cython_max(float v_prev, float v_cur, uint32_t& up) {
  float m;
  asm("{ .reg .pred p; setp.gt.f32 p, %2, %3; selp.f32 %0, %2, %3, p; selp.u32 %1, 1, 0, p; }"
      : "=f"(m), "=r"(up)
      : "f"(v_prev), "f"(v_cur));
  return m;
}

// Shared-memory rings between the warps of a CTA: warp w writes Q of its last row per frame into
// ring w, read by warp w + 1. Stage c of a ring is frames 32c - 1 .. 32c + 30 (what the consumer
// takes at frame 32c: one frame back for each of its 32 frames), so stages c and c + kStages
// share slots. Each stage has a full barrier (1 arrival: the producer's lane 31 after writing the
// stage) and an empty one (32 arrivals: every consumer lane after reading it); stage c is the
// (c / kStages)-th phase of both, so waits go by the parity of c / kStages.
constexpr int kRing = 256;  // frames
constexpr int kStages = kRing / 32;

__device__ __forceinline__ double load_number(const void* base, int dtype, int64_t i) {
  switch (static_cast<DType>(dtype)) {
    case DType::f32:
      return static_cast<const float*>(base)[i];
    case DType::f16:
      return __half2float(static_cast<const __half*>(base)[i]);
    case DType::bf16:
      return __uint_as_float(static_cast<uint32_t>(static_cast<const uint16_t*>(base)[i]) << 16);
    case DType::f64:
      return static_cast<const double*>(base)[i];
    case DType::i32:
      return static_cast<const int32_t*>(base)[i];
    case DType::i64:
      return static_cast<double>(static_cast<const int64_t*>(base)[i]);
    default:
      return static_cast<const uint8_t*>(base)[i];  // u8, bool8
  }
}

// An item's length: the int32 entry, or the sum of its mask line truncated like astype(int32)
// (every thread of the CTA takes part: a block reduction).
static __device__ int item_length(const void* base, int64_t sb, int64_t sl, int line, int dtype,
                                  int b) {
  if (line < 0) return static_cast<const int32_t*>(base)[b * sb];
  __shared__ double partial[32];
  double acc = 0;
  for (int i = threadIdx.x; i < line; i += blockDim.x)
    acc += load_number(base, dtype, b * sb + i * sl);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  __syncthreads();  // partial[] of an earlier call has been read
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = acc;
  __syncthreads();
  double total = 0;
  for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) total += partial[w];
  return static_cast<int>(total);
}

__device__ __forceinline__ float load_float(const void* base, int dtype, int64_t i) {
  switch (static_cast<DType>(dtype)) {
    case DType::f16:
      return __half2float(static_cast<const __half*>(base)[i]);
    case DType::bf16:
      return __uint_as_float(static_cast<uint32_t>(static_cast<const uint16_t*>(base)[i]) << 16);
    default:
      return static_cast<const float*>(base)[i];
  }
}

// Where the likelihood comes from. A chunk is 32 bytes of one row, held as 8 raw words.
enum class Src { f32, f16, bf16, fused };
template <Src S>
struct Chunk;
template <>
struct Chunk<Src::f32> {
  using T = float;
  static constexpr int kCols = 8;
  __device__ static float get(const uint32_t* w, int j) { return __uint_as_float(w[j]); }
};
template <>
struct Chunk<Src::fused> : Chunk<Src::f32> {};
template <>
struct Chunk<Src::f16> {
  using T = uint16_t;
  static constexpr int kCols = 16;
  __device__ static float get(const uint32_t* w, int j) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(w[j / 2] >> (16 * (j & 1)))));
  }
};
template <>
struct Chunk<Src::bf16> {
  using T = uint16_t;
  static constexpr int kCols = 16;
  __device__ static float get(const uint32_t* w, int j) {
    return __uint_as_float((j & 1) ? (w[j / 2] & 0xffff0000u) : (w[j / 2] << 16));
  }
};

struct Params {
  const void* value;  // [B, T, S] (unfused)
  int64_t vb, vx, vy;
  const void* z;  // [B, C, S] (fused)
  int64_t zb, zc, zy;
  int zdtype;
  const float* coef;  // fused: [B][C][3][Tw] = c0, c1, c2 per text row
  int C;
  // Lengths: int32 [B] (line < 0) or mask lines [B, line] of dtype *_dtype, summed.
  const void* tx;
  int64_t txs, txl;
  int tx_line, tx_dtype;
  const void* ty;
  int64_t tys, tyl;
  int ty_line, ty_dtype;
  int T, S, Tw, W;  // Tw: T rounded up to 8; W: words per row of bits = ceil(S / 32)
  float neg;
  uint32_t* bits;  // [B][W][Tw]: bit (y % 32) of word (y / 32, x): Q[x-1, y-1] > Q[x, y-1]
  int32_t* start;  // [B][Tw]: first frame of row x's run
  int32_t* dur;    // frames of row x's run: the durations output or scratch
  int64_t db, dx;
  int32_t* bad;  // [B]: 1 where the item's lengths admit no path
  // An item's rows are split over `splits` CTAs of one cluster (co-scheduled, so waiting on a
  // neighbour cannot deadlock), `rows` each. CTA k reads Q[row0 - 1, y] of CTA k-1 from `ring`
  // ([B][splits][S]) once `progress` ([B][splits], -1 before the launch) has passed y.
  int splits, rows;
  float* ring;
  int32_t* progress;
};

__device__ __forceinline__ void store_release(int32_t* p, int32_t v) {
  asm volatile("st.release.gpu.global.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ int32_t load_acquire(const int32_t* p) {
  int32_t v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Shared-memory mbarriers (CTA scope): arrive releases the thread's earlier accesses, a wait that
// sees the phase complete acquires them.
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count)
               : "memory");
}
// sm_80 has mbarriers without the explicit .release/.acquire forms and without try_wait; its
// arrive and test_wait have those semantics at CTA scope by default (PTX ISA), so the Ampere build
// spells them that way and polls.
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
#if __CUDA_ARCH__ >= 900
  asm volatile(
      "{ .reg .b64 state; mbarrier.arrive.release.cta.shared::cta.b64 state, [%0]; }" ::"r"(
          smem_addr(bar))
      : "memory");
#else
  asm volatile("{ .reg .b64 state; mbarrier.arrive.shared.b64 state, [%0]; }" ::"r"(
                   smem_addr(bar))
               : "memory");
#endif
}
// Returns once the phase of parity `parity` has completed (parity 1 on a fresh barrier: at once).
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done;
  do {
#if __CUDA_ARCH__ >= 900
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [%1], %2; "
        "selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
#else
    asm volatile(
        "{ .reg .pred p; mbarrier.test_wait.parity.shared.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
#endif
  } while (!done);
}

template <Src S, int K, bool kVec>
__device__ __forceinline__ void load_chunk(const Params& p, int b, int x0, int tx, int ty, int y0,
                                           uint32_t (&buf)[K][8]) {
  using T = typename Chunk<S>::T;
  constexpr int kCols = Chunk<S>::kCols;
  const T* base = static_cast<const T*>(p.value) + b * p.vb;
#pragma unroll
  for (int i = 0; i < K; ++i) {
    const int x = x0 + i;
    const T* row = base + static_cast<int64_t>(x) * p.vx;
    if (x < tx && kVec && y0 + kCols <= p.S) {
      // The register buffers hold only one chunk ahead (a deeper unroll overflows the
      // instruction cache); an L2 prefetch kL2Ahead chunks ahead covers DRAM latency instead.
      if (y0 + (kL2Ahead + 1) * kCols <= p.S)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(row + y0 + kL2Ahead * kCols));
      const uint4 lo = __ldg(reinterpret_cast<const uint4*>(row + y0));
      const uint4 hi = __ldg(reinterpret_cast<const uint4*>(row + y0) + 1);
      buf[i][0] = lo.x, buf[i][1] = lo.y, buf[i][2] = lo.z, buf[i][3] = lo.w;
      buf[i][4] = hi.x, buf[i][5] = hi.y, buf[i][6] = hi.z, buf[i][7] = hi.w;
    } else {
#pragma unroll
      for (int w = 0; w < 8; ++w) buf[i][w] = 0;
      if (x < tx) {
#pragma unroll
        for (int j = 0; j < kCols; ++j) {
          const int y = y0 + j;
          if (y >= ty) break;
          uint32_t v;
          if constexpr (sizeof(T) == 4)
            v = __float_as_uint(row[y * p.vy]);
          else
            v = row[y * p.vy];
          buf[i][j * sizeof(T) / 4] |= v << (sizeof(T) == 4 ? 0 : 16 * (j & 1));
        }
      }
    }
  }
}

// Fused: value[x, y0 + j] for the thread's rows from the coefficients and z[b, c, y0 + j]
// (every lane reads the same z: one broadcast load, mostly from L2).
template <int K>
__device__ __forceinline__ void fused_chunk(const Params& p, int b, int x0, int y0, int ty,
                                            uint32_t (&buf)[K][8]) {
  float acc[K][8];
#pragma unroll
  for (int i = 0; i < K; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;
  const float* coef = p.coef + static_cast<size_t>(b) * p.C * 3 * p.Tw + x0;
  for (int c = 0; c < p.C; ++c) {
    mas::Coeffs k[K];
#pragma unroll
    for (int i = 0; i < K; i += 4) {
      const float4 a0 = *reinterpret_cast<const float4*>(coef + (3 * c + 0) * p.Tw + i);
      const float4 a1 = *reinterpret_cast<const float4*>(coef + (3 * c + 1) * p.Tw + i);
      const float4 a2 = *reinterpret_cast<const float4*>(coef + (3 * c + 2) * p.Tw + i);
      k[i].c0 = a0.x, k[i + 1].c0 = a0.y, k[i + 2].c0 = a0.z, k[i + 3].c0 = a0.w;
      k[i].c1 = a1.x, k[i + 1].c1 = a1.y, k[i + 2].c1 = a1.z, k[i + 3].c1 = a1.w;
      k[i].c2 = a2.x, k[i + 1].c2 = a2.y, k[i + 2].c2 = a2.z, k[i + 3].c2 = a2.w;
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int y = y0 + j;
      const float z = y < ty ? load_float(p.z, p.zdtype, b * p.zb + c * p.zc + y * p.zy) : 0.f;
#pragma unroll
      for (int i = 0; i < K; ++i) acc[i][j] = mas::add_rn(acc[i][j], mas::term(k[i], z));
    }
  }
#pragma unroll
  for (int i = 0; i < K; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) buf[i][j] = __float_as_uint(acc[i][j]);
}

// Walks the path back from (tx-1, ty-1) like the Cython loop, a row at a time: on row `index` the
// path moves down at the highest frame y' <= y whose bit is set (or at y' == index, where the
// Cython code forces it), so each row's run is one bit scan. A warp loads the words of 32 rows
// of one 32-frame block at once and walks them through shuffles.
static __device__ void backtrack(const Params& p, int tx, int ty, const uint32_t* gbits,
                                 int32_t* start, int32_t* dur, int lane) {
  int index = tx - 1, y = ty - 1, run_end = ty - 1;
  while (y >= 0) {
    const int yb = y >> 5;
    const int base = max(index - 31, 0);
    const uint32_t w =
        base + lane < p.Tw ? gbits[static_cast<size_t>(yb) * p.Tw + base + lane] : 0u;
    while (true) {
      const uint32_t word = __shfl_sync(kFull, w, index - base);
      const int lim = y - yb * 32;  // frames yb*32 .. y of this block are still open
      uint32_t mv = word & (lim == 31 ? kFull : ((2u << lim) - 1u));
      const int diag = index - yb * 32;
      if (diag >= 0 && diag <= lim) mv |= 1u << diag;
      if (index == 0) mv = 0;
      if (mv == 0) {  // row `index` keeps the rest of this block
        y = yb * 32 - 1;
        break;
      }
      const int yp = yb * 32 + 31 - __clz(mv);
      if (lane == 0) start[index] = yp, dur[index * p.dx] = run_end - yp + 1;
      --index;
      y = run_end = yp - 1;
      if (index < base || y < yb * 32) break;
    }
  }
  if (lane == 0) start[index] = 0, dur[index * p.dx] = run_end + 1;  // index == 0 here
}

// Waits until the upstream row (the warp above, or the previous CTA for warp 0) has published
// frames y - 1 .. y + 30 (stage y / 32 of the ring above) and returns them, lane j holding frame
// y - 1 + j, and frees that stage; then, as a producer, waits until the warp below has freed
// stage y / 32 + 1 - kStages, whose slots frame y + 31 (stage y / 32 + 1) overwrites (frames
// y .. y + 30 were cleared by the previous call; stage 0 is free at the start).
static __device__ __noinline__ float take_upstream(float neg, float (*s_ring)[kRing],
                                                   uint64_t (*full)[kStages],
                                                   uint64_t (*empty)[kStages],
                                                   const int32_t* in_progress, const float* in_ring,
                                                   bool from_cta, int warp, int nwarps, int lane,
                                                   int y, int ty, float keep) {
  const int c = y >> 5;
  const int yr = y - 1 + lane;
  float v = keep;
  if (warp > 0) {
    mbar_wait(&full[warp - 1][c % kStages], (c / kStages) & 1);
    v = yr >= 0 && yr < ty ? s_ring[warp - 1][yr & (kRing - 1)] : neg;
    mbar_arrive(&empty[warp - 1][c % kStages]);
  } else if (from_cta) {
    const int need = min(y + 30, ty - 1);
    while (load_acquire(in_progress) < need) {
    }
    v = yr >= 0 && yr < ty ? in_ring[yr] : neg;
  }
  if (warp + 1 < nwarps) mbar_wait(&empty[warp][(c + 1) % kStages], (((c + 1) / kStages) & 1) ^ 1);
  return v;
}

// Lane 31 of a warp, at frame y = min(32c + 30, ty - 1) of chunk c (and at y = ty - 1 = 32c + 31,
// which ends no stage anyone reads): frames up to y of its last row are in the rings. full: this
// warp's ring's full barriers, or null for the last warp (no consumer in the CTA).
static __device__ __noinline__ void publish(int32_t* progress, bool to_cta, uint64_t* full, int y) {
  if (to_cta) store_release(progress, y);
  if (full != nullptr && (y & 31) != 31) mbar_arrive(&full[(y >> 5) % kStages]);
}

}  // namespace flashkit::cuda::mas_kernels
