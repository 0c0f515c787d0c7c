// Device building blocks of the MAS forward kernel (forward.cuh): the exact Cython cell, length and
// likelihood loads, the parameter block, the bit backtrack and the warp-to-warp ring protocol
// (shared-memory mbarriers). Included by src/cuda/mas/mas.cu only.
#pragma once
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "common/mas_likelihood.h"
#include "cuda/common/acquire_release.h"
#include "cuda/common/mbarrier.h"
#include "flashkit/tensor.h"

namespace flashkit::cuda::mas_kernels {

constexpr int kMaxText = 2048;    // 256 threads x 8 rows
constexpr int kMaxThreads = 256;  // DP threads: 8 warps, one shared-memory ring each
// Threads of a CTA: DP warps plus, when the kernel writes the path, the warp that zeroes it
// (only while the DP warps leave room: a ninth warp would cap registers at 168 a thread).
constexpr int kMaxBlock = kMaxThreads;
// The forward kernel's launch bound for K rows a lane: K = 4 (staged or not) up to 512 rows, 4
// DP warps + the path warp; K = 1 and 2 (staged, v12) up to 8 DP warps + the path warp (few
// registers a thread); K = 8 kMaxBlock.
__host__ __device__ constexpr int max_block_threads(int K) {
  return K <= 2 ? kMaxThreads + 32 : K == 4 ? 512 / 4 + 32 : kMaxBlock;
}
constexpr int kMaxChannels = 256;  // fused: channels (a bound on the work per frame)
constexpr unsigned kFull = 0xffffffffu;
constexpr int kMaxBitsSmem = 160 * 1024;  // decision bits kept in shared memory up to this size
constexpr int kMaxDynSmem = 200 * 1024;   // dynamic shared memory: stage (v8) + bits

// Shared-memory rings between the warps of a CTA: warp w writes Q of its last row per frame into
// ring w, read by warp w + 1. Stage c of a ring is frames 32c - 1 .. 32c + 30 (what the consumer
// takes at frame 32c: one frame back for each of its 32 frames), so stages c and c + kStages
// share slots. Each stage has a full barrier (1 arrival: the producer's lane 31 after writing its
// 32-frame block c, frames 32c .. 32c + 31) and an empty one (32 arrivals: every consumer lane
// after reading it); stage c is the (c / kStages)-th phase of both, so waits go by the parity of
// c / kStages.
constexpr int kRing = 256;  // frames
constexpr int kStages = kRing / 32;

__device__ __forceinline__ int dtype_bytes(int dtype) {
  switch (static_cast<DType>(dtype)) {
    case DType::f64:
    case DType::i64:
      return 8;
    case DType::f32:
    case DType::i32:
      return 4;
    case DType::f16:
    case DType::bf16:
      return 2;
    default:
      return 1;  // u8, bool8
  }
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
  int z_vec;  // fused: z's rows contiguous, 16-byte aligned at every multiple of 8 frames
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
  // Decision bits, word (y / 32, x) holding bit y % 32 = (Q[x-1, y-1] > Q[x, y-1]): in global
  // memory [B][W][Tw], or, when bits_smem, in the CTA's dynamic shared memory [W][rows] (one CTA
  // per item: the backtrack then reads them at shared-memory latency).
  uint32_t* bits;
  int bits_smem;
  int stage_bytes;  // the CTA's likelihood stage in dynamic shared memory (staged kernels)
  int32_t* start;   // [B][Tw]: first frame of row x's run
  int32_t* dur;     // frames of row x's run: the durations output or scratch
  int64_t db, dx;
  int32_t* bad;  // [B]: 1 where the item's lengths admit no path
  // An item's rows are split over `splits` CTAs of one cluster (co-scheduled, so waiting on a
  // neighbour cannot deadlock), `rows` each (dp_warps warps of K rows a lane). CTA k reads
  // Q[row0 - 1, y] of CTA k-1 from `ring` ([B][splits][W * 32]) once `progress` ([B][splits],
  // -1 before the launch) has passed y.
  int splits, rows, dp_warps;
  int early_zeros;  // host's choice (mas.cu, v17): the path kernel zeroes beside this kernel
  int64_t* trace;   // the band kernel's phase clocks (FLASHKIT_MAS_TRACE), else null
  int band_bulk;    // v19c: the band kernel's path zeros as bulk copies by one zero warp
  // L2 prefetch of each row: every l2_group blocks (32 frames each), the next l2_group blocks
  // starting l2_blocks ahead of the register loads, as one contiguous run per row (longer runs
  // per row: fewer DRAM pages opened per byte).
  int l2_blocks, l2_group;
  float* ring;
  int32_t* progress;
  // pace_off > 0 (split items, path written here): progress[pace_off + b * splits + part], -1
  // before the launch, is the last frame warp 0 of the CTA has finished, which paces the warp
  // that zeroes the path (no data flows through it: relaxed accesses).
  int pace_off;
  // The path, when the kernel writes it itself (path != null: each item's T x S elements are
  // one dense block, rows or columns contiguous): one extra warp per CTA zeroes the CTA's share
  // of the block while the DP runs, and CTA 0 writes the ones after the backtrack.
  char* path;
  int64_t pb, px, py;  // strides in elements
  int pes;             // element bytes
  uint32_t one;        // bit pattern of 1 in the path dtype
};

// Raw storage of a mask element and its value.
template <DType D>
struct MaskElem;
template <>
struct MaskElem<DType::f32> {
  using R = float;
  __device__ static double get(R v) { return v; }
};
template <>
struct MaskElem<DType::f16> {
  using R = uint16_t;
  __device__ static double get(R v) { return __half2float(__ushort_as_half(v)); }
};
template <>
struct MaskElem<DType::bf16> {
  using R = uint16_t;
  __device__ static double get(R v) { return __uint_as_float(static_cast<uint32_t>(v) << 16); }
};
template <>
struct MaskElem<DType::f64> {
  using R = double;
  __device__ static double get(R v) { return v; }
};
template <>
struct MaskElem<DType::i32> {
  using R = int32_t;
  __device__ static double get(R v) { return v; }
};
template <>
struct MaskElem<DType::i64> {
  using R = int64_t;
  __device__ static double get(R v) { return static_cast<double>(v); }
};
template <>
struct MaskElem<DType::u8> {
  using R = uint8_t;
  __device__ static double get(R v) { return v; }
};

// This thread's parts of the sums of two lines a[i * sa], i < na, and b[i * sb], i < nb, of one
// dtype (threads of the CTA in turn): 8 elements of each line loaded before any is added, so
// the lines (read once, straight from DRAM) cost one round trip per 8 elements a thread, not one
// per element or per line (ncu, T = 128: ~10% of the kernel was waiting for these loads).
template <DType D>
__device__ __forceinline__ void lines_part(const void* a, int64_t sa, int na, const void* b,
                                           int64_t sb, int nb, double (&acc)[2]) {
  using R = typename MaskElem<D>::R;
  const R* la = static_cast<const R*>(a);
  const R* lb = static_cast<const R*>(b);
  for (int i0 = threadIdx.x; i0 < max(na, nb); i0 += 8 * blockDim.x) {
    R va[8], vb[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const int i = i0 + k * static_cast<int>(blockDim.x);
      va[k] = i < na ? la[i * sa] : R{};
      vb[k] = i < nb ? lb[i * sb] : R{};
    }
#pragma unroll
    for (int k = 0; k < 8; ++k)
      acc[0] += MaskElem<D>::get(va[k]), acc[1] += MaskElem<D>::get(vb[k]);
  }
}

__device__ __forceinline__ void lines_part(int dtype, const void* a, int64_t sa, int na,
                                           const void* b, int64_t sb, int nb, double (&acc)[2]) {
  switch (static_cast<DType>(dtype)) {
    case DType::f32:
      return lines_part<DType::f32>(a, sa, na, b, sb, nb, acc);
    case DType::f16:
      return lines_part<DType::f16>(a, sa, na, b, sb, nb, acc);
    case DType::bf16:
      return lines_part<DType::bf16>(a, sa, na, b, sb, nb, acc);
    case DType::f64:
      return lines_part<DType::f64>(a, sa, na, b, sb, nb, acc);
    case DType::i32:
      return lines_part<DType::i32>(a, sa, na, b, sb, nb, acc);
    case DType::i64:
      return lines_part<DType::i64>(a, sa, na, b, sb, nb, acc);
    default:
      return lines_part<DType::u8>(a, sa, na, b, sb, nb, acc);  // u8, bool8
  }
}

// The item's lengths (tx, ty): int32 entries, or the sums of its mask lines truncated like
// astype(int32). Every thread of the CTA takes part (one block reduction for both lines).
static __device__ int2 item_lengths(const Params& p, int b) {
  if (p.tx_line < 0 && p.ty_line < 0)
    return make_int2(static_cast<const int32_t*>(p.tx)[b * p.txs],
                     static_cast<const int32_t*>(p.ty)[b * p.tys]);
  __shared__ double partial[2][max_block_threads(1) / 32];
  double acc[2] = {0, 0};
  const void* tline = static_cast<const char*>(p.tx) + b * p.txs * dtype_bytes(p.tx_dtype);
  const void* yline = static_cast<const char*>(p.ty) + b * p.tys * dtype_bytes(p.ty_dtype);
  const int ntx = max(p.tx_line, 0), nty = max(p.ty_line, 0);
  if (p.tx_dtype == p.ty_dtype) {  // both lines of one mask (the drop-in): loaded together
    lines_part(p.tx_dtype, tline, p.txl, ntx, yline, p.tyl, nty, acc);
  } else {
    double only[2] = {0, 0};
    lines_part(p.tx_dtype, tline, p.txl, ntx, yline, p.tyl, 0, acc);
    lines_part(p.ty_dtype, tline, p.txl, 0, yline, p.tyl, nty, only);
    acc[1] = only[1];
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
#pragma unroll
    for (int k = 0; k < 2; ++k) acc[k] += __shfl_xor_sync(0xffffffffu, acc[k], o);
  if ((threadIdx.x & 31) == 0)
    partial[0][threadIdx.x >> 5] = acc[0], partial[1][threadIdx.x >> 5] = acc[1];
  __syncthreads();
  double total[2] = {0, 0};
  for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w)
    total[0] += partial[0][w], total[1] += partial[1][w];
  return make_int2(
      p.tx_line < 0 ? static_cast<const int32_t*>(p.tx)[b * p.txs] : static_cast<int>(total[0]),
      p.ty_line < 0 ? static_cast<const int32_t*>(p.ty)[b * p.tys] : static_cast<int>(total[1]));
}

// An item at the start of a forward kernel: its lengths, whether they admit a path, and its run
// starts and durations, whose rows tx .. T - 1 (every row when the lengths are bad) the item's
// first CTA (`first`) zeroes, setting the item's status flag too. Every thread of the CTA calls it.
struct ItemStart {
  int tx, ty;
  bool valid;
  int32_t* start;
  int32_t* dur;
};
static __device__ ItemStart begin_item(const Params& p, int b, bool first) {
  const int2 len = item_lengths(p, b);
  ItemStart it{len.x, len.y, false, p.start + static_cast<size_t>(b) * p.Tw, p.dur + b * p.db};
  it.valid = it.tx >= 0 && it.tx <= p.T && it.ty >= 0 && it.ty <= p.S && it.tx <= it.ty;
  if (first) {
    for (int x = (it.valid ? it.tx : 0) + threadIdx.x; x < p.T; x += blockDim.x)
      it.start[x] = 0, it.dur[x * p.dx] = 0;
    if (threadIdx.x == 0) p.bad[b] = it.valid ? 0 : 1;
  }
  return it;
}

// Chunk y0 .. y0 + kCols - 1 of rows x0 .. x0 + K - 1 (`rows` points at row x0) as raw words;
// rows >= nrows and frames >= S read as 0. Any row < T and frame < S may be read whatever the
// item's lengths are (cells outside the band never reach a band cell), so the first chunks are
// loaded before the lengths are known. The vector path asks L2 for the whole 256-byte segment.
template <Src S, int K>
__device__ __forceinline__ void load_chunk_vec(const Params& p, const typename Chunk<S>::T* rows,
                                               int y0, uint32_t (&buf)[K][8]) {
#pragma unroll
  for (int i = 0; i < K; ++i) {
    const typename Chunk<S>::T* src = rows + i * p.vx + y0;
    asm volatile(
        "ld.global.nc.L2::256B.v4.u32 {%0, %1, %2, %3}, [%8];\n\t"
        "ld.global.nc.L2::256B.v4.u32 {%4, %5, %6, %7}, [%8 + 16];"
        : "=r"(buf[i][0]), "=r"(buf[i][1]), "=r"(buf[i][2]), "=r"(buf[i][3]), "=r"(buf[i][4]),
          "=r"(buf[i][5]), "=r"(buf[i][6]), "=r"(buf[i][7])
        : "l"(src));
  }
}

// Chunk y0 .. y0 + kCols - 1 of rows x0 .. x0 + K - 1 (`rows` points at row x0) as raw words;
// rows >= nrows and frames >= S read as 0. Any row < T and frame < S may be read whatever the
// item's lengths are (cells outside the band never reach a band cell), so the first chunks are
// loaded before the lengths are known. The vector path asks L2 for the whole 256-byte segment.
template <Src S, int K, bool kVec>
__device__ __forceinline__ void load_chunk(const Params& p, const typename Chunk<S>::T* rows,
                                           int x0, int nrows, int y0, uint32_t (&buf)[K][8]) {
  using T = typename Chunk<S>::T;
  constexpr int kCols = Chunk<S>::kCols;
  if (kVec && x0 + K <= nrows && y0 + kCols <= p.S) return load_chunk_vec<S, K>(p, rows, y0, buf);
#pragma unroll
  for (int i = 0; i < K; ++i) {
#pragma unroll
    for (int w = 0; w < 8; ++w) buf[i][w] = 0;
    if (x0 + i >= nrows) continue;
    const T* row = rows + i * p.vx;
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      const int y = y0 + j;
      if (y >= p.S) break;
      uint32_t v;
      if constexpr (sizeof(T) == 4)
        v = __float_as_uint(row[y * p.vy]);
      else
        v = row[y * p.vy];
      buf[i][j * sizeof(T) / 4] |= v << (sizeof(T) == 4 ? 0 : 16 * (j & 1));
    }
  }
}

