// The decode mainloop: rows [row_block*16, +16) of a tile (query heads of one KV head x query
// tokens: one m16 MMA tile, so K/V are read once per KV head) against a token range of the cache,
// streamed through a shared-memory ring of 128-byte-swizzled stages with one mbarrier a stage. Two
// loaders fill the ring (dispatch.cu chooses): all threads issue 16-byte cp.async, each thread's
// copies arriving on the stage's barrier when they land; or, on sm_90 (kTma), one thread issues
// tensor-map boxes completing on it. Either way a stage is refilled as soon as the CTA is done
// with it, before the wait for the next one, so the whole ring is in flight while a warp waits.
// Each warp takes 16 of every 64 keys with its own log2-domain online softmax; warps merge with
// merge_stats.
#pragma once
#include <cuda_runtime.h>

#include <climits>

#include "common/softmax_state.h"
#include "cuda/common/fast_tanh.h"
#include "cuda/decode/device_ops.h"
#include "cuda/decode/params.h"
#include "cuda/decode/tma_ops.h"
#include "cuda/decode/trace.h"

namespace flashkit::cuda::decoding {

template <class T, int D>
struct Traits {
  static_assert(D % 64 == 0 && D <= 256, "hdim must be 64, 128 or 256");
  static constexpr int kWarps = 4, kThreads = 128, kRows = kDecodeRowsPerBlock;
  // A stage holds kTokens = 64 keys, 16 a warp. hdim 128: three 32 KiB stages, two CTAs a SM;
  // hdim 64: two 16 KiB stages, four CTAs a SM (the registers' limit), measured 2-4% faster than
  // three stages of 128 keys at >= 64k and level elsewhere (bench/NOTES-decode.md, session 18);
  // hdim 256 fits one CTA with two 64 KiB stages in flight. FK_DECODE_STAGES overrides the ring
  // depth at every hdim (A/B builds).
  static constexpr int kTokens = kDecodeChunkTokens;
#ifdef FK_DECODE_STAGES
  static constexpr int kStages = FK_DECODE_STAGES;
#else
  static constexpr int kStages = D <= 64 ? 2 : 3;
#endif
  // Both loaders: D/64 unpadded slabs of [kTokens][64] whose 128-byte rows hold chunk c at
  // c ^ (row % 8), read conflict-free. (cp.async into rows padded by 16 bytes instead streamed
  // at 4.18 TB/s against 4.48 in bench/decode_stream_micro.cu: a 128-byte line of K or V must
  // land in one aligned 128-byte row of shared memory; bench/NOTES-decode.md, session 31.)
  static constexpr int kPitch = D;
  static constexpr int kTileElems = kTokens * kPitch;
  static constexpr int kStageElems = 2 * kTileElems;  // K tile then V tile
  static constexpr size_t kPipeBytes = size_t{kStages} * kStageElems * sizeof(T);
  // After the mainloop the pipeline area holds the warps' states and the CTA's merged result.
  static constexpr size_t kMergeBytes =
      (size_t{kWarps} * kRows * D + kRows * D + 2 * kWarps * kRows + kRows) * 4;
  static constexpr size_t kAreaBytes = kPipeBytes > kMergeBytes ? kPipeBytes : kMergeBytes;
  static constexpr int kQPitch = D + 8;
  static constexpr size_t kBarOffset = kAreaBytes + size_t{kRows} * kQPitch * sizeof(T);
  // The stages' full barriers, and 1 KiB to align the area up (the swizzle's atom).
  static constexpr size_t kSmemBytes = kBarOffset + kStages * 8 + 1024;
  static constexpr bool kQInRegs = D <= 128;  // Q fragments stay in registers when O leaves room
};

// Element offset of 16-byte chunk c (dims 8c .. 8c+7) of row r in a stage's K or V tile.
template <class T, int D>
__device__ __forceinline__ int chunk_at(int r, int c) {
  return c / 8 * (Traits<T, D>::kTokens * 64) + r * 64 + ((c % 8) ^ (r % 8)) * 8;
}

// The same for the chunk 2 * k16 + b (b = 0 or 1) of a fragment row r, with x = b ^ (r % 8)
// worked out once per lane: (2k + b) ^ (r % 8) = 2k ^ x, so each unrolled k16 step adds one of
// four lane offsets and a constant, instead of keeping one swizzled address per step live.
template <class T, int D>
__device__ __forceinline__ int frag_at(int r, int k16, int x) {
  return k16 / 4 * (Traits<T, D>::kTokens * 64) + r * 64 + ((2 * (k16 % 4)) ^ x) * 8;
}

// Shared-memory views of the merged segment result (valid after attend()).
template <class T, int D>
struct SegmentResult {
  float* o;    // [16][D], normalised O = acc / l
  float* lse;  // [16]
  __device__ explicit SegmentResult(char* area) {
    using Tr = Traits<T, D>;
    o = reinterpret_cast<float*>(area) + Tr::kWarps * Tr::kRows * D;
    lse = o + Tr::kRows * D + 2 * Tr::kWarps * Tr::kRows;
  }
};

// The token range of a segment clipped to the sequence, and (kMods, with a sliding window) to the
// chunk (on the cache's 64-token grid) that holds the lowest key a row sees, in chunks of one
// stage.
struct Segment {
  int lo, hi, len, chunks;
};
template <int kTokens, bool kMods = false>
__device__ __forceinline__ Segment make_segment(const DecodeParams& p, const DecodeTile& tile,
                                                int lo, int hi) {
  Segment sg;
  static_assert(kTokens == kDecodeChunkTokens, "a window starts on the chunk grid");
  sg.len = seq_keys(p, tile.seq);
  sg.lo = lo;
  if constexpr (kMods)
    if (p.window_left >= 0) sg.lo = max(lo, window_first_key(p, sg.len));
  sg.hi = min(hi, sg.len);
  sg.chunks = sg.hi > sg.lo ? (sg.hi - sg.lo + kTokens - 1) / kTokens : 0;
  return sg;
}

// cp.async loader: every thread copies the same 16-byte column chunk c of rows r0, r0 +
// kRowsPerPass, ... in every chunk of the ring, so its source pointers are set up once a segment
// and move by fixed strides: a copy is a 64-bit add, a compare and the cp.async (v10: recomputing
// the int64 offsets, the swizzle and the paged branch of every copy cost hdim 128 4-7%). Paged
// caches look the block table up once a chunk where each chunk lies in one page (page sizes that
// are multiples of 64 tokens), else once a copy (a shift for power-of-two page sizes). Copies past
// the segment's end read 0 bytes from the tensor's base address and write zeros.
template <class T, int D>
struct CopyCursor {
  static constexpr int kChunksPerRow = D / 8;
  static constexpr int kRowsPerPass = Traits<T, D>::kThreads / kChunksPerRow;
  static constexpr int kPasses = Traits<T, D>::kTokens / kRowsPerPass;
  const T *k, *v;  // chunk c of row r0 at the segment's first token (paged: of the KV head only)
  int left;        // tokens of the segment from row r0 on
  int base, x0;    // row r0's element offset in a stage tile; its swizzled chunk (c % 8) ^ (r0 % 8)
  int shift;       // paged: -2 when every chunk lies in one page, else log2(page size) or -1
  __device__ int r0() const { return base % (Traits<T, D>::kTokens * 64) / 64; }
  __device__ CopyCursor(const DecodeParams& p, const DecodeTile& tile, const Segment& sg) {
    const int r0 = threadIdx.x / kChunksPerRow, c = threadIdx.x % kChunksPerRow;
    x0 = (c % 8) ^ (r0 % 8);
    base = c / 8 * (Traits<T, D>::kTokens * 64) + r0 * 64;
    k = static_cast<const T*>(p.k) + tile.kv_head * p.k_sh + c * 8;
    v = static_cast<const T*>(p.v) + tile.kv_head * p.v_sh + c * 8;
    if (!p.block_table) {
      k += tile.seq * p.k_so + static_cast<int64_t>(sg.lo + r0) * p.k_st;
      v += tile.seq * p.v_so + static_cast<int64_t>(sg.lo + r0) * p.v_st;
      shift = 0;
    } else {
      const int ps = p.page_size, tk = Traits<T, D>::kTokens;
      shift = ps % tk == 0 && sg.lo % tk == 0 ? -2 : (ps & (ps - 1)) == 0 ? __ffs(ps) - 1 : -1;
    }
    left = sg.hi - sg.lo - r0;
  }
};

template <class T, int D>
__device__ void load_cp_async(const DecodeParams& p, const DecodeTile& tile, const Segment& sg,
                              const CopyCursor<T, D>& cur, int chunk, T* ks, uint64_t* full) {
  using Tr = Traits<T, D>;
  using Cu = CopyCursor<T, D>;
  const uint32_t kd = smem_addr(ks), vd = kd + Tr::kTileElems * sizeof(T);
  const int t0 = chunk * Tr::kTokens;
  const T* const k0 = static_cast<const T*>(p.k);
  const T* const v0 = static_cast<const T*>(p.v);
  auto copy = [&](int row, const T* kp, const T* vp, bool ok) {
    const uint32_t off = (cur.base + row * 64 + (cur.x0 ^ (row % 8)) * 8) * sizeof(T);
    cp_async_16(kd + off, ok ? kp : k0, ok);
    cp_async_16(vd + off, ok ? vp : v0, ok);
  };
  if (!p.block_table || cur.shift == -2) {  // the chunk's rows are r0 + row of one run of tokens
    const T *kp, *vp;
    if (!p.block_table) {
      kp = cur.k + t0 * p.k_st;
      vp = cur.v + t0 * p.v_st;
    } else {
      const int j0 = sg.lo + t0, page = j0 / p.page_size;
      const int64_t slot = p.block_table[tile.seq * p.bt_s0 + page * p.bt_s1];
      const int tok = j0 - page * p.page_size + cur.r0();
      kp = cur.k + slot * p.k_so + static_cast<int64_t>(tok) * p.k_st;
      vp = cur.v + slot * p.v_so + static_cast<int64_t>(tok) * p.v_st;
    }
#pragma unroll
    for (int pass = 0; pass < Cu::kPasses; ++pass) {
      const int row = pass * Cu::kRowsPerPass;  // past r0
      copy(row, kp, vp, t0 + row < cur.left);
      kp += Cu::kRowsPerPass * p.k_st;
      vp += Cu::kRowsPerPass * p.v_st;
    }
  } else {  // pages shorter than a chunk, or chunks across page ends: a lookup a copy
    const int r0 = cur.r0();
#pragma unroll
    for (int pass = 0; pass < Cu::kPasses; ++pass) {
      const int row = pass * Cu::kRowsPerPass;
      const bool ok = t0 + row < cur.left;
      const T *kp = k0, *vp = v0;
      if (ok) {
        const int j = sg.lo + t0 + r0 + row;
        const int page = cur.shift >= 0 ? j >> cur.shift : j / p.page_size;
        const int64_t slot = p.block_table[tile.seq * p.bt_s0 + page * p.bt_s1];
        const int64_t tok = j - page * p.page_size;
        kp = cur.k + slot * p.k_so + tok * p.k_st;
        vp = cur.v + slot * p.v_so + tok * p.v_st;
      }
      copy(row, kp, vp, ok);
    }
  }
  cp_async_mbar_arrive(full);
}

// TMA loader (one thread): the boxes of chunk `chunk` that start before the segment's end (one
// per page run when paged; pages past the end are never looked up), completing on `full`, their
// L2 lines marked evict-first when p.kv_evict_first. kL2Only: the same boxes prefetched into L2
// only (ks and full unused), for a chunk that a later call loads.
template <class T, int D, bool kL2Only = false>
__device__ void load_tma(const DecodeParams& p, const DecodeTile& tile, const Segment& sg,
                         int chunk, T* ks, uint64_t* full) {
  using Tr = Traits<T, D>;
  constexpr int kSlabs = D / 64;
  const int box = p.kv_box, base = sg.lo + chunk * Tr::kTokens;
  const int boxes = min(Tr::kTokens / box, (sg.hi - base + box - 1) / box);
  if constexpr (!kL2Only)
    mbar_arrive_expect_tx(full, static_cast<uint32_t>(boxes * 2 * kSlabs * box * 64 * sizeof(T)));
  T* vs = ks + Tr::kTileElems;
  const uint64_t policy = l2_kv_policy(p.kv_evict_first);
  for (int b = 0; b < boxes; ++b) {
    const int j = base + b * box;
    int outer = tile.seq, tok = j;
    if (p.block_table) {
      outer = p.block_table[tile.seq * p.bt_s0 + (j / p.page_size) * p.bt_s1];
      tok = j % p.page_size;
    }
#pragma unroll
    for (int s = 0; s < kSlabs; ++s) {
      const int off = s * Tr::kTokens * 64 + b * box * 64;
      if constexpr (kL2Only) {
        tma_prefetch_l2_4d(&p.k_map, s * 64, tile.kv_head, tok, outer);
        tma_prefetch_l2_4d(&p.v_map, s * 64, tile.kv_head, tok, outer);
      } else {
        tma_load_4d(ks + off, &p.k_map, full, s * 64, tile.kv_head, tok, outer, policy);
        tma_load_4d(vs + off, &p.v_map, full, s * 64, tile.kv_head, tok, outer, policy);
      }
    }
  }
}

// FLASHKIT_DECODE_L2_PREFETCH = n > 0 (TMA, hdim <= 128), thread 0: the first n chunks of a
// CTA's next segment into L2 while this one's result is written, so its ring restarts from L2.
template <class T, int D, bool kTma, bool kMods>
__device__ void prefetch_segment_start(const DecodeParams& p, const DecodeTile& tile, int lo,
                                       int hi) {
  if constexpr (kTma && D <= 128) {
    const Segment sg = make_segment<Traits<T, D>::kTokens, kMods>(p, tile, lo, hi);
    for (int c = 0; c < min(p.l2_prefetch, sg.chunks); ++c)
      load_tma<T, D, true>(p, tile, sg, c, nullptr, nullptr);
  }
}

// A row's reference max moves only when its max grows by more than 2^8: until then
// exp2(s - m) <= 256 cannot overflow fp32 sums or bf16/fp16 P, and O, l need no rescale (FA4's
// conditional rescaling), so most blocks cost no shuffles and no O multiplies.
constexpr float kRescaleLog2 = 8.f;

// Attend rows [row_block*16, +16) of `tile` to cache tokens [lo, hi) (clipped to the sequence's
// cache_seqlens and to each row's causal limit); leaves the result in SegmentResult. `area` is the
// ring (1024-byte aligned), Q follows it, `full` are the stages' barriers and `it`
// counts the CTA's chunks over all its segments (a stage's barrier phase).
template <class T, int D, bool kTma, bool kMods>
__device__ void attend(const DecodeParams& p, const DecodeTile& tile, int lo, int hi, char* area,
                       uint64_t* full, int& it) {
  using Tr = Traits<T, D>;
  constexpr int kStages = Tr::kStages;
  T* pipe = reinterpret_cast<T*>(area);
  T* qs = reinterpret_cast<T*>(area + Tr::kAreaBytes);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t4 = lane % 4;
  const int row0 = tile.row_block * Tr::kRows;
  const Segment sg = make_segment<Tr::kTokens, kMods>(p, tile, lo, hi);
  const CopyCursor<T, D> cur(p, tile, sg);  // the cp.async loader's

  auto issue = [&](int chunk) {  // chunk of this segment into ring position it + chunk
    T* ks = pipe + (it + chunk) % kStages * Tr::kStageElems;
    if constexpr (kTma) {
      if (tid == 0) {
        load_tma<T, D>(p, tile, sg, chunk, ks, full + (it + chunk) % kStages);
        // FLASHKIT_DECODE_L2_PREFETCH = n > 0: chunk + n of the segment into L2 now, so more of
        // the stream is in flight than the ring holds (an A/B knob; not at hdim 256, whose Lean
        // kernel is at the register limit).
        if constexpr (D <= 128)
          if (p.l2_prefetch > 0 && chunk + p.l2_prefetch < sg.chunks)
            load_tma<T, D, true>(p, tile, sg, chunk + p.l2_prefetch, nullptr, nullptr);
      }
    } else {
      load_cp_async<T, D>(p, tile, sg, cur, chunk, ks, full + (it + chunk) % kStages);
    }
  };
  // The previous segment's merge wrote this area (TMA: through the generic proxy).
  if constexpr (kTma) fence_proxy_async();
  __syncthreads();
  for (int s = 0; s < kStages - 1; ++s)
    if (s < sg.chunks) issue(s);
  // Q after the first K/V copies are in flight: its load latency hides behind theirs.
  for (int i = tid; i < Tr::kRows * D / 8; i += Tr::kThreads) {
    const int r = i / (D / 8), c = i % (D / 8) * 8, gr = row0 + r;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (gr < p.rows) {
      const int token = gr / p.group, head = tile.kv_head * p.group + gr % p.group;
      val = *reinterpret_cast<const uint4*>(static_cast<const T*>(p.q) + tile.seq * p.q_sb +
                                            token * p.q_st + head * p.q_sh + c);
    }
    *reinterpret_cast<uint4*>(qs + r * Tr::kQPitch + c) = val;
  }
  __syncthreads();
  // The A operand (rows x dims) of QK^T: matrices (rows 0-7 | 8-15) x (dims 0-7 | 8-15).
  const T* qrow = qs + (lane % 8 + (lane / 8) % 2 * 8) * Tr::kQPitch + lane / 16 * 8;
  uint32_t qa[Tr::kQInRegs ? D / 16 : 1][4];
  if constexpr (Tr::kQInRegs)
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) ldmatrix_x4(qa[kk], qrow + kk * 16);

