// The decode kernel: one template over a tile scheduler (schedulers.h). Each segment a scheduler
// hands out runs the same mainloop: the tile's rows (query heads of one KV head x query tokens,
// 16 at a time: one m16 MMA tile, so K/V are read once per KV head) against a token range of the
// cache, streamed through a cp.async multi-stage shared-memory pipeline. Warps take 16 tokens of
// every 64 of a stage with their own online softmax; their states merge at the end with
// merge_stats, the same SoftmaxStat mechanism the CPU backend, split-KV merge and Lean use.
// Included by the instantiation files in src/cuda/instantiations/decode_*.cu.
#pragma once
#include <cuda_runtime.h>

#include <type_traits>

#include "common/softmax_state.h"
#include "cuda/common/check.h"
#include "cuda/decode/device_ops.h"
#include "cuda/decode/kernel_set.h"
#include "cuda/decode/schedulers.h"

namespace flashkit::cuda::decoding {

template <class T, int D>
struct Traits {
  static_assert(D % 16 == 0 && D <= 256, "hdim must be a multiple of 16 up to 256");
  static constexpr int kWarps = 4, kThreads = 128, kRows = kDecodeRowsPerBlock;
  // A stage holds kTokens keys: each warp takes 16 of every 64. Sizes aim at 2 CTAs per SM with
  // two stages (>= 64 KiB) in flight each; hdim 256 fits one CTA with two stages in flight.
  static constexpr int kSub = D <= 64 ? 2 : 1;
  static constexpr int kTokens = 64 * kSub;
  static constexpr int kStages = 3;
  static constexpr int kPitch = D + 8;  // 16-byte row pad: conflict-free fragments
  static constexpr int kStageElems = 2 * kTokens * kPitch;  // K tile then V tile
  static constexpr size_t kPipeBytes = size_t{kStages} * kStageElems * sizeof(T);
  // After the mainloop the pipeline area holds the warps' states and the CTA's merged result.
  static constexpr size_t kMergeBytes =
      (size_t{kWarps} * kRows * D + kRows * D + 2 * kWarps * kRows + kRows) * 4;
  static constexpr size_t kAreaBytes = kPipeBytes > kMergeBytes ? kPipeBytes : kMergeBytes;
  static constexpr size_t kSmemBytes = kAreaBytes + size_t{kRows} * kPitch * sizeof(T);
};

__device__ __forceinline__ uint32_t lds32(const void* p) {
  return *static_cast<const uint32_t*>(p);
}

// Shared-memory views of the merged segment result (valid after attend()).
template <class T, int D>
struct SegmentResult {
  float* o;    // [16][D], normalised O = acc / l
  float* lse;  // [16]
  __device__ explicit SegmentResult(char* smem) {
    o = reinterpret_cast<float*>(smem) + (Traits<T, D>::kWarps + 0) * Traits<T, D>::kRows * D;
    lse = o + Traits<T, D>::kRows * D + 2 * Traits<T, D>::kWarps * Traits<T, D>::kRows;
  }
};

// Attend rows [row_block*16, +16) of `tile` to cache tokens [lo, hi) (clipped to the sequence's
// cache_seqlens and to each row's causal limit); leaves the result in SegmentResult.
template <class T, int D>
__device__ void attend(const DecodeParams& p, const DecodeTile& tile, int lo, int hi, char* smem) {
  using Tr = Traits<T, D>;
  constexpr int kPitch = Tr::kPitch, kTokens = Tr::kTokens, kStages = Tr::kStages;
  T* pipe = reinterpret_cast<T*>(smem);
  T* qs = reinterpret_cast<T*>(smem + Tr::kAreaBytes);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t4 = lane % 4;
  const int seq = tile.seq, row0 = tile.row_block * Tr::kRows;
  const int len = max(0, min(p.seqlens[seq * p.seqlens_s], p.kv_lengths[seq]));
  hi = min(hi, len);

  // Keys below limit[h] are visible to this thread's rows g and g + 8 (causal among q tokens).
  int limit[2];
  for (int h = 0; h < 2; ++h) {
    const int gr = row0 + g + 8 * h;
    limit[h] = gr < p.rows ? min(hi, len - p.q_len + gr / p.group + 1) : lo;
  }

  const T* kbase = static_cast<const T*>(p.k);
  const T* vbase = static_cast<const T*>(p.v);
  auto load = [&](int chunk, int stage) {
    T* ks = pipe + stage * Tr::kStageElems;
    T* vs = ks + kTokens * kPitch;
    const int base = lo + chunk * kTokens;
    for (int i = tid; i < kTokens * D / 8; i += Tr::kThreads) {
      const int r = i / (D / 8), c = i % (D / 8) * 8, j = base + r;
      const bool ok = j < hi;
      int64_t ko = 0, vo = 0;
      if (ok) {
        int64_t outer = seq, tok = j;
        if (p.block_table) {
          outer = p.block_table[seq * p.bt_s0 + (j / p.page_size) * p.bt_s1];
          tok = j % p.page_size;
        }
        ko = outer * p.k_so + tok * p.k_st + tile.kv_head * p.k_sh + c;
        vo = outer * p.v_so + tok * p.v_st + tile.kv_head * p.v_sh + c;
      }
      cp_async_16(ks + r * kPitch + c, kbase + ko, ok);  // past the end: zeros, never NaN garbage
      cp_async_16(vs + r * kPitch + c, vbase + vo, ok);
    }
  };

  const int chunks = hi > lo ? (hi - lo + kTokens - 1) / kTokens : 0;
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < chunks) load(s, s);
    cp_async_commit();
  }
  // Q after the first K/V copies are in flight: its load latency hides behind theirs.
  for (int i = tid; i < Tr::kRows * D / 8; i += Tr::kThreads) {
    const int r = i / (D / 8), c = i % (D / 8) * 8, gr = row0 + r;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (gr < p.rows) {
      const int token = gr / p.group, head = tile.kv_head * p.group + gr % p.group;
      val = *reinterpret_cast<const uint4*>(static_cast<const T*>(p.q) + seq * p.q_sb +
                                            token * p.q_st + head * p.q_sh + c);
    }
    *reinterpret_cast<uint4*>(qs + r * kPitch + c) = val;
  }
  float o[D / 8][4];
  for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  SoftmaxStat st[2];
  for (int chunk = 0; chunk < chunks; ++chunk) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // stage `chunk` landed for all; everyone is done with the stage reused next
    if (chunk + kStages - 1 < chunks) load(chunk + kStages - 1, (chunk + kStages - 1) % kStages);
    cp_async_commit();