// Asks L2 for the 128-byte lines of [p, p + bytes): plain prefetches, no register written, so
// nothing waits for them (a cp.async.bulk prefetch per row and block ran the DP ~2x slower).
__device__ __forceinline__ void prefetch_l2(const void* p, uint32_t bytes) {
  for (uint32_t o = 0; o < bytes; o += 128)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(static_cast<const char*>(p) + o));
}

// Cells above the band's diagonal (frame y < row x) take the likelihood 0: with Q = neg at frame
// -1 every such cell is then exactly neg, so Q[x, x-1] = neg is what the diagonal cell (x, x)
// reads, which is Cython's `x == y` rule without a test in the frame loop. d = x0 - y0 of the
// chunk; rows i zero their frames j < d + i.
template <Src S, int K>
__device__ __forceinline__ void mask_above_diagonal(uint32_t (&buf)[K][8], int d) {
  constexpr int kCols = Chunk<S>::kCols;
#pragma unroll
  for (int i = 0; i < K; ++i)
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      const bool above = j < d + i;
      if constexpr (kCols == 8)
        buf[i][j] = above ? 0u : buf[i][j];
      else
        buf[i][j / 2] &= above ? ((j & 1) ? 0x0000ffffu : 0xffff0000u) : 0xffffffffu;
    }
}