  // Keys below limit[h] are visible to this thread's rows g and g + 8 (causal among q tokens),
  // with a sliding window from lower[h] on; rows past the tile's end have Q = 0 and are never
  // written: they see everything.
  int limit[2], lower[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int gr = row0 + g + 8 * h;
    limit[h] = gr < p.rows ? min(sg.hi, sg.len - p.q_len + gr / p.group + 1) : sg.hi;
    lower[h] = kMods && gr < p.rows && p.window_left >= 0
                   ? sg.len - p.q_len + gr / p.group - p.window_left
                   : INT_MIN;
  }
  const int all_visible = min(sg.hi, sg.len - p.q_len + 1);  // below it no row needs a mask
  // From it on no row needs the window's mask (the last query token's first key).
  const int window_clear = kMods && p.window_left >= 0 ? sg.len - 1 - p.window_left : INT_MIN;
  // Scores in the log2 domain: scale * q.k, or with a softcap softcap * tanh(q.k * softcap_in).
  const float c = (kMods && p.softcap_in != 0.f ? p.softcap : p.scale) * 1.4426950408889634f;
  // This lane's ldmatrix rows within a warp's 16-key block: K (keys x dims, non-transposed
  // 8x8 matrices (keys 0-7 | 8-15) x (dims 0-7 | 8-15)) and V (keys 0-15, dims 0-7 | 8-15).
  const int kr = lane / 16 * 8 + lane % 8, kbit = (lane / 8) % 2, vr = lane & 15, vb = lane >> 4;
  const int kx = kbit ^ (lane % 8), vx = vb ^ (lane % 8);
  float m[2] = {-INFINITY, -INFINITY}, neg_m[2] = {0.f, 0.f}, l[2] = {0.f, 0.f};
  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;