#pragma unroll
    for (int sub = 0; sub < Tr::kSub; ++sub) {
      const T* ks = pipe + (chunk % kStages) * Tr::kStageElems + (sub * 64 + warp * 16) * kPitch;
      const T* vs = ks + kTokens * kPitch;
      const int tok0 = lo + chunk * kTokens + sub * 64 + warp * 16;
      if (tok0 >= hi) break;  // warp-uniform: this warp's remaining tokens are past the end

      float s[2][4] = {};
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        const uint32_t a[4] = {lds32(qs + g * kPitch + kk * 16 + 2 * t4),
                               lds32(qs + (g + 8) * kPitch + kk * 16 + 2 * t4),
                               lds32(qs + g * kPitch + kk * 16 + 2 * t4 + 8),
                               lds32(qs + (g + 8) * kPitch + kk * 16 + 2 * t4 + 8)};
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          const T* kr = ks + (nt * 8 + g) * kPitch + kk * 16 + 2 * t4;
          mma_16816<T>(s[nt], a, lds32(kr), lds32(kr + 8));
        }
      }
      float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int j = tok0 + nt * 8 + 2 * t4 + (e & 1), h = e >> 1;
          s[nt][e] = j < limit[h] ? s[nt][e] * p.scale : -INFINITY;
          mx[h] = fmaxf(mx[h], s[nt][e]);
        }
      float alpha[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
        alpha[h] = online_update(st[h], mx[h]);
      }
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        o[n][0] *= alpha[0];
        o[n][1] *= alpha[0];
        o[n][2] *= alpha[1];
        o[n][3] *= alpha[1];
      }
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int h = e >> 1;
          const float pr = s[nt][e] == -INFINITY ? 0.f : __expf(s[nt][e] - st[h].m);
          s[nt][e] = pr;
          st[h].l += pr;  // this thread's columns; the quad sums after the loop
        }
      // The S accumulators' layout is the A operand's: P goes to the second MMA from registers.
      const uint32_t pa[4] = {pack2<T>(s[0][0], s[0][1]), pack2<T>(s[0][2], s[0][3]),
                              pack2<T>(s[1][0], s[1][1]), pack2<T>(s[1][2], s[1][3])};