// Warp shuffles and a predicated shared store as single instructions. The frame loop runs in
// warp-uniform control flow, which the compiler cannot see: the __shfl_*_sync intrinsics would
// add a divergence check per shuffle and a branch around lane 31's store.
__device__ __forceinline__ float shfl_up1(float v) {
  float r;
  asm volatile("shfl.sync.up.b32 %0, %1, 1, 0, -1;" : "=f"(r) : "f"(v));
  return r;
}
__device__ __forceinline__ float shfl_idx(float v, int lane) {
  float r;
  asm volatile("shfl.sync.idx.b32 %0, %1, %2, 31, -1;" : "=f"(r) : "f"(v), "r"(lane));
  return r;
}
__device__ __forceinline__ uint32_t shfl_idx_u32(uint32_t v, int lane) {
  uint32_t r;
  asm volatile("shfl.sync.idx.b32 %0, %1, %2, 31, -1;" : "=r"(r) : "r"(v), "r"(lane));
  return r;
}
__device__ __forceinline__ void store_if(bool pred, float* shared, float v) {
  asm volatile("{ .reg .pred p; setp.ne.u32 p, %0, 0; @p st.shared.f32 [%1], %2; }" ::"r"(
                   static_cast<uint32_t>(pred)),
               "r"(smem_addr(shared)), "f"(v));
}

