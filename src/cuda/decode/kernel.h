// The decode kernel: one template over a tile scheduler (schedulers.h) and the loader (cp.async,
// or TMA on sm_90; dispatch.cu chooses). Each segment a scheduler hands out runs the same mainloop
// (attend.h); the result goes to the output, or to a partial that the tile's last split CTA
// (split-KV) or its host CTA (Lean) folds in with reduce_partials; partials carry only the tile's
// existing rows. Included by the instantiation files in src/cuda/instantiations/decode_*.cu.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <type_traits>

#include "common/softmax_state.h"
#include "common/str_cat.h"
#include "cuda/common/check.h"
#include "cuda/common/smem_limit.h"
#include "cuda/decode/attend.h"
#include "cuda/decode/kernel_set.h"
#include "cuda/decode/schedulers.h"
#include "cuda/decode/tensor_maps.h"

namespace flashkit::cuda::decoding {

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

// One element of a tile's result from normalised partials over disjoint keys: the caller's own
// (own_o, own_lse; lse -inf for none) and `count` in the workspace (partial k's O at
// po + k * o_step, its lse at pl + k * l_step). Two passes, so that no load waits on the previous
// partial's merge: the lse of every partial (merge_stats gives the tile's lse), then each O
// weighted by exp(lse_k - lse). The workspace is read through L2 (__ldcg): other CTAs wrote it.
struct Reduced {
  float o, lse;
};
__device__ __forceinline__ Reduced reduce_partials(float own_o, float own_lse, const float* po,
                                                   const float* pl, int64_t o_step,
                                                   int64_t l_step, int count) {
  SoftmaxStat all = stat_from_lse(own_lse);
#pragma unroll 4
  for (int k = 0; k < count; ++k)
    all = merge_stats(all, stat_from_lse(__ldcg(pl + k * l_step))).merged;
  const float lse = stat_lse(all);
  float acc = 0.f;
  if (lse != -INFINITY) {
    acc = own_lse == -INFINITY ? 0.f : own_o * __expf(own_lse - lse);
#pragma unroll 4
    for (int k = 0; k < count; ++k) {
      const float lk = __ldcg(pl + k * l_step);
      const float ok = __ldcg(po + k * o_step);
      acc += lk == -INFINITY ? 0.f : ok * __expf(lk - lse);
    }
  }
  return Reduced{acc, lse};
}

// Lean host: its own result plus the peers' partials, which sit in consecutive slots.
template <class T, int D>
__device__ void lean_reduce(const DecodeParams& p, const DecodeTile& tile, int n,
                            const SegmentResult<T, D>& res) {
  constexpr int kRows = kDecodeRowsPerBlock;
  const int peers = tile.finishing_cta - tile.host_cta;
  for (int i = threadIdx.x; i < n; i += Traits<T, D>::kThreads) {
    const int r = i / D;
    const Reduced x = reduce_partials(
        res.o[i], res.lse[r], p.part_o + static_cast<int64_t>(tile.first_peer_slot) * kRows * D + i,
        p.part_lse + tile.first_peer_slot * kRows + r, kRows * D, kRows, peers);
    write_output<T, D>(p, tile, r, i % D, x.o, x.lse);
  }
}

// Split-KV: write this split's partial to [split, b, token, head] (merge_states' layout) and
// count it in; the last of the tile's splits to arrive (flags[tile] acting as its counter) folds
// all of them, its own included, and resets the counter for the next launch. Nobody waits.
// FlashDecoding (merge_in_kernel 0) stops after the write: its merge is the next launch.
template <class T, int D>
__device__ void split_finish(const DecodeParams& p, const DecodeTile& tile, int tile_index,
                             int split, int n, const SegmentResult<T, D>& res) {
  __shared__ bool last;
  const int64_t step = static_cast<int64_t>(p.batch) * p.q_len * p.num_q_heads;  // one split
  auto row_of = [&](int r) {
    const RowIndex ri = row_index(p, tile, r);
    return (static_cast<int64_t>(tile.seq) * p.q_len + ri.token) * p.num_q_heads + ri.head;
  };
  for (int i = threadIdx.x; i < n; i += Traits<T, D>::kThreads) {
    const int64_t row = split * step + row_of(i / D);
    p.part_o[row * D + i % D] = res.o[i];
    if (i % D == 0) p.part_lse[row] = res.lse[i / D];
  }
  if (!p.merge_in_kernel) return;
  __syncthreads();  // the CTA's writes precede thread 0's release
  if (threadIdx.x == 0) {
    last = fetch_add_acq_rel(&p.flags[tile_index], 1u) == static_cast<unsigned>(p.num_splits) - 1u;
    if (last) p.flags[tile_index] = 0u;  // every split has arrived: no one else touches it
  }
  __syncthreads();  // thread 0's acquire precedes the CTA's reads
  if (!last) return;
  for (int i = threadIdx.x; i < n; i += Traits<T, D>::kThreads) {
    const int64_t row = row_of(i / D);
    const Reduced x = reduce_partials(0.f, -INFINITY, p.part_o + row * D + i % D,
                                      p.part_lse + row, step * D, step, p.num_splits);
    write_output<T, D>(p, tile, i / D, i % D, x.o, x.lse);
  }
}

// kMods: the kernels with softcap and sliding windows (p.softcap_in, p.window_left), separate
// from the plain ones so those keep their code; at hdim 64 held to 128 registers, so that four
// CTAs a SM fit as for the plain kernels (Lean's grid is planned for the smaller count).
template <class T, int D, class Scheduler, bool kTma, bool kMods>
__global__ void __launch_bounds__(128, kMods && D <= 64 ? 4 : 0)
    decode_kernel(const __grid_constant__ DecodeParams p) {
  using Tr = Traits<T, D>;
  extern __shared__ __align__(16) char smem[];
  // The stages' 128-byte swizzle repeats every 1024 bytes: the ring starts on such a boundary.
  char* area = smem + (1024u - smem_addr(smem) % 1024u) % 1024u;
  uint64_t* full = reinterpret_cast<uint64_t*>(area + Tr::kBarOffset);
  constexpr bool kLean = std::is_same_v<Scheduler, LeanScheduler>;
  __shared__ unsigned target;  // Lean: the flag value meaning "written in this launch"
  const int tid = threadIdx.x;
  FK_DECODE_TRACE_MARK(kTraceEntry);
  FK_DECODE_TRACE_MARK(kTraceSm);
  if (tid == 0) {
    if constexpr (kLean) target = *reinterpret_cast<volatile unsigned*>(p.epoch) + 1u;
    // TMA: thread 0's expect_tx completes a stage; cp.async: every thread's copies.
    for (int s = 0; s < Tr::kStages; ++s) mbar_init(full + s, kTma ? 1 : Tr::kThreads);
    if constexpr (kTma) {
      tma_prefetch_map(&p.k_map);
      tma_prefetch_map(&p.v_map);
      fence_mbarrier_init();
    }
  }
  const Scheduler sched;
  Work w = sched.first(p);  // its plan loads overlap thread 0's epoch load and barrier inits
  if constexpr (kMods && std::is_same_v<Scheduler, SplitKvScheduler>)
    if (p.window_left >= 0) window_split(p, w);
  __syncthreads();
  int it = 0;  // ring position over all of this CTA's segments
  for (; w.valid; w = sched.next(p, w)) {
    const DecodeTile tile = sched.tile(p, w.tile);
    attend<T, D, kTma, kMods>(p, tile, w.lo, w.hi, area, full, it);
    if constexpr (kLean && kTma) {  // only Lean CTAs have more than one segment
      if (tid == 0 && p.l2_prefetch > 0) {
        const Work nw = sched.next(p, w);
        if (nw.valid) prefetch_segment_start<T, D, kTma, kMods>(p, sched.tile(p, nw.tile), nw.lo, nw.hi);
      }
    }
    const SegmentResult<T, D> res(area);
    // Only rows that exist are written, to the output and to partials alike.
    const int n = min(Tr::kRows, p.rows - tile.row_block * Tr::kRows) * D;
    if (w.role == Role::direct) {
      for (int i = tid; i < n; i += Tr::kThreads)
        write_output<T, D>(p, tile, i / D, i % D, res.o[i], res.lse[i / D]);
    } else if (w.role == Role::split_partial) {
      split_finish<T, D>(p, tile, w.tile, w.slot, n, res);
    } else if (w.role == Role::lean_partial) {
      for (int i = tid; i < n; i += Tr::kThreads) {
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
      FK_DECODE_TRACE_MARK(kTraceWaitEnd);
      __syncthreads();
      lean_reduce<T, D>(p, tile, n, res);
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
  FK_DECODE_TRACE_MARK(kTraceExit);
}

// The kernel's shared-memory limit, once per device (a process-wide once left a second GPU
// without it); an Error naming q's hdim where the device has too little (hdim 256 needs ~201 KB).
template <class T, int D, class Scheduler, bool kTma, bool kMods>
void configure() {
  static const std::string what = flashkit::detail::cat("q: hdim ", D, " decode");
  ensure_smem_limit<decode_kernel<T, D, Scheduler, kTma, kMods>>(
      static_cast<int>(Traits<T, D>::kSmemBytes), what.c_str());
}

template <class T, int D, class Scheduler, bool kTma, bool kMods>
void launch_one(const DecodeParams& p, cudaStream_t stream) {
  configure<T, D, Scheduler, kTma, kMods>();
  decode_kernel<T, D, Scheduler, kTma, kMods>
      <<<p.grid, Traits<T, D>::kThreads, Traits<T, D>::kSmemBytes, stream>>>(p);
  FK_CHECK_LAUNCH("decode_kernel");
#ifdef FK_DECODE_TRACE
  trace_print(p.grid, stream);
#endif
}

template <class T, int D, class Scheduler>
void launch_loader(const DecodeParams& p, cudaStream_t stream) {
  const bool mods = p.softcap_in != 0.f || p.window_left >= 0;
  if (p.kv_box > 0)
    mods ? launch_one<T, D, Scheduler, true, true>(p, stream)
         : launch_one<T, D, Scheduler, true, false>(p, stream);
  else
    mods ? launch_one<T, D, Scheduler, false, true>(p, stream)
         : launch_one<T, D, Scheduler, false, false>(p, stream);
}

template <class T, int D>
void KernelSet<T, D>::launch(const DecodeParams& p, DecodeSchedule s, cudaStream_t stream) {
  switch (s) {
    case DecodeSchedule::single:
      launch_loader<T, D, SingleScheduler>(p, stream);
      break;
    case DecodeSchedule::split_kv:
    case DecodeSchedule::flash_decoding:  // the same kernel; p.merge_in_kernel tells them apart
      launch_loader<T, D, SplitKvScheduler>(p, stream);
      break;
    default:
      launch_loader<T, D, LeanScheduler>(p, stream);
      break;
  }
}

template <class T, int D>
int KernelSet<T, D>::ctas_per_sm() {
  // The plan's Lean grid must be co-resident whichever kernel a call picks (loader, modifiers):
  // the smallest count.
  static const int n = [] {
    auto blocks = [](auto kernel, size_t smem) {
      int b = 0;
      FK_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, kernel, 128, smem));
      return b;
    };
    constexpr size_t kSmem = Traits<T, D>::kSmemBytes;
    configure<T, D, LeanScheduler, false, false>();
    configure<T, D, LeanScheduler, true, false>();
    configure<T, D, LeanScheduler, false, true>();
    configure<T, D, LeanScheduler, true, true>();
    return std::min({blocks(decode_kernel<T, D, LeanScheduler, false, false>, kSmem),
                     blocks(decode_kernel<T, D, LeanScheduler, true, false>, kSmem),
                     blocks(decode_kernel<T, D, LeanScheduler, false, true>, kSmem),
                     blocks(decode_kernel<T, D, LeanScheduler, true, true>, kSmem)});
  }();
  return n;
}

template <class T, int D>
int KernelSet<T, D>::tma_box(bool paged, int page_size, int lean_tile) {
  // The TMA kernels run where the loaded binary is sm_90 code (not on sm_80 builds or GPUs).
  static std::atomic<int> known[64];  // per device: 0 unknown, 1 no, 2 yes
  int device = 0;
  FK_CUDA_CHECK(cudaGetDevice(&device));
  int state = device < 64 ? known[device].load() : 0;
  if (state == 0) {
    cudaFuncAttributes a{};
    FK_CUDA_CHECK(cudaFuncGetAttributes(&a, decode_kernel<T, D, LeanScheduler, true, false>));
    state = a.binaryVersion >= 90 ? 2 : 1;
    if (device < 64) known[device].store(state);
  }
  return state == 2 ? tma_box_tokens(paged, page_size, Traits<T, D>::kTokens, lean_tile) : 0;
}

}  // namespace flashkit::cuda::decoding
