// The MAS kernels (launch.h). forward: one CTA per item keeps the DP column on chip (registers;
// threads over text rows x, K rows each; one step per mel frame y; one barrier per step), reads
// the likelihood 32 bytes per row a chunk ahead (or computes it, fused), stores each max decision
// as one bit, then backtracks over the bits with one warp. write_path: expands each row's run of
// frames into the [B, T, S] path with the whole GPU. status: reports items with bad lengths.
#include <cooperative_groups.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "api/validate.h"
#include "common/mas_likelihood.h"
#include "cuda/common/check.h"
#include "cuda/common/workspace.h"
#include "cuda/mas/launch.h"

namespace flashkit::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kMaxText = 2048;     // 256 threads x 8 rows
constexpr int kMaxThreads = 256;   // 8 warps: s_bnd below
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

// Shared-memory rings between the warps of a CTA: warp w publishes Q of its last row per frame.
constexpr int kRing = 256;  // frames; a producer stays at most kRing - 64 frames ahead

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
__device__ int item_length(const void* base, int64_t sb, int64_t sl, int line, int dtype, int b) {
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
__device__ void backtrack(const Params& p, int tx, int ty, const uint32_t* gbits, int32_t* start,
                          int32_t* dur, int lane) {
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
// frames y - 1 .. y + 30 and returns them, lane j holding frame y - 1 + j; then, as a producer,
// waits until the warp below has consumed the ring slots frames y .. y + 31 will overwrite.
__device__ __noinline__ float take_upstream(float neg, float (*s_ring)[kRing], volatile int* done,
                                            const int32_t* in_progress, const float* in_ring,
                                            bool from_cta, int warp, int nwarps, int lane, int y,
                                            int ty, float keep) {
  const int need = min(y + 30, ty - 1);
  const int yr = y - 1 + lane;
  float v = keep;
  if (warp > 0) {
    while (done[warp - 1] < need) {
    }
    __threadfence_block();
    v = yr >= 0 && yr < ty ? s_ring[warp - 1][yr & (kRing - 1)] : neg;
  } else if (from_cta) {
    while (load_acquire(in_progress) < need) {
    }
    v = yr >= 0 && yr < ty ? in_ring[yr] : neg;
  }
  if (warp + 1 < nwarps)
    while (done[warp + 1] < y - (kRing - 64)) {
    }
  return v;
}

// Lane 31 of a warp: frames up to y of its last row are in the rings.
__device__ __noinline__ void publish(int32_t* progress, bool to_cta, volatile int* done, int y) {
  __threadfence_block();
  if (to_cta) store_release(progress, y);
  *done = y;
}

// One CTA of an item's cluster: rows [row0, row0 + rows), K rows per thread. Every warp is a
// pipeline stage that runs on its own, without CTA barriers: it needs its upper neighbour's last
// row one frame back, which the neighbour warp publishes 32 frames at a time through a shared
// memory ring (the CTA's first warp: from the previous CTA of the cluster, through global
// memory). NB chunks of the likelihood are in flight per thread (registers), NB - 1 ahead.
template <Src S, int K, int NB, bool kVec>
__global__ void __launch_bounds__(kMaxThreads, 1) mas_forward(const Params p) {
  constexpr int kCols = Chunk<S>::kCols;
  constexpr bool kFused = S == Src::fused;
  __shared__ float s_ring[kMaxThreads / 32][kRing];
  __shared__ int s_done[kMaxThreads / 32];  // last frame each warp has published
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
  if (lane == 0) s_done[warp] = -1;
  __syncthreads();
  if (row0 < tx) {
    // Upstream of warp 0: the previous CTA (global ring) or the first column's constants.
    const bool from_cta = part > 0 && warp == 0;
    const bool to_cta = part + 1 < p.splits && row0 + p.rows < tx && warp == nwarps - 1;
    const int32_t* in_progress = p.progress + b * p.splits + part - 1;
    const float* in_ring = p.ring + (static_cast<size_t>(b) * p.splits + part - 1) * p.S;
    float* out_ring = p.ring + (static_cast<size_t>(b) * p.splits + part) * p.S;
    volatile int* done = s_done;
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
      ring_v = take_upstream(p.neg, s_ring, done, in_progress, in_ring, from_cta, warp, nwarps,
                             lane, y, ty, ring_v);
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
          publish(p.progress + b * p.splits + part, to_cta, done + warp, y);
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
    __threadfence();
    cg::this_cluster().sync();
  } else {
    __syncthreads();
  }
  if (part == 0 && warp == 0) backtrack(p, tx, ty, gbits, start, dur, lane);
}

// Coefficients of the fused likelihood per (item, channel, text row), src/common/mas_likelihood.h.
__global__ void mas_fused_coeffs(const void* m, const void* logs, int dtype, int64_t mb, int64_t mc,
                                 int64_t mx, int64_t lb, int64_t lc, int64_t lx, int T, int Tw,
                                 int C, float* coef) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, c = blockIdx.y, b = blockIdx.z;
  if (x >= Tw) return;
  mas::Coeffs k{0.f, 0.f, 0.f};
  if (x < T)
    k = mas::coeffs(load_float(m, dtype, b * mb + c * mc + x * mx),
                    load_float(logs, dtype, b * lb + c * lc + x * lx));
  float* out = coef + (static_cast<size_t>(b) * C + c) * 3 * Tw + x;
  out[0] = k.c0, out[Tw] = k.c1, out[2 * Tw] = k.c2;
}

struct PathParams {
  char* path;
  int64_t pb, px, py;  // strides in elements
  int es;              // element bytes
  uint32_t one;        // bit pattern of 1 in the path dtype
  int B, T, S, Tw;
  const int32_t* start;
  const int32_t* dur;
  int64_t db, dx;
};

__device__ __forceinline__ void put(char* p, int es, uint32_t v) {
  if (es == 4)
    *reinterpret_cast<uint32_t*>(p) = v;
  else if (es == 2)
    *reinterpret_cast<uint16_t*>(p) = static_cast<uint16_t>(v);
  else
    *reinterpret_cast<uint8_t*>(p) = static_cast<uint8_t>(v);
}

// Rows contiguous in y: 16-byte stores of kEs-byte elements when kEs > 0 (aligned rows, whole
// 16-byte chunks), else element by element.
template <int kEs>
__global__ void mas_write_path_rows(const PathParams pp) {
  for (int64_t r = blockIdx.x; r < static_cast<int64_t>(pp.B) * pp.T; r += gridDim.x) {
    const int b = static_cast<int>(r / pp.T), x = static_cast<int>(r % pp.T);
    const int s0 = pp.start[static_cast<size_t>(b) * pp.Tw + x];
    const int s1 = s0 + pp.dur[b * pp.db + x * pp.dx];
    char* row = pp.path + (b * pp.pb + x * pp.px) * pp.es;
    if constexpr (kEs > 0) {
      constexpr int kPer = 16 / kEs;
      for (int k = threadIdx.x; k * kPer < pp.S; k += blockDim.x) {
        uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
        for (int e = 0; e < kPer; ++e) {
          const int y = k * kPer + e;
          if (y >= s0 && y < s1) w[e * kEs / 4] |= pp.one << (8 * (e * kEs % 4));
        }
        reinterpret_cast<uint4*>(row)[k] = make_uint4(w[0], w[1], w[2], w[3]);
      }
    } else {
      for (int y = threadIdx.x; y < pp.S; y += blockDim.x)
        put(row + static_cast<int64_t>(y) * pp.py * pp.es, pp.es,
            (y >= s0 && y < s1) ? pp.one : 0u);
    }
  }
}

// Columns contiguous in x (a transposed view, the VITS layout): threads over x.
__global__ void mas_write_path_cols(const PathParams pp) {
  for (int64_t r = blockIdx.x; r < static_cast<int64_t>(pp.B) * pp.S; r += gridDim.x) {
    const int b = static_cast<int>(r / pp.S), y = static_cast<int>(r % pp.S);
    char* col = pp.path + (b * pp.pb + y * pp.py) * pp.es;
    for (int x = threadIdx.x; x < pp.T; x += blockDim.x) {
      const int s0 = pp.start[static_cast<size_t>(b) * pp.Tw + x];
      const int s1 = s0 + pp.dur[b * pp.db + x * pp.dx];
      put(col + static_cast<int64_t>(x) * pp.px * pp.es, pp.es, (y >= s0 && y < s1) ? pp.one : 0u);
    }
  }
}

__global__ void mas_status(const int32_t* bad, int B, int32_t* status) {
  int first = B;
  for (int b = threadIdx.x; b < B; b += 32)
    if (bad[b]) first = min(first, b);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) first = min(first, __shfl_xor_sync(kFull, first, o));
  if (threadIdx.x == 0) *status = first == B ? -1 : first;
}