// One cell: Q[x, y] = (v_prev > v_cur ? v_prev : v_cur) + value, Cython's max operand order and
// an unflushed add; the decision sets `bit` in `bits`. Written as both sums selected by the
// compare's all-ones mask, (v_prev + value) or (v_cur + value): the same rounding, the same value
// (NaN included: a NaN operand fails the compare, as in Cython), but the chain from the previous
// frame is compare/add -> select (2 deep, not compare -> select -> add), and no predicate: with
// setp/selp/@p every cell wrote the same predicate register, and ptxas ran the cells of a frame
// one after the other (~14 cycles each, SASS of v6c) instead of interleaving them.
__device__ __forceinline__ float cell(float v_prev, float v_cur, float value, uint32_t& bits,
                                      uint32_t bit) {
  uint32_t take;
  asm("set.gt.u32.f32 %0, %1, %2;" : "=r"(take) : "f"(v_prev), "f"(v_cur));
  const uint32_t a = __float_as_uint(mas::add_rn(v_prev, value)),
                 c = __float_as_uint(mas::add_rn(v_cur, value));
  bits |= take & bit;
  return __uint_as_float((a & take) | (c & ~take));
}

// The same cell with the compare's predicate kept inside one asm block (the staged loop, v8):
// ptxas turns the select into the first sum and a predicated second add (@!p FADD), and the bit
// into a predicated add, giving each cell its own predicate register: 4 SASS instructions a cell
// instead of 6 (FSETP, SEL, 2 FADD, 2 LOP3), the plain block 751 instructions and 1082 static
// stall cycles instead of 1010 and 1331. Same operations, same rounding, the same NaN rule.
// kSelect (the band kernel, v19): the operand selected before one add, and the bit added (the bits
// of a word are distinct, so add = or): fewer ALU-pipe instructions, ptxas's static schedule of
// the band loop (R = 4) 1062 cycles an 8-step block against 1174, and 1493 against 1567 on two DP
// warps. The same values: the selected operand plus `value` is the selected sum.
template <bool kSelect = false>
__device__ __forceinline__ float cell_pred(float v_prev, float v_cur, float value, uint32_t& bits,
                                           uint32_t bit) {
  float q;
  if constexpr (kSelect)
    asm("{ .reg .pred p; .reg .f32 a;\n\t"
        "setp.gt.f32 p, %2, %3; selp.f32 a, %2, %3, p; add.rn.f32 %0, a, %4;\n\t"
        "@p add.u32 %1, %1, %5; }"
        : "=f"(q), "+r"(bits)
        : "f"(v_prev), "f"(v_cur), "f"(value), "r"(bit));
  else
    asm("{ .reg .pred p; .reg .f32 a, c;\n\t"
        "setp.gt.f32 p, %2, %3; add.rn.f32 a, %2, %4; add.rn.f32 c, %3, %4;\n\t"
        "selp.f32 %0, a, c, p; @p or.b32 %1, %1, %5; }"
        : "=f"(q), "+r"(bits)
        : "f"(v_prev), "f"(v_cur), "f"(value), "r"(bit));
  return q;
}