  for (int chunk = 0; chunk < sg.chunks; ++chunk) {
    const int stage = (it + chunk) % kStages;
    __syncthreads();  // everyone is done with the stage refilled next
    if (chunk + kStages - 1 < sg.chunks) issue(chunk + kStages - 1);
    mbar_wait(full + stage, (it + chunk) / kStages & 1);
    if (it + chunk == 0) FK_DECODE_TRACE_MARK(kTraceFirst);
    const int first = warp * 16;  // this warp's keys in the stage
    const int tok0 = sg.lo + chunk * Tr::kTokens + first;
    if (tok0 < sg.hi) {  // warp-uniform: else this warp's tokens are past the end
      const T* ks = pipe + stage * Tr::kStageElems;
      T* vs = pipe + stage * Tr::kStageElems + Tr::kTileElems;
      if constexpr (kTma) {
        if (tok0 + 16 > sg.hi) {  // boxes run past the end: zero those V rows (0 x NaN is NaN)
          for (int i = lane; i < 16 * D / 8; i += 32)
            if (tok0 + i / (D / 8) >= sg.hi)
              *reinterpret_cast<uint4*>(vs + chunk_at<T, D>(first + i / (D / 8), i % (D / 8))) =
                  make_uint4(0, 0, 0, 0);
          fence_proxy_async();  // before this stage's next TMA writes
          __syncwarp();
        }
      }
      float s[2][4] = {};
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t kb[4];  // tokens (0-7 | 8-15) x dims (0-7 | 8-15) of this kk
        ldmatrix_x4(kb, ks + frag_at<T, D>(first + kr, kk, kx));
        uint32_t a[4];
        if constexpr (Tr::kQInRegs) {
#pragma unroll
          for (int e = 0; e < 4; ++e) a[e] = qa[kk][e];
        } else {
          ldmatrix_x4(a, qrow + kk * 16);
        }
        mma_16816<T>(s[0], a, kb[0], kb[1]);
        mma_16816<T>(s[1], a, kb[2], kb[3]);
      }
      if constexpr (kMods) {
        if (p.softcap_in != 0.f) {  // uniform
#pragma unroll
          for (int nt = 0; nt < 2; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) s[nt][e] = tanh_fast(s[nt][e] * p.softcap_in);
        }
        // Warp-uniform: the segment's last block, causal rows, or the window's first blocks.
        if (tok0 + 16 > all_visible || tok0 < window_clear) {
#pragma unroll
          for (int nt = 0; nt < 2; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int tok = tok0 + nt * 8 + 2 * t4 + (e & 1);
              if (tok >= limit[e >> 1] || tok < lower[e >> 1]) s[nt][e] = -INFINITY;
            }
        }
      } else if (tok0 + 16 > all_visible) {  // warp-uniform: the segment's last block or causal rows
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (tok0 + nt * 8 + 2 * t4 + (e & 1) >= limit[e >> 1]) s[nt][e] = -INFINITY;
      }
      float mx[2] = {fmaxf(fmaxf(s[0][0], s[0][1]), fmaxf(s[1][0], s[1][1])),
                     fmaxf(fmaxf(s[0][2], s[0][3]), fmaxf(s[1][2], s[1][3]))};
      const bool grow = mx[0] * c > m[0] + kRescaleLog2 || mx[1] * c > m[1] + kRescaleLog2;
      if (__any_sync(0xffffffffu, grow)) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float r = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
          r = fmaxf(r, __shfl_xor_sync(0xffffffffu, r, 2));
          const float mn = fmaxf(m[h], r * c);
          const float alpha = m[h] == -INFINITY ? 0.f : fast_exp2(m[h] - mn);
          m[h] = mn;
          neg_m[h] = mn == -INFINITY ? 0.f : -mn;
          l[h] *= alpha;
#pragma unroll
          for (int n = 0; n < D / 8; ++n) {
            o[n][2 * h] *= alpha;
            o[n][2 * h + 1] *= alpha;
          }
        }
      }
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          s[nt][e] = fast_exp2(fmaf(s[nt][e], c, neg_m[e >> 1]));  // masked: exp2(-inf) = 0
          l[e >> 1] += s[nt][e];  // this thread's columns; the quad sums after the loop
        }
      // The S accumulators' layout is the A operand's: P goes to the second MMA from registers.
      const uint32_t pa[4] = {pack2<T>(s[0][0], s[0][1]), pack2<T>(s[0][2], s[0][3]),
                              pack2<T>(s[1][0], s[1][1]), pack2<T>(s[1][2], s[1][3])};
