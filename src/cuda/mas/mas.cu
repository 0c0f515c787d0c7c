// CUDA entry points of MAS (launch.h): workspace carve-up, the split of items over clusters,
// launches of the forward kernel (forward.cuh) and of the kernels around it (output.cuh). No host
// sync, no allocation after the workspace has grown once.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "api/validate.h"
#include "common/dtype_bits.h"
#include "cuda/common/check.h"
#include "cuda/common/pdl.h"
#include "cuda/common/smem_limit.h"
#include "cuda/common/workspace.h"
#include "cuda/mas/band.cuh"
#include "cuda/mas/forward.cuh"
#include "cuda/mas/launch.h"
#include "cuda/mas/output.cuh"

namespace flashkit::cuda {
namespace {

using namespace mas_kernels;

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
  int32_t* rows_next;  // v17's chunk counter
};

size_t align256(size_t n) { return (n + 255) / 256 * 256; }

// The current device and what the launch choices read of it (split, path kernels): queried once
// a call by the entry points and passed down.
struct Gpu {
  int dev = 0, sms = 0, major = 0;
};
Gpu current_gpu() {
  Gpu g;
  FK_CUDA_CHECK(cudaGetDevice(&g.dev));
  FK_CUDA_CHECK(cudaDeviceGetAttribute(&g.sms, cudaDevAttrMultiProcessorCount, g.dev));
  FK_CUDA_CHECK(cudaDeviceGetAttribute(&g.major, cudaDevAttrComputeCapabilityMajor, g.dev));
  return g;
}

Scratch carve(const MasOptions& opts, int B, int Tw, int W, int C, int splits, bool need_dur,
              Stream stream) {
  const size_t ring =
      splits > 1 ? align256(sizeof(float) * B * static_cast<size_t>(splits) * W * 32) : 0;
  // progress and, behind it, pace: [B][splits] each.
  const size_t progress = splits > 1 ? align256(sizeof(int32_t) * 2 * B * splits) : 0;
  const size_t bits = align256(sizeof(uint32_t) * B * static_cast<size_t>(W) * Tw);
  const size_t rows = align256(sizeof(int32_t) * B * static_cast<size_t>(Tw));
  const size_t bad = align256(sizeof(int32_t) * B);
  const size_t coef = align256(sizeof(float) * B * static_cast<size_t>(C) * 3 * Tw);
  const size_t counter = align256(sizeof(int32_t));
  char* w = static_cast<char*>(workspace(
      opts.workspace, ring + progress + bits + rows * (need_dur ? 2 : 1) + bad + coef + counter,
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
  s.rows_next = reinterpret_cast<int32_t*>(w + bits + rows * (need_dur ? 2 : 1) + bad + coef);
  return s;
}

// Knobs for measuring on the GPU without a rebuild (read once): FLASHKIT_MAS_L2="D,G" forces the
// L2 prefetch (D blocks ahead, runs of G blocks; G a power of two), FLASHKIT_MAS_PACE=0 lets the
// path warp zero at full speed, FLASHKIT_MAS_STAGE=0 / 1 loads the likelihood into registers as v7
// did / through the shared-memory stage at every T, FLASHKIT_MAS_PATH_KERNEL=0 / 1 writes dense
// paths with the forward kernel's path warp / with the separate path kernel after the DP at every
// T, FLASHKIT_MAS_SLOTS=8|16|32 the chunks staged per warp, FLASHKIT_MAS_K=1|2|4 the staged
// kernel's rows a lane (where the CTA's rows allow it), FLASHKIT_MAS_SPLIT_ROWS=n splits items
// over a cluster down to n rows a CTA (default 256), FLASHKIT_MAS_FUSED_SPLIT=0 gives the fused
// mode the unfused split and rows a lane (choose_split), FLASHKIT_MAS_EARLY_ZEROS=0 runs the
// separate path kernel after the DP instead of beside it (finish), FLASHKIT_MAS_BAND=0 keeps the
// staged kernel where the band kernel would run (use_band), FLASHKIT_MAS_BAND_WARPS=2 gives the
// band kernel two DP warps from 65 rows on, FLASHKIT_MAS_BAND_BULK=0 zeroes the band kernel's path
// with zero warps beside the DP instead of bulk copies during the backtrack (sm_90),
// FLASHKIT_MAS_TRACE=1 prints the band kernel's phase clocks and backtrack steps (syncs every
// call). Unset: the choices below.
// (Measured and removed, bench/NOTES-mas.md v14: a lane-skewed staged loop and cell_pred on the
// register path; v19: paced zero warps, a warp-parallel backtrack, a zeroing kernel ahead of the
// band kernel.)
struct Tuning {
  int l2_blocks = -1, l2_group = 1;
  bool pace = true;
  int path_kernel = -1;  // -1: by the text length (set_fused_path)
  int stage = -1;  // -1: by the text length (use_stage)
  int slots = 0;   // 0: by the shared memory left (stage_slots)
  int k = 0;       // staged rows a lane, 1, 2 or 4; 0: 2 (stage_rows_per_lane)
  int split_rows = 256;  // split an item over a cluster down to this many rows a CTA
  bool fused_split = true;  // the fused mode's own split and rows a lane (v15)
  int fused_k = 0;          // the fused mode's rows a lane, 1, 2 or 4; 0: by the rule
  bool early_zeros = true;  // v17: the separate path kernel zeroes beside the DP (sm_90)
  bool band = true;         // v18: the band kernel where use_band allows it
  int band_warps = 0;       // v18d: FLASHKIT_MAS_BAND_WARPS (band_warps)
  bool band_bulk = true;    // v19c: FLASHKIT_MAS_BAND_BULK=0: zero warps' stores beside the DP
};
const Tuning& tuning() {
  static const Tuning t = [] {
    Tuning t;
    if (const char* e = std::getenv("FLASHKIT_MAS_L2")) {
      int d = 0, g = 1;
      if (std::sscanf(e, "%d,%d", &d, &g) == 2 && d >= 0 && g >= 1 && g <= 16 && (g & (g - 1)) == 0)
        t.l2_blocks = d, t.l2_group = g;
    }
    if (const char* e = std::getenv("FLASHKIT_MAS_PACE")) t.pace = std::strcmp(e, "0") != 0;
    if (const char* e = std::getenv("FLASHKIT_MAS_STAGE")) t.stage = std::strcmp(e, "0") != 0;
    if (const char* e = std::getenv("FLASHKIT_MAS_PATH_KERNEL"))
      t.path_kernel = std::strcmp(e, "0") != 0;
    if (const char* e = std::getenv("FLASHKIT_MAS_FUSED_K")) {
      const int n = std::atoi(e);
      if (n == 1 || n == 2 || n == 4) t.fused_k = n;
    }
    if (const char* e = std::getenv("FLASHKIT_MAS_EARLY_ZEROS"))
      t.early_zeros = std::strcmp(e, "0") != 0;
    if (const char* e = std::getenv("FLASHKIT_MAS_BAND")) t.band = std::strcmp(e, "0") != 0;
    if (const char* e = std::getenv("FLASHKIT_MAS_BAND_WARPS")) t.band_warps = std::atoi(e);
    if (const char* e = std::getenv("FLASHKIT_MAS_BAND_BULK"))
      t.band_bulk = std::strcmp(e, "0") != 0;
    if (const char* e = std::getenv("FLASHKIT_MAS_FUSED_SPLIT"))
      t.fused_split = std::strcmp(e, "0") != 0;
    if (const char* e = std::getenv("FLASHKIT_MAS_SPLIT_ROWS")) {
      const int n = std::atoi(e);
      if (n >= 32 && n <= 1024) t.split_rows = n;
    }
    if (const char* e = std::getenv("FLASHKIT_MAS_K")) {
      const int n = std::atoi(e);
      if (n == 1 || n == 2 || n == 4) t.k = n;
    }
    if (const char* e = std::getenv("FLASHKIT_MAS_SLOTS")) {
      const int n = std::atoi(e);
      if (n == 8 || n == 16 || n == 32) t.slots = n;
    }
    return t;
  }();
  return t;
}

template <Src S, int K, int NB, bool kVec, bool kStage = false, int kSlots = 8>
void launch_kernel(const Params& p, int B, cudaStream_t stream) {
  constexpr auto kernel = mas_forward<S, K, NB, kVec, kStage, kSlots>;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(B * p.splits);
  cfg.blockDim = dim3(p.dp_warps * 32 + (p.path != nullptr ? 32 : 0));
  cfg.dynamicSmemBytes =
      (kStage ? p.stage_bytes : 0) + (p.bits_smem ? sizeof(uint32_t) * p.W * p.rows : 0);
  cfg.stream = stream;
  // Opt in whenever there is dynamic shared memory: the 48 KB default counts the static part
  // too (17.5 KB here), so 31-48 KB of stage and bits failed to launch (d2 run of v8).
  if (cfg.dynamicSmemBytes > 0) ensure_smem_limit<kernel>(kMaxDynSmem);
  cudaLaunchAttribute cluster;
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = p.splits, cluster.val.clusterDim.y = 1, cluster.val.clusterDim.z = 1;
  cfg.attrs = &cluster;
  cfg.numAttrs = p.splits > 1 ? 1 : 0;
  FK_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, p));
  FK_CHECK_LAUNCH("mas_forward");
}

// The staged kernel for K rows a lane, by the slots a warp's stage holds (stage_bytes).
template <Src S, int K>
void launch_staged(const Params& p, int B, cudaStream_t stream) {
  constexpr int kNB = S == Src::f32 ? 4 : 2;  // unused by the staged loop
  const int slots = p.stage_bytes / (p.dp_warps * Stager<K>::kSlotBytes);
  if (slots == 32) return launch_kernel<S, K, kNB, true, true, 32>(p, B, stream);
  if (slots == 16) return launch_kernel<S, K, kNB, true, true, 16>(p, B, stream);
  launch_kernel<S, K, kNB, true, true, 8>(p, B, stream);
}

// Staged (contiguous aligned rows, stage_bytes > 0): K = 1, 2 or 4 rows a lane (choose_split).
// Otherwise K = 4 rows a lane up to 512 rows a CTA, else K = 8; chunks in registers: fp32 4 (24
// frames ahead), 16-bit 2 (16 frames ahead: a 32-frame block is 2 chunks), fused and K = 8 2.
template <Src S, bool kVec>
void launch_rows(const Params& p, int B, cudaStream_t stream) {
  constexpr int kNB4 = S == Src::f32 ? 4 : 2;
  if constexpr (S == Src::fused) {  // 1 or 2 rows a lane (choose_split's fused rule); 4, 8 below
    const int k = p.rows / (32 * p.dp_warps);
    if (k == 1) return launch_kernel<S, 1, 2, kVec>(p, B, stream);
    if (k == 2) return launch_kernel<S, 2, 2, kVec>(p, B, stream);
  }
  if constexpr (kVec && S != Src::fused)
    if (p.stage_bytes > 0) {
      const int k = p.rows / (32 * p.dp_warps);
      if (k == 1) return launch_staged<S, 1>(p, B, stream);
      if (k == 2) return launch_staged<S, 2>(p, B, stream);
      return launch_staged<S, 4>(p, B, stream);
    }
  if (p.rows <= 512)
    launch_kernel<S, 4, kNB4, kVec>(p, B, stream);
  else
    launch_kernel<S, 8, 2, kVec>(p, B, stream);
}

// The band kernel (band.cuh, v18) for R rows a lane on NW DP warps, and, when it writes the path,
// warps that zero it (see zero_warps).
template <Src S, int R, int NW>
void launch_band_rows(const Params& p, int B, cudaStream_t stream) {
  constexpr auto kernel = mas_forward_band<S, R, NW>;
  ensure_smem_limit<kernel>(kMaxDynSmem);
  // FLASHKIT_MAS_TRACE=1 (measuring only: syncs the stream): CTA 0's phase clocks, printed.
  static const bool tracing = std::getenv("FLASHKIT_MAS_TRACE") != nullptr;
  static int64_t* trace = nullptr;
  Params q = p;
  if (tracing) {
    if (trace == nullptr) FK_CUDA_CHECK(cudaMalloc(&trace, 16 * sizeof(int64_t)));
    FK_CUDA_CHECK(cudaMemsetAsync(trace, 0, 16 * sizeof(int64_t), stream));
    q.trace = trace;
  }
  // The warps that zero the path: on sm_90 one, with bulk copies during the backtrack (v19c,
  // p.band_bulk); else one DP or zero warp a scheduler (v19: with two DP warps a third zero warp
  // shared warp 0's scheduler; measured level, H200).
  const int zero_warps = p.band_bulk ? 1 : 4 - NW;
  kernel<<<B, 32 * (NW + (p.path != nullptr ? zero_warps : 0)), band_smem_bytes(R, NW, p.S),
           stream>>>(q);
  FK_CHECK_LAUNCH("mas_forward_band");
  if (tracing) {
    int64_t h[16];
    FK_CUDA_CHECK(cudaMemcpyAsync(h, trace, sizeof(h), cudaMemcpyDeviceToHost, stream));
    FK_CUDA_CHECK(cudaStreamSynchronize(stream));
    for (int w = 0; w < NW; ++w) {
      const int64_t* t = h + 8 * w;
      std::fprintf(stderr,
                   "band trace T=%d R=%d warp %d: issue %lld, lengths %lld, dp %lld, barrier %lld, "
                   "backtrack %lld (%lld steps), runs %lld cycles\n",
                   p.T, R, w, static_cast<long long>(t[1] - t[0]),
                   static_cast<long long>(t[2] - t[1]), static_cast<long long>(t[3] - t[2]),
                   static_cast<long long>(t[4] - t[3]), static_cast<long long>(t[5] - t[4]),
                   static_cast<long long>(t[7]), static_cast<long long>(t[6] - t[5]));
    }
  }
}
// DP warps of the band kernel: 1 up to 128 rows, 2 past (4 rows a lane each);
// FLASHKIT_MAS_BAND_WARPS=2 takes 2 from 65 rows on, =1 keeps 1 up to 128 rows.
int band_warps(int T) {
  const int forced = tuning().band_warps;
  if (T <= 64) return 1;
  if (T > 128) return 2;
  return forced == 2 ? 2 : 1;
}
template <Src S>
void launch_band(const Params& p, int B, cudaStream_t stream) {
  const int nw = band_warps(p.T);
  switch (band_rows_per_lane(p.T, nw) * 10 + nw) {
    case 11:
      return launch_band_rows<S, 1, 1>(p, B, stream);
    case 21:
      return launch_band_rows<S, 2, 1>(p, B, stream);
    case 41:
      return launch_band_rows<S, 4, 1>(p, B, stream);
    case 22:
      return launch_band_rows<S, 2, 2>(p, B, stream);
    default:
      return launch_band_rows<S, 4, 2>(p, B, stream);
  }
}

// The band kernel takes texts of 1 to 256 rows whose rows are contiguous and 16-byte aligned
// (vec), from sm_80 on (cp.async), where its rings and decision words fit the shared memory.
// Measured (bench/NOTES-mas.md v18-v19c, H200, GPU time of a call): T = 128 24 us (v18: 26-28)
// against the staged kernel's 37-39, T = 256 (two DP warps) 54.5 (v18d: 74-75) against 86-88.
// FLASHKIT_MAS_BAND=0: the staged kernel at every length (the A/B).
bool use_band(const Gpu& gpu, int T, int S, bool vec) {
  if (!tuning().band || gpu.major < 8 || !vec || T < 1 || T > kBandMaxText) return false;
  const int nw = band_warps(T);
  return band_smem_bytes(band_rows_per_lane(T, nw), nw, S) <= kMaxDynSmem;
}

template <Src S>
void launch_forward(const Params& p, int B, bool vec, cudaStream_t stream) {
  if constexpr (S == Src::fused)
    launch_rows<S, false>(p, B, stream);  // z is read through its own strides
  else if (vec)
    launch_rows<S, true>(p, B, stream);
  else
    launch_rows<S, false>(p, B, stream);
}

// Short texts (up to kShortText rows) take the shared-memory stage (v8) and the forward kernel's
// path warp; longer ones register loads with L2 prefetch (v7) and the separate path kernel.
// Measured (bench/NOTES-mas.md, v8 on the H200, v9 on the H100; B = 32, S = 4T): the stage is
// 1.18x faster at T = 512 but 0.90x at T = 1024 and 2048, where the DP is read-bound and the
// stage (8-16 chunks a warp there) keeps fewer bytes in flight than v7's register chunks plus L2
// prefetch runs; the path: see set_fused_path.
constexpr int kShortText = 512;
bool use_stage(int T) {
  const int forced = tuning().stage;
  return forced >= 0 ? forced != 0 : T <= kShortText;
}

// Chunks staged per DP warp: the deepest of 8, 16, 32 whose stage takes at most 128 KB of the
// CTA's shared memory (the decision bits may take up to 72 KB beside it); a slot is K KB.
int stage_slots(int dp_warps, int k) {
  const int forced = tuning().slots;
  if (forced > 0 && dp_warps * forced * k * 1024 <= (128 << 10)) return forced;
  int slots = 32;
  while (slots > 8 && dp_warps * slots * k * 1024 > (128 << 10)) slots /= 2;
  return slots;
}

// Rows a lane of the staged kernel for `per` rows a CTA (at most 512): 2 (v12), i.e. one DP warp
// per 64 rows. Measured (H100, same machine, B = 32, S = 4T, kernels with path): K = 2 56 / 107 /
// 266 us at T = 128 / 256 / 512 against v9's K = 4 78 / 121 / 287 and K = 1 62 / 115 / 276 (one
// more 32-frame block of lag per extra warp).
int stage_rows_per_lane(int per) {
  const int forced = tuning().k;
  const int k = forced > 0 ? forced : 2;
  return per <= k * kMaxThreads ? k : 4;
}

// Rows per CTA and CTAs per item: split long texts over a cluster while the batch leaves SMs
// idle, keeping at least 256 rows a CTA (the pipeline costs 32 frames of lag per CTA). Clusters
// exist from sm_90 on; older GPUs run one CTA per item.
// The fused likelihood (v15) is compute, C x 3 operations a cell, done by the DP warps: split
// down to 128 rows a CTA, then rows a lane as measured (v15c, H200, B = 32, C = 192): 1 up to 128
// rows a CTA, 2 up to 384, 4 up to 512, else 8 (FLASHKIT_MAS_FUSED_SPLIT=0: the unfused rule).
void choose_split(Params& p, int B, bool staged_rows, bool fused, const Gpu& gpu) {
  const bool by_compute = fused && tuning().fused_split;
  const int min_rows = by_compute ? 128 : tuning().split_rows;
  p.splits = 1;
  while (gpu.major >= 9 && p.splits < 8 && int64_t{B} * p.splits * 2 <= gpu.sms &&
         p.T / (p.splits * 2) >= min_rows)
    p.splits *= 2;
  const int per = (p.T + p.splits - 1) / p.splits;
  const bool stage = staged_rows && per <= 512 && use_stage(p.T);
  int k = stage         ? stage_rows_per_lane(per)
          : by_compute ? (per <= 128 ? 1 : per <= 384 ? 2 : per <= 512 ? 4 : 8)
          : per <= 512 ? 4
                       : 8;
  // FLASHKIT_MAS_FUSED_K=1|2|4 (measuring): the fused mode's rows a lane, where the CTA's rows fit.
  const int fk = tuning().fused_k;
  if (by_compute && fk > 0 && per <= fk * (max_block_threads(fk) - 32)) k = fk;
  p.rows = std::max((per + 32 * k - 1) / (32 * k), 1) * 32 * k;
  p.dp_warps = p.rows / (32 * k);
  p.stage_bytes = stage ? p.dp_warps * stage_slots(p.dp_warps, k) * k * 1024 : 0;
  p.bits_smem = p.splits == 1 && sizeof(uint32_t) * p.W * p.rows <=
                                     std::min<size_t>(kMaxBitsSmem, kMaxDynSmem - p.stage_bytes);
}

// L2 prefetch of the rows (block_bytes: one 32-frame block of every row of the batch). Up to 24
// MiB of lookahead (a block of all rows is 8 MiB at T = 2048: deeper, the prefetched lines were
// evicted before use and DRAM read 1.7x the likelihood, v6b), in runs of 256 bytes per row; where
// even two blocks do not fit, single blocks within 16 MiB as before.
// fp32 likelihoods on the register path (texts over 512 rows a CTA) take none: measured without
// it (session 7, same call each, B = 32, S = 4T, kernels with path), H100 T = 1024 767 -> 747 us,
// T = 2048 2403 -> 2311; H200 705 -> 687, 2170 -> 2104 (bench/NOTES-mas.md): the register chunks
// keep enough bytes in flight, and the prefetch's requests cost more than they hide.
void choose_l2(Params& p, int64_t block_bytes, int es) {
  const Tuning& t = tuning();
  if (t.l2_blocks >= 0) {
    p.l2_blocks = t.l2_blocks, p.l2_group = t.l2_group;
    return;
  }
  if (p.stage_bytes == 0 && es == 4) {
    p.l2_blocks = 0, p.l2_group = 1;
    return;
  }
  const int64_t bb = std::max<int64_t>(block_bytes, 1), fit = (int64_t{24} << 20) / bb;
  const int group = 256 / (32 * es);  // blocks per 256-byte run: 2 (fp32), 4 (16-bit)
  if (fit >= group + 1) {
    p.l2_group = group;
    p.l2_blocks = static_cast<int>(std::min<int64_t>(fit - group, 4));
  } else {
    p.l2_group = 1;
    p.l2_blocks = static_cast<int>(std::clamp<int64_t>((int64_t{16} << 20) / bb, 0, 4));
  }
}

// The forward kernel writes the path itself when each item's T x S elements form one dense block
// (rows or columns contiguous: both originals' layouts) and the text is short (kShortText);
// other views and longer texts go through finish(). Why not longer texts (v9, H100, B = 32,
// S = 4T): there the DP is memory-bound and the path warp's zeros, paced or not, slow it by more
// than the separate kernel's full-speed pass costs (same call, T = 2048: 2.73 ms against 2.37).
// On sm_90 the separate kernel zeroes beside the DP (v17, p.early_zeros), which wins from T = 512
// on (H200, same call: kernels with path 247 / 235 us against 274 / 260 with the path warp) but
// not at T = 128 (70 / 57 against 57 / 56): the kernel's own zeros keep texts up to
// kShortTextEarly rows there (paths the early kernel cannot write keep them up to kShortText, as
// before). With the band kernel (v19, H200, GPU time of a drop-in call) the early kernel wins at
// T = 256 (53.5-55 us against 58.6-65 with the band kernel's zeros) and loses at T = 128 (36
// against 24-26), hence 128. early: the early kernel could write this path (early_zeros_possible).
constexpr int kShortTextEarly = 128;
void set_fused_path(Params& p, const TensorView& path, bool early) {
  if (!path.defined() || path.numel() == 0 ||
      (p.dp_warps + 1) * 32 > max_block_threads(p.rows / (32 * p.dp_warps)))
    return;
  const int short_text = early ? kShortTextEarly : kShortText;
  const int forced = tuning().path_kernel;
  if (forced >= 0 ? forced != 0 : p.T > short_text) return;
  const int64_t px = path.stride[1], py = path.stride[2];
  const bool rows = (py == 1 || p.S == 1) && (px == p.S || p.T == 1);
  const bool cols = (px == 1 || p.T == 1) && (py == p.T || p.S == 1);
  if (!rows && !cols) return;
  p.path = static_cast<char*>(path.data);
  p.pb = path.stride[0], p.px = px, p.py = py;
  p.pes = static_cast<int>(dtype_size(path.dtype));
  p.one = one_bits(path.dtype);
}

// The path's rows are contiguous whole 16-byte pieces at 16-byte aligned addresses (the vector
// path kernels' condition).
bool path_rows16(const TensorView& path, int S) {
  const int64_t es = static_cast<int64_t>(dtype_size(path.dtype));
  return (path.stride[2] == 1 || S == 1) && aligned16(path.data) && (S * es) % 16 == 0 &&
         (path.stride[1] * es) % 16 == 0 && (path.stride[0] * es) % 16 == 0;
}

// v17: whether the separate path kernel could zero this path beside the DP (sm_90, rows of whole
// 16-byte pieces, FLASHKIT_MAS_EARLY_ZEROS not 0); it does where the forward kernel does not
// write the path itself (common_params sets p.early_zeros once a call). Its chunk counter is
// zeroed before the forward kernel (prepare_path), so nothing sits between the two launches.
bool early_zeros_possible(const TensorView& path, int S, const Gpu& gpu) {
  if (!path.defined() || path.numel() == 0 || !tuning().early_zeros || !path_rows16(path, S))
    return false;
  return gpu.major >= 9;
}
void prepare_path(const Params& p, const Scratch& s, cudaStream_t stream) {
  if (p.early_zeros) FK_CUDA_CHECK(cudaMemsetAsync(s.rows_next, 0, sizeof(int32_t), stream));
}

// Everything after the forward pass: the path from the runs, the status word.
void finish(const Params& p, const Scratch& s, int B, const TensorView& path, const Gpu& gpu,
            const MasOptions& opts, cudaStream_t stream) {
  if (path.defined() && path.numel() > 0 && p.path == nullptr) {
    PathParams pp{static_cast<char*>(path.data),
                  path.stride[0],
                  path.stride[1],
                  path.stride[2],
                  static_cast<int>(dtype_size(path.dtype)),
                  one_bits(path.dtype),
                  B,
                  p.T,
                  p.S,
                  p.Tw,
                  p.start,
                  p.dur,
                  p.db,
                  p.dx};
    const int sms = gpu.sms;
    if (pp.py == 1 || p.S == 1) {
      const bool vec = path_rows16(path, p.S);
      const int grid = static_cast<int>(std::min<int64_t>(int64_t{B} * p.T, sms * 16));
      if (p.early_zeros) {
        // v17: zeros on the SMs the DP leaves free while it runs (one CTA an SM: a whole SM's
        // shared memory), the ones after it (bench/NOTES-mas.md). Chunks of ~1 MB, at most
        // kMaxChunks of them (the CTA's chunk list).
        constexpr int kMaxChunks = 32768;
        const int64_t nrows = int64_t{B} * p.T, row_bytes = int64_t{p.S} * pp.es;
        int64_t chunk_rows = std::max<int64_t>(1, (int64_t{1} << 20) / std::max<int64_t>(row_bytes, 1));
        chunk_rows = std::max(chunk_rows, (nrows + kMaxChunks - 1) / kMaxChunks);
        int smem = 0;
        FK_CUDA_CHECK(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, gpu.dev));
        smem -= 1024;  // the kernel's static bytes fit beside it
        constexpr auto kernel = mas_write_path_rows_early;
        ensure_smem_limit<kernel>(smem);
        launch_pdl(kernel, dim3(static_cast<unsigned>(sms)), dim3(1024), static_cast<size_t>(smem),
                   stream, true, pp, s.rows_next, static_cast<int>(chunk_rows));
        FK_CHECK_LAUNCH("mas_write_path_rows_early");
      } else if (!vec)
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

Params common_params(const Gpu& gpu, int B, int T, int S, int C, const TensorView& tl,
                     const TensorView& ml, const TensorView& path, const TensorView& durations,
                     const MasOptions& opts, bool staged_rows, Scratch& s, bool fused = false) {
  Params p{};
  p.T = T, p.S = S, p.Tw = (T + 7) / 8 * 8, p.W = (S + 31) / 32, p.C = C, p.l2_group = 1;
  choose_split(p, B, staged_rows, fused, gpu);
  s = carve(opts, B, p.Tw, p.W, C, p.splits, !durations.defined(), opts.stream);
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
  const bool early = early_zeros_possible(path, p.S, gpu);
  set_fused_path(p, path, early);
  p.early_zeros = early && p.path == nullptr;
  p.pace_off = p.splits > 1 && p.path != nullptr && tuning().pace ? B * p.splits : 0;
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
  const int es = static_cast<int>(dtype_size(value.dtype));
  const bool vec = value.stride[2] == 1 && aligned16(value.data) && (value.stride[1] * es) % 16 == 0 &&
                   (value.stride[0] * es) % 16 == 0;
  const Gpu gpu = current_gpu();
  Params p =
      common_params(gpu, B, T, S, 0, text_lengths, mel_lengths, path, durations, opts, vec, s);
  p.value = value.data, p.vb = value.stride[0], p.vx = value.stride[1], p.vy = value.stride[2];
  choose_l2(p, int64_t{B} * T * 32 * es, es);
  prepare_path(p, s, stream);
  if (use_band(gpu, T, S, vec)) {
    p.band_bulk = tuning().band_bulk && gpu.major >= 9;
    switch (value.dtype) {
      case DType::f16:
        launch_band<Src::f16>(p, B, stream);
        break;
      case DType::bf16:
        launch_band<Src::bf16>(p, B, stream);
        break;
      default:
        launch_band<Src::f32>(p, B, stream);
        break;
    }
    return finish(p, s, B, path, gpu, opts, stream);
  }
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
  finish(p, s, B, path, gpu, opts, stream);
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
  const Gpu gpu = current_gpu();
  Params p = common_params(gpu, B, T, S, C, text_lengths, mel_lengths, path, durations, opts,
                           false, s, true);
  p.z = z.data, p.zb = z.stride[0], p.zc = z.stride[1], p.zy = z.stride[2];
  p.zdtype = static_cast<int>(z.dtype);
  p.z_vec = z.stride[2] == 1 && z.stride[0] % 8 == 0 && z.stride[1] % 8 == 0 &&
            reinterpret_cast<uintptr_t>(z.data) % 16 == 0;
  if (C > 0) {
    mas_fused_coeffs<<<dim3((p.Tw + 127) / 128, C, B), 128, 0, stream>>>(
        m.data, logs.data, static_cast<int>(m.dtype), m.stride[0], m.stride[1], m.stride[2],
        logs.stride[0], logs.stride[1], logs.stride[2], T, p.Tw, C, s.coef);
    FK_CHECK_LAUNCH("mas_fused_coeffs");
  }
  prepare_path(p, s, stream);
  launch_forward<Src::fused>(p, B, false, stream);
  finish(p, s, B, path, gpu, opts, stream);
}

}  // namespace flashkit::cuda