// A 32-frame block's decision words of the lane's K rows (consecutive words, 4K-byte aligned).
template <int K>
__device__ __forceinline__ void store_bits(uint32_t* dst, const uint32_t (&bits)[K]) {
  if constexpr (K == 1) {
    *dst = bits[0];
  } else if constexpr (K == 2) {
    *reinterpret_cast<uint2*>(dst) = make_uint2(bits[0], bits[1]);
  } else {
#pragma unroll
    for (int i = 0; i < K; i += 4)
      reinterpret_cast<uint4*>(dst)[i / 4] = make_uint4(bits[i], bits[i + 1], bits[i + 2], bits[i + 3]);
  }
}

// Fused: value[x, y0 + j] for the thread's K rows from the coefficients and z[b, c, y0 + j]
// (every lane reads the same z: broadcast loads), channels in order 0, 1, ... as on the CPU; z's
// dtype is a template parameter (ZS: Src::f32, f16 or bf16, read as raw words like a chunk).
template <int K>
__device__ __forceinline__ void load_coeffs(const float* at, int tw, mas::Coeffs (&k)[K]) {
  if constexpr (K % 4 == 0) {
#pragma unroll
    for (int i = 0; i < K; i += 4) {
      const float4 a0 = __ldg(reinterpret_cast<const float4*>(at + i));
      const float4 a1 = __ldg(reinterpret_cast<const float4*>(at + tw + i));
      const float4 a2 = __ldg(reinterpret_cast<const float4*>(at + 2 * tw + i));
      k[i].c0 = a0.x, k[i + 1].c0 = a0.y, k[i + 2].c0 = a0.z, k[i + 3].c0 = a0.w;
      k[i].c1 = a1.x, k[i + 1].c1 = a1.y, k[i + 2].c1 = a1.z, k[i + 3].c1 = a1.w;
      k[i].c2 = a2.x, k[i + 1].c2 = a2.y, k[i + 2].c2 = a2.z, k[i + 3].c2 = a2.w;
    }
  } else if constexpr (K == 2) {
    const float2 a0 = __ldg(reinterpret_cast<const float2*>(at));
    const float2 a1 = __ldg(reinterpret_cast<const float2*>(at + tw));
    const float2 a2 = __ldg(reinterpret_cast<const float2*>(at + 2 * tw));
    k[0].c0 = a0.x, k[1].c0 = a0.y, k[0].c1 = a1.x, k[1].c1 = a1.y, k[0].c2 = a2.x, k[1].c2 = a2.y;
  } else {
    static_assert(K == 1, "rows a lane: 1, 2 or a multiple of 4");
    k[0].c0 = __ldg(at), k[0].c1 = __ldg(at + tw), k[0].c2 = __ldg(at + 2 * tw);
  }
}
// Frames a fused call computes: 32 (a block, 4 chunks) at 2 rows a lane, 8 (a chunk) otherwise
// (K >= 4: the accumulators would not fit; K = 1: measured slower, v15b in bench/NOTES-mas.md).
// The coefficients are read once per call.
__host__ __device__ constexpr int fused_frames(int k) { return k == 2 ? 32 : 8; }