#pragma unroll
      for (int dn = 0; dn < D / 16; ++dn) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, vs + (lane & 15) * kPitch + dn * 16 + (lane >> 4) * 8);
        mma_16816<T>(o[2 * dn], pa, b[0], b[1]);
        mma_16816<T>(o[2 * dn + 1], pa, b[2], b[3]);
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // the pipeline area becomes the merge area

  float* wo = reinterpret_cast<float*>(smem);                   // [warp][16][D]
  float* wm = wo + Tr::kWarps * Tr::kRows * D + Tr::kRows * D;  // after the result O
  float* wl = wm + Tr::kWarps * Tr::kRows;
  SegmentResult<T, D> res(smem);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    st[h].l += __shfl_xor_sync(0xffffffffu, st[h].l, 1);
    st[h].l += __shfl_xor_sync(0xffffffffu, st[h].l, 2);
    if (t4 == 0) {
      wm[warp * Tr::kRows + g + 8 * h] = st[h].m;
      wl[warp * Tr::kRows + g + 8 * h] = st[h].l;
    }
  }
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    float* dst = wo + (warp * Tr::kRows + g) * D + n * 8 + 2 * t4;
    dst[0] = o[n][0];
    dst[1] = o[n][1];
    dst[8 * D] = o[n][2];
    dst[8 * D + 1] = o[n][3];
  }
  __syncthreads();
  for (int i = tid; i < Tr::kRows * D; i += Tr::kThreads) {
    const int r = i / D;
    SoftmaxStat m{wm[r], wl[r]};
    float acc = wo[i];
#pragma unroll
    for (int w = 1; w < Tr::kWarps; ++w) {
      const MergeScales ms =
          merge_stats(m, SoftmaxStat{wm[w * Tr::kRows + r], wl[w * Tr::kRows + r]});
      acc = acc * ms.scale_a + wo[w * Tr::kRows * D + i] * ms.scale_b;
      m = ms.merged;
    }
    res.o[i] = m.l > 0.f ? acc / m.l : 0.f;
    if (i % D == 0) res.lse[r] = stat_lse(m);
  }
  __syncthreads();
}

// Row r of the tile -> its (token, head) and whether it exists.
struct RowIndex {
  int token, head;
  bool valid;
};
__device__ __forceinline__ RowIndex row_index(const DecodeParams& p, const DecodeTile& t, int r) {
  const int gr = t.row_block * kDecodeRowsPerBlock + r;
  return RowIndex{gr / p.group, t.kv_head * p.group + gr % p.group, gr < p.rows};
}

template <class T, int D>
__device__ void write_output(const DecodeParams& p, const DecodeTile& t, int r, int c, float o,
                             float lse) {
  const RowIndex ri = row_index(p, t, r);
  if (!ri.valid) return;
  static_cast<T*>(p.out)[t.seq * p.o_sb + ri.token * p.o_st + ri.head * p.o_sh + c] =
      from_float<T>(o);
  if (c == 0) p.lse[t.seq * p.l_sb + ri.head * p.l_sh + ri.token * p.l_st] = lse;
}

