// The three decode schedules as tile schedulers of one kernel (kernel.h): each hands a CTA its
// segments (a tile and a token range) and says what to do with the result. They differ only here.
//   Single:  CTA i = tile i, the whole cache, written directly.
//   SplitKv: CTA i = split i % P of tile i / P (FlashDecoding; split-major, split i / tiles of
//            tile i % tiles, with p.split_major), a partial that the tile's last split to finish
//            folds, or (flash_decoding) a second kernel folds (P = 1: written directly).
//   Lean:    CTA i walks LeanTiles [begin, end) in stream-K order (LeanAttention); a segment that
//            starts inside a tile is a peer's partial, one that starts a tile is its host's.
#pragma once
#include <algorithm>

#include "cuda/decode/params.h"

namespace flashkit::cuda::decoding {

enum class Role : int {
  direct,         // the whole tile: write O and LSE
  split_partial,  // split-KV: write (O, lse) to o_parts / lse_parts; the last split (or the
                  // flash_decoding merge launch) reduces
  lean_partial,   // Lean peer: write to its slot, raise its flag
  lean_host,      // Lean host that is not the finishing CTA: wait for peers, reduce, write
};

struct Work {
  int tile = 0;
  int lo = 0, hi = 0;  // token range
  Role role = Role::direct;
  int slot = 0;        // split index (split_partial) or partial slot (lean_partial)
  int next_iter = 0;   // Lean: where this CTA's next segment starts
  bool valid = false;
};

// (seq, kv_head, row_block) of tile i from the plan's tile order, without a global load: the
// loads that need the sequence (its lengths; right after an L2 flush a DRAM round trip each) do
// not wait for a tile record. Single and split-KV CTAs need no other tile field.
__device__ __forceinline__ DecodeTile tile_at(const DecodeParams& p, int i) {
  DecodeTile t;
  t.seq = i / (p.num_kv_heads * p.row_blocks);
  t.kv_head = i / p.row_blocks % p.num_kv_heads;
  t.row_block = i % p.row_blocks;
  return t;
}

struct SingleScheduler {
  __device__ DecodeTile tile(const DecodeParams& p, int i) const { return tile_at(p, i); }
  __device__ Work first(const DecodeParams& p) const {
    Work w;
    w.tile = blockIdx.x;
    w.hi = p.kv_lengths[tile_at(p, w.tile).seq];
    w.valid = true;
    return w;
  }
  __device__ Work next(const DecodeParams&, const Work&) const { return Work{}; }
};

struct SplitKvScheduler {
  __device__ DecodeTile tile(const DecodeParams& p, int i) const { return tile_at(p, i); }
  __device__ Work first(const DecodeParams& p) const {
    Work w;
    const int tiles = p.grid / p.num_splits;
    w.tile = p.split_major ? blockIdx.x % tiles : blockIdx.x / p.num_splits;
    w.slot = p.split_major ? blockIdx.x / tiles : blockIdx.x % p.num_splits;
    const KvSplit s = p.splits[tile_at(p, w.tile).seq * p.num_splits + w.slot];
    w.lo = s.begin;
    w.hi = s.end;
    w.role = p.num_splits > 1 ? Role::split_partial : Role::direct;
    w.valid = true;
    return w;
  }
  __device__ Work next(const DecodeParams&, const Work&) const { return Work{}; }
};

// A sliding window (the modifier kernels, p.window_left >= 0): a split CTA takes its part of the
// keys the window can reach, [window_first_key, len), cut into num_splits parts of whole chunks,
// instead of its plan range of the whole cache (most of which would end at once).
__device__ __forceinline__ void window_split(const DecodeParams& p, Work& w) {
  const int len = seq_keys(p, tile_at(p, w.tile).seq);
  constexpr int kChunk = kDecodeChunkTokens;
  const int origin = window_first_key(p, len);
  const int per = (len - origin + kChunk * p.num_splits - 1) / (kChunk * p.num_splits) * kChunk;
  w.lo = origin + w.slot * per;
  w.hi = min(w.lo + per, len);
}

struct LeanScheduler {
  // The stream-K fields from the plan; (seq, kv_head, row_block) from the index, so the loads that
  // need the sequence (its lengths) do not wait for this one.
  __device__ DecodeTile tile(const DecodeParams& p, int i) const {
    DecodeTile t = p.tiles[i];
    const DecodeTile a = tile_at(p, i);
    t.seq = a.seq, t.kv_head = a.kv_head, t.row_block = a.row_block;
    return t;
  }
  __device__ Work segment(const DecodeParams& p, int it, int tile) const {
    const LeanCta cta = p.ctas[blockIdx.x];
    Work w;
    if (it >= cta.end) return w;
    const DecodeTile t = this->tile(p, tile);
    const int stop = min(cta.end, t.first_iter + t.num_iters);
    w.tile = tile;
    w.lo = (it - t.first_iter) * p.lean_tile;
    w.hi = min(p.kv_lengths[t.seq], (stop - t.first_iter) * p.lean_tile);
    w.next_iter = stop;
    if (it != t.first_iter) {
      w.role = Role::lean_partial;  // only ever this CTA's first segment
      w.slot = cta.partial_slot;
    } else {
      w.role = stop == t.first_iter + t.num_iters ? Role::direct : Role::lean_host;
    }
    w.valid = true;
    return w;
  }
  __device__ Work first(const DecodeParams& p) const {
    const LeanCta cta = p.ctas[blockIdx.x];
    return segment(p, cta.begin, cta.first_tile);
  }
  __device__ Work next(const DecodeParams& p, const Work& w) const {
    return segment(p, w.next_iter, w.tile + 1);
  }
};

}  // namespace flashkit::cuda::decoding