// z[c, y0 .. y0 + F - 1] of one channel, elements of dtype ZS held as raw words (zp: Raw<ZS>):
// kVecZ: F contiguous elements at a 16-byte aligned address, all inside the item (vector loads,
// unpacked like a likelihood chunk); else element by element, 0 past the item (nj).
template <Src ZS>
using Raw = std::conditional_t<sizeof(typename Chunk<ZS>::T) == 4, uint32_t, uint16_t>;
template <Src ZS, int F, bool kVecZ>
__device__ __forceinline__ void load_z(const Raw<ZS>* zp, int64_t zy, int nj, float (&z)[F]) {
  if constexpr (kVecZ) {
    constexpr int kWords = F * sizeof(Raw<ZS>) / 4;
    uint32_t w[kWords];
#pragma unroll
    for (int q = 0; q < kWords / 4; ++q) {
      const uint4 a = __ldg(reinterpret_cast<const uint4*>(zp) + q);
      w[4 * q] = a.x, w[4 * q + 1] = a.y, w[4 * q + 2] = a.z, w[4 * q + 3] = a.w;
    }
#pragma unroll
    for (int j = 0; j < F; ++j) z[j] = Chunk<ZS>::get(w, j);
  } else {
#pragma unroll
    for (int j = 0; j < F; ++j) {
      const uint32_t w = j < nj ? zp[j * zy] : 0u;  // raw 0 is +0 in every dtype
      z[j] = Chunk<ZS>::get(&w, 0);
    }
  }
}
template <int K, int F, Src ZS, bool kVecZ>
__device__ __forceinline__ void fused_channels(const float* coef, const Raw<ZS>* zp, int tw, int nc,
                                               int64_t zc, int64_t zy, int nj,
                                               float (&acc)[K][F]) {
  // At 8 frames a call, 4 channels unrolled: their loads are in flight together.
#pragma unroll(F == 8 ? 4 : 1)
  for (int c = 0; c < nc; ++c) {
    mas::Coeffs k[K];
    load_coeffs<K>(coef, tw, k);
    float z[F];
    load_z<ZS, F, kVecZ>(zp, zy, nj, z);
#pragma unroll
    for (int j = 0; j < F; ++j)
#pragma unroll
      for (int i = 0; i < K; ++i) acc[i][j] = mas::add_rn(acc[i][j], mas::term(k[i], z[j]));
    coef += 3 * tw;
    zp += zc;
  }
}
// coef: the item's coefficients at row x0 ([C][3][Tw]: c0, c1, c2 rows; x0 a multiple of K, Tw
// of 8); zp: z[b, 0, y0]; z_vec: z's rows contiguous and 16-byte aligned at every multiple of 8.
// out[q]: chunk q of the call (frames y0 + 8q .. y0 + 8q + 7).
template <int K, int F, Src ZS>
__device__ void fused_chunks_z(const float* coef, const Raw<ZS>* zp, int tw, int nc, int64_t zc,
                               int64_t zy, int nj, bool z_vec, uint32_t (&out)[F / 8][K][8]) {
  float acc[K][F];
#pragma unroll
  for (int i = 0; i < K; ++i)
#pragma unroll
    for (int j = 0; j < F; ++j) acc[i][j] = 0.f;
  if (z_vec && nj >= F)
    fused_channels<K, F, ZS, true>(coef, zp, tw, nc, zc, zy, nj, acc);
  else
    fused_channels<K, F, ZS, false>(coef, zp, tw, nc, zc, zy, nj, acc);
#pragma unroll
  for (int i = 0; i < K; ++i)
#pragma unroll
    for (int j = 0; j < F; ++j) out[j / 8][i][j % 8] = __float_as_uint(acc[i][j]);
}
// Not inlined: the frame loop calls it every F frames, and the dtype copies of the channel loop
// inlined there would crowd the instruction cache of the DP loop. Scalars are passed by value (a
// reference to Params would put it in local memory).
template <int K, int F>
__device__ __noinline__ void fused_chunks_call(const float* coef, const void* z, int zdtype,
                                               int tw, int nc, int64_t zc, int64_t zy, int nj,
                                               bool z_vec, uint32_t (&out)[F / 8][K][8]) {
  switch (static_cast<DType>(zdtype)) {
    case DType::f16:
      return fused_chunks_z<K, F, Src::f16>(coef, static_cast<const uint16_t*>(z), tw, nc, zc, zy,
                                            nj, z_vec, out);
    case DType::bf16:
      return fused_chunks_z<K, F, Src::bf16>(coef, static_cast<const uint16_t*>(z), tw, nc, zc, zy,
                                             nj, z_vec, out);
    default:
      return fused_chunks_z<K, F, Src::f32>(coef, static_cast<const uint32_t*>(z), tw, nc, zc, zy,
                                            nj, z_vec, out);
  }
}
// The likelihood of the thread's K rows (from x0) at frames y0 .. y0 + F - 1 (F =
// fused_frames(K)), frames >= ty taking z = 0.
template <int K>
__device__ __forceinline__ void fused_chunks(const Params& p, int b, int x0, int y0, int ty,
                                             uint32_t (&out)[fused_frames(K) / 8][K][8]) {
  const int es = p.zdtype == static_cast<int>(DType::f32) ? 4 : 2;
  const char* z = static_cast<const char*>(p.z) + (b * p.zb + y0 * p.zy) * es;
  fused_chunks_call<K, fused_frames(K)>(p.coef + static_cast<size_t>(b) * p.C * 3 * p.Tw + x0, z,
                                        p.zdtype, p.Tw, p.C, p.zc, p.zy, ty - y0, p.z_vec != 0,
                                        out);
}