#pragma unroll
      for (int dn = 0; dn < D / 16; ++dn) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, vs + frag_at<T, D>(first + vr, dn, vx));
        mma_16816<T>(o[2 * dn], pa, b[0], b[1]);
        mma_16816<T>(o[2 * dn + 1], pa, b[2], b[3]);
      }
    }
  }
  it += sg.chunks;  // every chunk issued was waited for: no copy is still landing
  FK_DECODE_TRACE_MARK(kTraceLoopEnd);
  __syncthreads();  // the pipeline area becomes the merge area

  // Each warp's (m, l, O) for the 16 rows, then merge_stats over the warps (natural-log stats).
  constexpr float kLn2 = 0.6931471805599453f;
  float* wo = reinterpret_cast<float*>(area);                   // [warp][16][D]
  float* wm = wo + Tr::kWarps * Tr::kRows * D + Tr::kRows * D;  // after the result O
  float* wl = wm + Tr::kWarps * Tr::kRows;
  SegmentResult<T, D> res(area);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    if (t4 == 0) {
      wm[warp * Tr::kRows + g + 8 * h] = m[h] * kLn2;
      wl[warp * Tr::kRows + g + 8 * h] = l[h];
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
  const int n = min(Tr::kRows, p.rows - row0) * D;  // only rows that exist are ever read
  for (int i = tid; i < n; i += Tr::kThreads) {
    const int r = i / D;
    SoftmaxStat st{wm[r], wl[r]};
    float acc = wo[i];
#pragma unroll
    for (int w = 1; w < Tr::kWarps; ++w) {
      const MergeScales ms =
          merge_stats(st, SoftmaxStat{wm[w * Tr::kRows + r], wl[w * Tr::kRows + r]});
      acc = acc * ms.scale_a + wo[w * Tr::kRows * D + i] * ms.scale_b;
      st = ms.merged;
    }
    res.o[i] = st.l > 0.f ? acc / st.l : 0.f;
    if (i % D == 0) res.lse[r] = stat_lse(st);
  }
  __syncthreads();
}

}  // namespace flashkit::cuda::decoding