template <class T, int D, class Scheduler>
__global__ void __launch_bounds__(128) decode_kernel(const __grid_constant__ DecodeParams p) {
  using Tr = Traits<T, D>;
  extern __shared__ __align__(16) char smem[];
  constexpr bool kLean = std::is_same_v<Scheduler, LeanScheduler>;
  __shared__ unsigned target;  // Lean: the flag value meaning "written in this launch"
  if constexpr (kLean) {
    if (threadIdx.x == 0) target = *reinterpret_cast<volatile unsigned*>(p.epoch) + 1u;
    __syncthreads();
  }
  const Scheduler sched;
  const int tid = threadIdx.x;
  for (Work w = sched.first(p); w.valid; w = sched.next(p, w)) {
    const DecodeTile tile = p.tiles[w.tile];
    attend<T, D>(p, tile, w.lo, w.hi, smem);
    const SegmentResult<T, D> res(smem);
    if (w.role == Role::direct) {
      for (int i = tid; i < Tr::kRows * D; i += Tr::kThreads)
        write_output<T, D>(p, tile, i / D, i % D, res.o[i], res.lse[i / D]);
    } else if (w.role == Role::split_partial) {
      for (int i = tid; i < Tr::kRows * D; i += Tr::kThreads) {
        const int r = i / D, c = i % D;
        const RowIndex ri = row_index(p, tile, r);
        if (!ri.valid) continue;
        const int64_t row =
            ((static_cast<int64_t>(w.slot) * p.batch + tile.seq) * p.q_len + ri.token) *
                p.num_q_heads +
            ri.head;
        p.part_o[row * D + c] = res.o[i];
        if (c == 0) p.part_lse[row] = res.lse[r];
      }
    } else if (w.role == Role::lean_partial) {
      for (int i = tid; i < Tr::kRows * D; i += Tr::kThreads) {
        p.part_o[static_cast<int64_t>(w.slot) * Tr::kRows * D + i] = res.o[i];
        if (i % D == 0) p.part_lse[w.slot * Tr::kRows + i / D] = res.lse[i / D];
      }
      __syncthreads();
      if (tid == 0) {
        __threadfence();
        store_release(&p.flags[blockIdx.x], target);
      }
    } else {  // lean_host: the peers hold the rest of this tile; they are co-resident (the plan)
      if (tid == 0)
        for (int c = tile.host_cta + 1; c <= tile.finishing_cta; ++c)
          while (load_acquire(&p.flags[c]) != target) __nanosleep(64);
      __syncthreads();
      const int peers = tile.finishing_cta - tile.host_cta;
      for (int i = tid; i < Tr::kRows * D; i += Tr::kThreads) {
        const int r = i / D;
        SoftmaxStat m = stat_from_lse(res.lse[r]);
        float acc = res.o[i];
        for (int k = 0; k < peers; ++k) {
          const int slot = tile.first_peer_slot + k;
          const MergeScales ms =
              merge_stats(m, stat_from_lse(__ldcg(p.part_lse + slot * Tr::kRows + r)));
          const float po = ms.scale_b != 0.f
                               ? __ldcg(p.part_o + static_cast<int64_t>(slot) * Tr::kRows * D + i)
                               : 0.f;
          acc = acc * ms.scale_a + po * ms.scale_b;
          m = ms.merged;
        }
        write_output<T, D>(p, tile, r, i % D, m.l > 0.f ? acc / m.l : 0.f, stat_lse(m));
      }
    }
    __syncthreads();  // the next segment reuses shared memory
  }
  if constexpr (kLean) {
    // The last CTA to finish advances the epoch, so the next launch's flags need no reset.
    if (tid == 0) {
      __threadfence();
      if (atomicAdd(p.arrived, 1u) == static_cast<unsigned>(p.grid) - 1u) {
        atomicExch(p.arrived, 0u);
        __threadfence();
        atomicAdd(p.epoch, 1u);
      }
    }
  }
}

template <class T, int D, class Scheduler>
void launch_one(const DecodeParams& p, cudaStream_t stream) {
  constexpr size_t smem = Traits<T, D>::kSmemBytes;
  static const bool configured = [] {
    FK_CUDA_CHECK(cudaFuncSetAttribute(decode_kernel<T, D, Scheduler>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem)));
    return true;
  }();
  (void)configured;
  decode_kernel<T, D, Scheduler><<<p.grid, Traits<T, D>::kThreads, smem, stream>>>(p);
  FK_CHECK_LAUNCH("decode_kernel");
}

template <class T, int D>
void KernelSet<T, D>::launch(const DecodeParams& p, DecodeSchedule s, cudaStream_t stream) {
  switch (s) {
    case DecodeSchedule::single:
      launch_one<T, D, SingleScheduler>(p, stream);
      break;
    case DecodeSchedule::split_kv:
      launch_one<T, D, SplitKvScheduler>(p, stream);
      break;
    default:
      launch_one<T, D, LeanScheduler>(p, stream);
      break;
  }
}

template <class T, int D>
int KernelSet<T, D>::ctas_per_sm() {
  static const int n = [] {
    constexpr size_t smem = Traits<T, D>::kSmemBytes;
    FK_CUDA_CHECK(cudaFuncSetAttribute(decode_kernel<T, D, LeanScheduler>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem)));
    int blocks = 0;
    FK_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &blocks, decode_kernel<T, D, LeanScheduler>, Traits<T, D>::kThreads, smem));
    return blocks;
  }();
  return n;
}

}  // namespace flashkit::cuda::decoding