uint32_t one_pattern(DType t) {
  switch (t) {
    case DType::f32:
      return 0x3F800000u;
    case DType::f16:
      return 0x3C00u;
    case DType::bf16:
      return 0x3F80u;
    default:
      return 1u;
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Workspace carve-up (256-byte aligned pieces).
struct Scratch {
  float* ring;
  int32_t* progress;
  uint32_t* bits;
  int32_t* start;
  int32_t* dur;
  int32_t* bad;
  float* coef;
};

size_t align256(size_t n) { return (n + 255) / 256 * 256; }

Scratch carve(const MasOptions& opts, int B, int Tw, int W, int C, int S, int splits, bool need_dur,
              Stream stream) {
  const size_t ring =
      splits > 1 ? align256(sizeof(float) * B * static_cast<size_t>(splits) * S) : 0;
  const size_t progress = splits > 1 ? align256(sizeof(int32_t) * B * splits) : 0;
  const size_t bits = align256(sizeof(uint32_t) * B * static_cast<size_t>(W) * Tw);
  const size_t rows = align256(sizeof(int32_t) * B * static_cast<size_t>(Tw));
  const size_t bad = align256(sizeof(int32_t) * B);
  const size_t coef = align256(sizeof(float) * B * static_cast<size_t>(C) * 3 * Tw);
  char* w = static_cast<char*>(
      workspace(opts.workspace, ring + progress + bits + rows * (need_dur ? 2 : 1) + bad + coef,
                stream, "mas"));
  Scratch s;
  s.ring = splits > 1 ? reinterpret_cast<float*>(w) : nullptr;
  s.progress = splits > 1 ? reinterpret_cast<int32_t*>(w + ring) : nullptr;
  if (splits > 1)  // "no frame published yet" for every producer; in stream order, capturable
    FK_CUDA_CHECK(
        cudaMemsetAsync(s.progress, 0xff, progress, reinterpret_cast<cudaStream_t>(stream)));
  w += ring + progress;
  s.bits = reinterpret_cast<uint32_t*>(w);
  s.start = reinterpret_cast<int32_t*>(w + bits);
  s.dur = need_dur ? reinterpret_cast<int32_t*>(w + bits + rows) : nullptr;
  s.bad = reinterpret_cast<int32_t*>(w + bits + rows * (need_dur ? 2 : 1));
  s.coef = reinterpret_cast<float*>(w + bits + rows * (need_dur ? 2 : 1) + bad);
  return s;
}

template <Src S, int K, int NB>
void launch_forward(const Params& p, int B, int threads, bool vec, cudaStream_t stream) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(B * p.splits);
  cfg.blockDim = dim3(threads);
  cfg.stream = stream;
  cudaLaunchAttribute cluster;
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = p.splits, cluster.val.clusterDim.y = 1, cluster.val.clusterDim.z = 1;
  cfg.attrs = &cluster;
  cfg.numAttrs = p.splits > 1 ? 1 : 0;
  if (vec)
    FK_CUDA_CHECK(cudaLaunchKernelEx(&cfg, mas_forward<S, K, NB, true>, p));
  else
    FK_CUDA_CHECK(cudaLaunchKernelEx(&cfg, mas_forward<S, K, NB, false>, p));
  FK_CHECK_LAUNCH("mas_forward");
}

// K = 4 rows a thread up to 512 rows a CTA, else K = 8; one chunk in registers ahead (the
// frame loop is unrolled over the buffers: more would not fit the instruction cache).
template <Src S>
void launch_forward(const Params& p, int B, bool vec, cudaStream_t stream) {
  if (p.rows <= 512)
    launch_forward<S, 4, 2>(p, B, p.rows / 4, vec, stream);
  else
    launch_forward<S, 8, 2>(p, B, p.rows / 8, vec, stream);
}

// Rows per CTA and CTAs per item: split long texts over a cluster while the batch leaves SMs
// idle, keeping at least 256 rows a CTA (the pipeline costs 32 frames of lag per CTA).
void choose_split(Params& p, int B) {
  int dev = 0, sms = 0;
  FK_CUDA_CHECK(cudaGetDevice(&dev));
  FK_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  p.splits = 1;
  while (p.splits < 8 && int64_t{B} * p.splits * 2 <= sms && p.T / (p.splits * 2) >= 256)
    p.splits *= 2;
  const int per = (p.T + p.splits - 1) / p.splits;
  const int k = per <= 512 ? 4 : 8;
  p.rows = std::max((per + 32 * k - 1) / (32 * k), 1) * 32 * k;
}

// Everything after the forward pass: the path from the runs, the status word.
void finish(const Params& p, const Scratch& s, int B, const TensorView& path,
            const MasOptions& opts, cudaStream_t stream) {
  if (path.defined() && path.numel() > 0) {
    PathParams pp{static_cast<char*>(path.data),
                  path.stride[0],
                  path.stride[1],
                  path.stride[2],
                  static_cast<int>(dtype_size(path.dtype)),
                  one_pattern(path.dtype),
                  B,
                  p.T,
                  p.S,
                  p.Tw,
                  p.start,
                  p.dur,
                  p.db,
                  p.dx};
    int sms = 0, dev = 0;
    FK_CUDA_CHECK(cudaGetDevice(&dev));
    FK_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    if (pp.py == 1 || p.S == 1) {
      const bool vec = aligned16(pp.path) && (pp.S * pp.es) % 16 == 0 &&
                       (pp.px * pp.es) % 16 == 0 && (pp.pb * pp.es) % 16 == 0;
      const int grid = static_cast<int>(std::min<int64_t>(int64_t{B} * p.T, sms * 16));
      if (!vec)
        mas_write_path_rows<0><<<grid, 256, 0, stream>>>(pp);
      else if (pp.es == 4)
        mas_write_path_rows<4><<<grid, 256, 0, stream>>>(pp);
      else if (pp.es == 2)
        mas_write_path_rows<2><<<grid, 256, 0, stream>>>(pp);
      else
        mas_write_path_rows<1><<<grid, 256, 0, stream>>>(pp);
    } else {
      const int grid = static_cast<int>(std::min<int64_t>(int64_t{B} * p.S, sms * 16));
      mas_write_path_cols<<<grid, 256, 0, stream>>>(pp);
    }
    FK_CHECK_LAUNCH("mas_write_path");
  }
  if (opts.status.defined()) {
    mas_status<<<1, 32, 0, stream>>>(s.bad, B, opts.status.ptr<int32_t>());
    FK_CHECK_LAUNCH("mas_status");
  }
}

Params common_params(int B, int T, int S, int C, const TensorView& tl, const TensorView& ml,
                     const TensorView& durations, const MasOptions& opts, Scratch& s) {
  Params p{};
  p.T = T, p.S = S, p.Tw = (T + 7) / 8 * 8, p.W = (S + 31) / 32, p.C = C;
  choose_split(p, B);
  s = carve(opts, B, p.Tw, p.W, C, S, p.splits, !durations.defined(), opts.stream);
  p.ring = s.ring, p.progress = s.progress;
  p.tx = tl.data, p.txs = tl.stride[0], p.txl = tl.ndim == 2 ? tl.stride[1] : 0;
  p.tx_line = tl.ndim == 2 ? static_cast<int>(tl.shape[1]) : -1,
  p.tx_dtype = static_cast<int>(tl.dtype);
  p.ty = ml.data, p.tys = ml.stride[0], p.tyl = ml.ndim == 2 ? ml.stride[1] : 0;
  p.ty_line = ml.ndim == 2 ? static_cast<int>(ml.shape[1]) : -1,
  p.ty_dtype = static_cast<int>(ml.dtype);
  p.neg = opts.neg;
  p.bits = s.bits, p.start = s.start, p.bad = s.bad, p.coef = s.coef;
  if (durations.defined())
    p.dur = durations.ptr<int32_t>(), p.db = durations.stride[0], p.dx = durations.stride[1];
  else
    p.dur = s.dur, p.db = p.Tw, p.dx = 1;
  return p;
}

void empty_batch(const MasOptions& opts, cudaStream_t stream) {
  if (!opts.status.defined()) return;
  mas_status<<<1, 32, 0, stream>>>(nullptr, 0, opts.status.ptr<int32_t>());
  FK_CHECK_LAUNCH("mas_status");
}

void check_device(const TensorView& t, const char* name) {
  int dev = 0;
  FK_CUDA_CHECK(cudaGetDevice(&dev));
  if (t.device_id != dev)
    detail::fail(name, ": expected a tensor on the current CUDA device ", dev,
                 ", got cuda:", t.device_id);
}

}  // namespace