// Walks the path back from (tx-1, ty-1) like the Cython loop, a row at a time: on row `index` the
// path moves down at the highest frame y' <= y whose bit is set, or at y' == index (Cython's
// forced move; y >= index always holds), so each row's run is one bit scan. Only the first frame
// of each run is recorded (`start`); durations and the path follow from the starts
// (write_runs). A warp holds the words of 32 rows (lane j: row base + j) for the current
// 32-frame block and, loaded with them, the block below (`bits`: word (block, x) at
// block * bstride + x, rows < nrows); each lane keeps its row's start in a register until the
// walk leaves the group, and the next row's word is shuffled while the current one is scanned.
static __device__ void backtrack(const uint32_t* bits, int bstride, int nrows, int tx, int ty,
                                 int32_t* start, int lane) {
  auto load = [&](int yb, int base) {
    return yb >= 0 && base + lane < nrows ? bits[yb * bstride + base + lane] : 0u;
  };
  int index = tx - 1, y = ty - 1;
  int yb = y >> 5, base = max(index - 31, 0), hi = index;
  uint32_t w = load(yb, base), below = load(yb - 1, base);
  int my_start = 0;  // run start of row base + lane (row 0's stays 0)
  while (true) {
    uint32_t word = shfl_idx_u32(w, index - base);
    while (true) {
      const uint32_t next = shfl_idx_u32(w, max(index - 1 - base, 0));
      const int b0 = yb * 32;
      uint32_t mv = word & (kFull >> (31 - (y - b0)));  // frames b0 .. y
      mv |= index >= b0 ? 1u << (index - b0) : 0u;
      mv = index == 0 ? 0u : mv;
      if (mv == 0) {  // row `index` keeps the rest of this block
        y = b0 - 1;
        break;
      }
      const int yp = b0 + 31 - __clz(mv);
      my_start = lane == index - base ? yp : my_start;
      --index;
      y = yp - 1;
      if (index < base || y < b0) break;
      word = next;
    }
    if (y < 0) break;
    if (index >= base) {  // the block below, same rows: already loaded
      --yb;
      w = below;
      below = load(yb - 1, base);
    } else {
      if (base + lane <= hi) start[base + lane] = my_start;
      yb = y >> 5, base = max(index - 31, 0), hi = index, my_start = 0;
      w = load(yb, base), below = load(yb - 1, base);
    }
  }
  if (base + lane <= hi) start[base + lane] = my_start;
}

