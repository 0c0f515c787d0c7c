// DecodeParams: what the decode kernels read, built once per call on the host by dispatch.cu from
// the validated tensors, the plan's device copy and the workspace. Strides are in elements.
#pragma once
#include <cuda.h>

#include <cstdint>

#include "flashkit/plan.h"

namespace flashkit::cuda::decoding {

constexpr int kDecodeChunkTokens = 64;  // keys a ring stage holds (attend.h's Traits::kTokens)

struct DecodeParams {
  // sm_90 loads (tensor_maps.h): K and V caches as rank-4 tensor maps [outer, token, head, dim],
  // boxes of kv_box tokens x 64 dims. kv_box 0: the maps are unset and the cp.async path runs.
  CUtensorMap k_map, v_map;
  int kv_box;
  int kv_evict_first;  // TMA boxes' L2 policy: 1 evict-first (K/V read by one CTA), 0 normal
  int l2_prefetch;     // > 0: with chunk c's boxes, chunk c + l2_prefetch is prefetched into L2
  const void* q;
  int64_t q_sb, q_st, q_sh;  // batch, token, head
  const void* k;
  const void* v;
  int64_t k_so, k_st, k_sh;  // batch-or-page, token, head
  int64_t v_so, v_st, v_sh;
  const int32_t* block_table;  // null: dense
  int64_t bt_s0, bt_s1;
  int page_size;
  const int32_t* seqlens;
  int64_t seqlens_s;
  void* out;
  int64_t o_sb, o_st, o_sh;
  float* lse;
  int64_t l_sb, l_sh, l_st;  // [batch, head, token]
  float scale;               // natural-log domain, like the CPU backend's SoftmaxStat
  int q_len, group, rows, num_q_heads, batch, lean_tile;
  int num_kv_heads, row_blocks;  // tile i = (seq, kv_head, row_block) in that order (plan.h)

  // The plan's device copy (plan.h types are plain ints).
  const DecodeTile* tiles;
  const LeanCta* ctas;
  const KvSplit* splits;
  const int* kv_lengths;
  int num_splits;
  // Split CTAs (num_splits > 1): 1 (split_kv) counts in and the tile's last split merges; 0
  // (flash_decoding) leaves the partials to the merge_states launch that follows.
  int merge_in_kernel;
  // Split CTA order: 0, CTA = tile * P + split (FlashDecoding/FA2's grid: a tile's splits side by
  // side); 1 (split_kv with FLASHKIT_DECODE_SPLIT_ORDER=1), CTA = split * tiles + tile, so the
  // CTAs running together read the same token range of every KV head.
  int split_major;
  int grid;
  // Synchronisation words owned by the plan's device copy (zeroed once at upload). Lean: one flag
  // per CTA, the launch epoch and the arrival counter that advances it. Split-KV: flags[tile]
  // counts the tile's finished splits; the last one resets it to 0.
  unsigned* flags;
  unsigned* epoch;
  unsigned* arrived;

  // Workspace partials: Lean [slot][16 rows][hdim] + lse [slot][16]; split-KV o_parts
  // [P, batch, q_len, heads, hdim] + lse_parts [P, batch, q_len, heads] (merge_states' layout).
  float* part_o;
  float* part_lse;

  // Score modifiers, read by the modifier kernels only (kernel.h's kMods; last, so the plain
  // kernels' parameter offsets stay as they were).
  float softcap, softcap_in;  // softcap_in = scale / softcap; 0: no softcap
  int window_left;            // -1: no sliding window
};

#ifdef __CUDACC__
// Keys in sequence `seq`'s cache: its cache_seqlens entry, clipped to the plan's length.
__device__ __forceinline__ int seq_keys(const DecodeParams& p, int seq) {
  return max(0, min(p.seqlens[seq * p.seqlens_s], p.kv_lengths[seq]));
}
// With a sliding window (p.window_left >= 0): the first key a decode of `len` keys reads, the
// start of the chunk that holds the first query token's first visible key.
__device__ __forceinline__ int window_first_key(const DecodeParams& p, int len) {
  return max(len - p.q_len - p.window_left, 0) / kDecodeChunkTokens * kDecodeChunkTokens;
}
#endif

}  // namespace flashkit::cuda::decoding
