// The backward's pieces shared by the sm80 and sm90 main kernels (FA2 Algorithm 2): the two small
// memory-bound kernels around them (preprocess: D = rowsum(dO * O) per (token, head) in fp32 and
// LSE in log2 units beside it, in blocks of block_m rows padded past the sequence's end, and the
// dQ accumulator zeroed;
// convert_dq: dQ = scale * dq_accum in q's dtype, read in the fragment order the main kernel
// added it in, see dq_chunk below), the host prologue that carves the scratch and launches
// preprocess, and the dQ adds (staged for bulk reduces, or atomics in deterministic turns).
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstdlib>

#include "cuda/attention/kernels.h"
#include "cuda/attention/params.h"
#include "cuda/attention/seqlen.h"
#include "cuda/attention/sm80/traits.h"
#include "cuda/common/acquire_release.h"
#include "cuda/common/bulk_reduce.h"
#include "cuda/common/check.h"
#include "cuda/common/pdl.h"

namespace flashkit::cuda::attn::sm80 {

struct BwdScratch {
  float* dq_accum;  // [chunk, heads, block_m * hdim] in MMA-fragment order (dq_chunk)
  float* dsum;      // [chunk, heads, block_m]: D, 0 on padding rows (row_chunk)
  float* lse_log2;  // [chunk, heads, block_m]: LSE * log2(e), +inf on padding / keyless rows
  int* semaphore;   // [batch, heads, q blocks] or null
  // [batch, heads] or null: how many of the head's key blocks have added all of their dQ (their
  // adds complete and released). A conversion launched early waits on it (bwd_convert_dq).
  int* dq_ready;
  // Null, or the Hopper backward's zero-ahead counts (one per group of zero_group (batch, KV
  // head) pairs in the main kernel's launch order, BwdMainloop::zero_ahead): the preprocess then
  // zeroes the dQ chunks of the first zero_ahead groups only, and the main kernel's CTAs of group
  // g those of group g + zero_ahead.
  int* zero_count;
  int zero_group, zero_ahead;
};

// dQ of (sequence b, query block m, head h) accumulates in one chunk of block_m * hdim floats,
// stored as [j][thread][4] for the 4-float groups j of each thread's dQ fragment: one warp's
// 16-byte atomics then cover 512 contiguous bytes instead of 16 scattered rows. Chunks are
// numbered floor(first token / block_m) + b + m, which never overlap between varlen sequences
// (workspace_layout.cu sizes ceil(total_q / block_m) + batch of them).
template <int kBlockM>
__device__ __forceinline__ int64_t row_chunk(int64_t first_token, int b, int m, int h, int heads) {
  return ((first_token / kBlockM + b + m) * heads + h) * kBlockM;
}
template <int kBlockM, int kHeadDim>
__device__ __forceinline__ float* dq_chunk(float* dq_accum, int64_t first_token, int b, int m, int h,
                                           int heads) {
  return dq_accum + row_chunk<kBlockM>(first_token, b, m, h, heads) * kHeadDim;
}

// One warp per 4 rows: 8 lanes per (token, head) row, 8 elements each per step, every step's
// loads issued before the sums (kHeadDim bounds the steps at compile time). Rows from the
// sequence's end to its last query block's end are padding (LSE +inf makes P = 0, D = 0), so the
// main kernel reads whole blocks without bounds checks. With zero_dq the CTA also zeroes its
// share of the dQ accumulator, in place of a memset of all of it (one pass over the rows instead
// of two launches): rows r0 .. r0 + 31 of query block m own the floats (r0 % kBlockM) * kHeadDim
// .. + 32 * kHeadDim of the block's chunk (a fill does not care about the chunk's fragment order).
template <class Element, int kHeadDim, int kBlockM>
__global__ void __launch_bounds__(256)
    bwd_preprocess(const AttnArguments a, BwdScratch ws, bool zero_dq) {
  static_assert(kBlockM % 32 == 0, "a CTA's 32 rows lie in one query block");
  constexpr int kSteps = (kHeadDim + 63) / 64;
  const int lane8 = threadIdx.x % 8;
  const int row0 = blockIdx.x * 32, row = row0 + threadIdx.x / 8;  // the grid covers the longest
  const int h = blockIdx.y, b = blockIdx.z;
  SeqBounds sb(a.cu_seqlens_q, a.cu_seqlens_k, b, a.seqlen_q, a.seqlen_k);
  const int padded = ceil_div(sb.seqlen_q, kBlockM) * kBlockM;  // rows with a dQ chunk
  if (ws.dq_ready && blockIdx.x == 0 && threadIdx.x == 0) ws.dq_ready[int64_t(b) * a.heads + h] = 0;
  if (ws.zero_count && blockIdx.x == 0 && threadIdx.x == 0)
    ws.zero_count[int64_t(b) * a.heads + h] = 0;
  const bool zero_pair =
      !ws.zero_count || b * a.kv_heads + h / (a.heads / a.kv_heads) < ws.zero_group * ws.zero_ahead;
  if (zero_dq && zero_pair && row0 < padded) {
    float4* z = reinterpret_cast<float4*>(
        dq_chunk<kBlockM, kHeadDim>(ws.dq_accum, sb.q_token(b), b, row0 / kBlockM, h, a.heads) +
        (row0 % kBlockM) * kHeadDim);
    CUTE_UNROLL
    for (int i = threadIdx.x; i < 32 * kHeadDim / 4; i += 256)
      z[i] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  const bool valid = row < sb.seqlen_q;
  float sum = 0.f, lse_log2 = INFINITY;
  if (valid) {
    const auto* o = static_cast<const Element*>(a.o) + sb.q_offset(a.o_stride, b, h) + int64_t(row) * a.o_stride.row;
    const auto* d_o = static_cast<const Element*>(a.dout) + sb.q_offset(a.do_stride, b, h) + int64_t(row) * a.do_stride.row;
    const float l = a.lse[int64_t(b) * a.lse_batch_stride + int64_t(h) * a.lse_head_stride +
                          (int64_t(sb.q_start) + row) * a.lse_row_stride];
    uint4 x[kSteps], y[kSteps];
    CUTE_UNROLL
    for (int s = 0; s < kSteps; ++s) {
      const int c = lane8 * 8 + 64 * s;
      x[s] = y[s] = make_uint4(0u, 0u, 0u, 0u);
      if (c < a.head_dim) {
        x[s] = *reinterpret_cast<const uint4*>(o + c);
        y[s] = *reinterpret_cast<const uint4*>(d_o + c);
      }
    }
    CUTE_UNROLL
    for (int s = 0; s < kSteps; ++s) {
      const Element* xe = reinterpret_cast<const Element*>(&x[s]);
      const Element* ye = reinterpret_cast<const Element*>(&y[s]);
      CUTE_UNROLL
      for (int i = 0; i < 8; ++i) sum += float(xe[i]) * float(ye[i]);
    }
    lse_log2 = l == -INFINITY ? INFINITY : l * float(M_LOG2E);  // a row without keys: P = 0
  }
  sum += __shfl_xor_sync(0xffffffffu, sum, 1);  // every lane takes part (no early exit above)
  sum += __shfl_xor_sync(0xffffffffu, sum, 2);
  sum += __shfl_xor_sync(0xffffffffu, sum, 4);
  if (lane8 == 0 && row < padded) {
    const int64_t at = row_chunk<kBlockM>(sb.q_token(b), b, row / kBlockM, h, a.heads) + row % kBlockM;
    ws.dsum[at] = sum;
    ws.lse_log2[at] = lse_log2;
  }
}

// The conversion's reads of the accumulator: from L2 (.cg: the adds landed there from other SMs;
// no L1 line, so never a stale one), marked evict-first, as are its stores (.cs): beside the main
// kernel's last wave (bwd_convert_dq with `ready`) the stream must not push that wave's Q, dO
// and dQ lines out of L2.
__device__ __forceinline__ uint64_t l2_evict_first_policy() {
  uint64_t policy = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
#endif
  return policy;
}
__device__ __forceinline__ float4 load_l2_evict_first(const float4* p, uint64_t policy) {
  float4 v;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ld.global.cg.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "l"(p), "l"(policy));
#else
  v = __ldcg(p);
#endif
  return v;
}

// One CTA per (query block, head, batch), threads laid out like the main kernel's dQ MMA so each
// thread reads back exactly the fragment it added (coalesced 16-byte loads). The fragment's
// scattered (row, 2 columns) pieces go through shared memory (rows padded by 16 bytes: a warp's 8
// rows x 4 quads land in distinct banks), and rows leave as 16-byte stores: written straight from
// the fragment, 4-byte stores half-filled every sector and the kernel ran at a third of DRAM speed.
//
// With `ready` (ws.dq_ready) the kernel was launched programmatically behind the main kernel (see
// bwd_prologue), which lets it start once every main CTA has started: on the SMs the main
// kernel's last wave leaves idle. A CTA then waits until all block_n-key blocks of its (sequence,
// head) have counted their dQ adds in, and the grid's last CTA waits for the main kernel's
// completion, so that work after this kernel in the stream still follows the main kernel too.
template <class Element, class MmaDQ, int kThreads, int kBlockM, int kHeadDim>
__global__ void __launch_bounds__(kThreads)
    bwd_convert_dq(const AttnArguments a, float* dq_accum, const int* ready, int block_n) {
  constexpr int kPitch = kHeadDim + 8;  // elements per shared row
  __shared__ alignas(16) Element tile[kBlockM * kPitch];
  const int m = blockIdx.x, h = blockIdx.y, b = blockIdx.z, tid = threadIdx.x;
  if (ready && m == gridDim.x - 1 && h == gridDim.y - 1 && b == gridDim.z - 1) pdl_wait();
  SeqBounds sb(a.cu_seqlens_q, a.cu_seqlens_k, b, a.seqlen_q, a.seqlen_k);
  if (m * kBlockM >= sb.seqlen_q) return;
  if (ready) {
    if (tid == 0) {
      const int* count = ready + int64_t(b) * a.heads + h;
      const int blocks = ceil_div(sb.seqlen_k, block_n);
      while (load_acquire(count) < blocks) __nanosleep(256);
    }
    __syncthreads();
  }
  const float4* chunk = reinterpret_cast<const float4*>(
      dq_chunk<kBlockM, kHeadDim>(dq_accum, sb.q_token(b), b, m, h, a.heads));
  const uint64_t policy = l2_evict_first_policy();
  auto coord = MmaDQ{}.get_thread_slice(tid).partition_C(
      make_identity_tensor(Shape<Int<kBlockM>, Int<kHeadDim>>{}));
  CUTE_UNROLL
  for (int j = 0; j < size(coord) / 4; ++j) {
    const float4 v = load_l2_evict_first(chunk + j * kThreads + tid, policy);
    const float f[4] = {v.x, v.y, v.z, v.w};
    CUTE_UNROLL
    for (int q = 0; q < 4; q += 2) {  // (row r, cols c..c+1), then (row r+8, cols c..c+1)
      const int row = get<0>(coord(4 * j + q)), col = get<1>(coord(4 * j + q));
      uint32_t packed;
      Element* e = reinterpret_cast<Element*>(&packed);
      e[0] = Element(f[q] * a.softmax_scale);
      e[1] = Element(f[q + 1] * a.softmax_scale);
      *reinterpret_cast<uint32_t*>(tile + row * kPitch + col) = packed;
    }
  }
  __syncthreads();
  auto* dq = static_cast<Element*>(a.dq) + sb.q_offset(a.dq_stride, b, h) +
             int64_t(m) * kBlockM * a.dq_stride.row;
  const int rows = min(kBlockM, sb.seqlen_q - m * kBlockM);
  constexpr int kPieces = kHeadDim / 8;  // 16-byte pieces of a row
  for (int i = tid; i < rows * kPieces; i += kThreads) {
    const int row = i / kPieces, col = i % kPieces * 8;
    if (col >= a.head_dim) continue;
    const uint4 v = *reinterpret_cast<const uint4*>(tile + row * kPitch + col);
    Element* dst = dq + int64_t(row) * a.dq_stride.row + col;
    if (reinterpret_cast<uintptr_t>(dst) % 16 == 0) {
      __stcs(reinterpret_cast<uint4*>(dst), v);
    } else {  // strides that are not multiples of 8 elements
      const Element* e = reinterpret_cast<const Element*>(&v);
      CUTE_UNROLL
      for (int k = 0; k < 8; ++k) dst[k] = e[k];
    }
  }
}

// Host: whether the dQ conversion (or hdim 256's dQ pass) may be launched programmatically
// behind the main kernel (bwd_convert_dq): sm_90+ devices, unless FLASHKIT_BWD_TAIL=0 (A/B runs).
inline bool bwd_tail_enabled() {
  static const bool env = [] {
    const char* e = std::getenv("FLASHKIT_BWD_TAIL");
    return !(e && e[0] == '0');
  }();
  int dev = 0, major = 0;
  FK_CUDA_CHECK(cudaGetDevice(&dev));
  FK_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  return env && major >= 9;
}

// Host: carves the scratch from a.workspace (kernels.h's BwdWorkspace), zeroes the deterministic
// semaphores, and launches preprocess, which also zeroes the dQ accumulator (unless `zero_dq` is
// false: no kernel adds into it), on `stream`. `dq_ready`: the main kernel counts its dQ adds
// in per (sequence, head), so the conversion may overlap it (non-deterministic runs only: the
// counts use the semaphores' words). `zero_group` > 0 (non-deterministic dense runs with at
// least two query blocks, so that the semaphores' words hold the counts after dq_ready's): the
// preprocess zeroes only the dQ of the first zero_ahead groups of zero_group (batch, KV head)
// pairs, the main kernel the rest (BwdScratch::zero_count).
template <class Element, int kHeadDim, int kBlockM>
BwdScratch bwd_prologue(const AttnArguments& a, cudaStream_t stream, bool zero_dq = true,
                        bool dq_ready = false, int zero_group = 0, int zero_ahead = 0) {
  BwdWorkspace wl = bwd_workspace_layout(a.batch, a.heads, a.total_q, a.seqlen_q, kHeadDim);
  char* base = static_cast<char*>(a.workspace);
  int* words = reinterpret_cast<int*>(base + wl.semaphore);
  BwdScratch ws{reinterpret_cast<float*>(base + wl.dq_accum),
                reinterpret_cast<float*>(base + wl.dsum),
                reinterpret_cast<float*>(base + wl.lse_log2),
                a.deterministic ? words : nullptr,
                dq_ready && !a.deterministic ? words : nullptr,
                zero_group > 0 ? words + int64_t(a.batch) * a.heads : nullptr,
                zero_group,
                zero_ahead};
  if (a.deterministic) FK_CUDA_CHECK(cudaMemsetAsync(ws.semaphore, 0, wl.bytes - wl.semaphore, stream));
  // Rows up to the end of each sequence's last query block: the padding gets LSE +inf and D 0.
  dim3 rows_grid(unsigned(ceil_div(ceil_div(a.seqlen_q, kBlockM) * kBlockM, 32)), unsigned(a.heads),
                 unsigned(a.batch));
  bwd_preprocess<Element, kHeadDim, kBlockM><<<rows_grid, 256, 0, stream>>>(a, ws, zero_dq);
  FK_CHECK_LAUNCH("attention backward preprocess");
  return ws;
}

// Writes acc (this thread's dQ fragment, groups of 4 floats) to a staging buffer in dq_chunk
// order ([group][thread][4]) and fences it for bulk reduces issued after the adders' barrier.
template <int kThreads, class Acc>
__device__ __forceinline__ void stage_dq(float* staging, const Acc& acc, int tid) {
  float4* dst = reinterpret_cast<float4*>(staging);
  CUTE_UNROLL
  for (int j = 0; j < size(acc) / 4; ++j)
    dst[j * kThreads + tid] = make_float4(acc(4 * j), acc(4 * j + 1), acc(4 * j + 2), acc(4 * j + 3));
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  fence_shared_to_async();
#endif
}

// The dQ chunk += acc (this thread's fragment) as 16-byte fp32 reductions in dq_chunk order: rows
// past the sequence and columns past hdim add zeros (their operands were zero-filled). With a
// semaphore (deterministic runs) the kThreads adders take the block's turn first: the key blocks
// adding into one dQ block are contiguous, and the turn-th of them adds after the one before it
// did, so the fp32 sums round identically every run. sync() is the adders' barrier.
template <int kThreads, class Acc, class Sync>
__device__ __forceinline__ void add_dq(const Acc& acc, float* chunk, int* semaphore, int turn,
                                       int tid, Sync sync) {
  if (semaphore) {
    if (tid == 0)
      while (load_acquire(semaphore) != turn) {
      }
    sync();
  }
  float4* dst = reinterpret_cast<float4*>(chunk);
  CUTE_UNROLL
  for (int j = 0; j < size(acc) / 4; ++j) {
#if __CUDA_ARCH__ >= 900
    // A reduction, not atomicAdd(float4*): that one compiles to ATOMG (an atomic that returns
    // its old value, here to RZ), which held the LSU queue and its data registers longer; REDG
    // made the sm80-class backward 3-4% faster at every hdim (NOTES-attention.md, session 35).
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(dst + j * kThreads + tid),
                 "f"(acc(4 * j)), "f"(acc(4 * j + 1)), "f"(acc(4 * j + 2)), "f"(acc(4 * j + 3))
                 : "memory");
#else  // 16-byte float atomics are sm_90+: Ampere adds the same four floats one by one
    float* d = reinterpret_cast<float*>(dst + j * kThreads + tid);
    CUTE_UNROLL
    for (int e = 0; e < 4; ++e) atomicAdd(d + e, acc(4 * j + e));
#endif
  }
  if (semaphore) {
    __threadfence();
    sync();
    if (tid == 0) store_release(semaphore, turn + 1);
  }
}

}  // namespace flashkit::cuda::attn::sm80