// The same walk by one thread, for decision bits in shared memory (one CTA per item). A step
// either ends row `index`'s run in the block holding y (its start: the highest set bit <= y, or
// the forced move at y == index) or finds no move there and goes one block down. The three words
// the next step can need (next row, this block; this row, the block below; next row, the block
// below) are loaded at the top of the step, which is branch-free, so a step costs the scan and a
// shared-memory latency overlapping it (the warp walk paid ~115 cycles a step in shuffles and
// branch bookkeeping, ncu v7 at T = 128: 15% of the kernel).
static __device__ int backtrack_one_lane(const uint32_t* bits, int bstride, int tx, int ty,
                                         int32_t* start) {
  int steps = 0;  // returned for FLASHKIT_MAS_TRACE
  const uint32_t base = smem_addr(bits), sstart = smem_addr(start);
  auto word = [&](int yb, int x) {
    uint32_t v;
    asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(base + 4 * (yb * bstride + x)));
    return v;
  };
  int index = tx - 1, y = ty - 1, yb = y >> 5;
  uint32_t w = word(yb, index);
#pragma unroll 2
  for (; index > 0; ++steps) {
    const int b0 = yb * 32, below = max(yb - 1, 0);
    const uint32_t w_next = word(yb, index - 1), w_below = word(below, index),
                   w_next_below = word(below, index - 1);
    uint32_t mv = w & (kFull >> (~y & 31));       // frames b0 .. y
    mv |= index >= b0 ? 1u << (index - b0) : 0u;  // Cython's forced move at y == index
    const bool moved = mv != 0;  // else the row keeps the rest of this block (then b0 > 0)
    int hi;                      // the highest set bit, -1 if none
    asm("bfind.u32 %0, %1;" : "=r"(hi) : "r"(mv));
    const int yp = b0 + hi;
    asm volatile("{ .reg .pred p; setp.ne.u32 p, %0, 0; @p st.shared.s32 [%1], %2; }" ::"r"(
                     static_cast<uint32_t>(moved)),
                 "r"(sstart + 4 * index), "r"(yp)
                 : "memory");
    y = yp - moved;  // the next row's last frame, or (no move) this row's frame b0 - 1
    index -= moved;
    const bool down = y < b0;
    w = down ? (moved ? w_next_below : w_below) : w_next;
    yb -= down;
  }
  asm volatile("st.shared.s32 [%0], 0;" ::"r"(sstart) : "memory");
  return steps;
}

// Waits until the upstream row (the warp above, or the previous CTA for warp 0) has published
// frames y - 1 .. y + 30 (stage y / 32 of the ring above) and returns them, lane j holding frame
// y - 1 + j, and frees that stage; then, as a producer, waits until the warp below has freed
// stage y / 32 + 1 - kStages, whose slots frame y + 31 (stage y / 32 + 1) overwrites (frames
// y .. y + 30 were cleared by the previous call; stage 0 is free at the start).
static __device__ __forceinline__ float take_upstream(
    float neg, float (*s_ring)[kRing], uint64_t (*full)[kStages], uint64_t (*empty)[kStages],
    const int32_t* in_progress, const float* in_ring, bool from_cta, int warp, int nwarps, int lane,
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

// Lane 31 of a warp at the end of its 32-frame block c (frames up to 32c + 31 of its last row are
// in the rings, which covers stage c, frames 32c - 1 .. 32c + 30): tells the next CTA how far it
// may read (`last` = min(32c + 31, ty - 1)) and the warp below that stage c is full. full: this
// warp's ring's full barriers, or null for the last warp (no consumer in the CTA). Every block c
// an item runs is read by its consumer (32c < ty), so each stage gets exactly one arrival.
static __device__ __forceinline__ void publish(int32_t* progress, bool to_cta, uint64_t* full,
                                               int c, int last) {
  if (to_cta) store_release(progress, last);
  if (full != nullptr) mbar_arrive(&full[c % kStages]);
}

}  // namespace flashkit::cuda::mas_kernels