void monotonic_alignment_search(const TensorView& value, const TensorView& text_lengths,
                                const TensorView& mel_lengths, const TensorView& path,
                                const TensorView& durations, const MasOptions& opts) {
  check_device(value, "value");
  const int B = static_cast<int>(value.shape[0]), T = static_cast<int>(value.shape[1]),
            S = static_cast<int>(value.shape[2]);
  if (T > kMaxText)
    detail::fail("value: expected at most ", kMaxText, " text positions (dim 1) on CUDA, got ", T);
  auto stream = reinterpret_cast<cudaStream_t>(opts.stream);
  if (B == 0) return empty_batch(opts, stream);
  Scratch s;
  Params p = common_params(B, T, S, 0, text_lengths, mel_lengths, durations, opts, s);
  p.value = value.data, p.vb = value.stride[0], p.vx = value.stride[1], p.vy = value.stride[2];
  const int es = static_cast<int>(dtype_size(value.dtype));
  const bool vec =
      p.vy == 1 && aligned16(value.data) && (p.vx * es) % 16 == 0 && (p.vb * es) % 16 == 0;
  switch (value.dtype) {
    case DType::f16:
      launch_forward<Src::f16>(p, B, vec, stream);
      break;
    case DType::bf16:
      launch_forward<Src::bf16>(p, B, vec, stream);
      break;
    default:
      launch_forward<Src::f32>(p, B, vec, stream);
      break;
  }
  finish(p, s, B, path, opts, stream);
}

void monotonic_alignment_search_fused(const TensorView& z, const TensorView& m,
                                      const TensorView& logs, const TensorView& text_lengths,
                                      const TensorView& mel_lengths, const TensorView& path,
                                      const TensorView& durations, const MasOptions& opts) {
  check_device(z, "z");
  const int B = static_cast<int>(z.shape[0]), C = static_cast<int>(z.shape[1]),
            S = static_cast<int>(z.shape[2]), T = static_cast<int>(m.shape[2]);
  if (T > kMaxText)
    detail::fail("m: expected at most ", kMaxText, " text positions (dim 2) on CUDA, got ", T);
  if (C > kMaxChannels)
    detail::fail("z: expected at most ", kMaxChannels, " channels (dim 1) on CUDA, got ", C);
  auto stream = reinterpret_cast<cudaStream_t>(opts.stream);
  if (B == 0) return empty_batch(opts, stream);
  Scratch s;
  Params p = common_params(B, T, S, C, text_lengths, mel_lengths, durations, opts, s);
  p.z = z.data, p.zb = z.stride[0], p.zc = z.stride[1], p.zy = z.stride[2];
  p.zdtype = static_cast<int>(z.dtype);
  if (C > 0) {
    mas_fused_coeffs<<<dim3((p.Tw + 127) / 128, C, B), 128, 0, stream>>>(
        m.data, logs.data, static_cast<int>(m.dtype), m.stride[0], m.stride[1], m.stride[2],
        logs.stride[0], logs.stride[1], logs.stride[2], T, p.Tw, C, s.coef);
    FK_CHECK_LAUNCH("mas_fused_coeffs");
  }
  launch_forward<Src::fused>(p, B, false, stream);
  finish(p, s, B, path, opts, stream);
}

}  // namespace flashkit::cuda
