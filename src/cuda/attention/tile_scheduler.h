// Tile schedulers shared by the attention kernels (FA3-style interface: grid_shape,
// initial_work, next_work), so the persistent one (sm90 forward) replaces the one-tile-per-CTA
// one (sm80) without touching mainloops or epilogues.
#pragma once
#include <cuda_runtime.h>

namespace flashkit::cuda::attn {

struct WorkTile {
  int block, head, batch;
  bool valid;
  int index = 0;  // position in a persistent scheduler's tile order
};

// One CTA per (block, head, batch). With `reverse`, block indices run from the last one down:
// under a causal mask the last query blocks carry the most key tiles, so they start first and
// the short ones fill the tail of the wave.
struct SingleTileScheduler {
  struct Arguments {
    int num_blocks, heads, batch;
    bool reverse;
  };
  struct Params {
    int num_blocks, heads, batch;
    bool reverse;
  };
  static Params to_params(const Arguments& a) { return {a.num_blocks, a.heads, a.batch, a.reverse}; }
  static dim3 grid_shape(const Params& p) {
    return dim3(unsigned(p.num_blocks), unsigned(p.heads), unsigned(p.batch));
  }
  __device__ static WorkTile initial_work(const Params& p) {
    int blk = p.reverse ? p.num_blocks - 1 - int(blockIdx.x) : int(blockIdx.x);
    return {blk, int(blockIdx.y), int(blockIdx.z), true};
  }
  __device__ static WorkTile next_work(const Params&, const WorkTile&) { return {0, 0, 0, false}; }
};

// Persistent: one CTA per SM (at most one per tile), each striding through a fixed tile order,
// so every role of a warp-specialised CTA computes the same sequence without communicating.
// Dense (`reverse` off): query blocks vary fastest, so the CTAs of one wave share a head's K/V
// in L2. Causal (`reverse` on): longest first, i.e. the last query blocks (the most key tiles)
// of every head before any shorter one, so the short tiles fill the tail.
struct StaticPersistentScheduler {
  struct Arguments {
    int num_blocks, heads, batch;
    bool reverse;
    int num_ctas;  // the SM count
  };
  struct Params {
    int num_blocks, heads, batch, total;
    bool reverse;
    int num_ctas;
  };
  static Params to_params(const Arguments& a) {
    int total = a.num_blocks * a.heads * a.batch;
    return {a.num_blocks, a.heads, a.batch, total, a.reverse, total < a.num_ctas ? total : a.num_ctas};
  }
  static dim3 grid_shape(const Params& p) { return dim3(unsigned(p.num_ctas)); }
  __device__ static WorkTile tile(const Params& p, int t) {
    if (t >= p.total) return {0, 0, 0, false, t};
    if (p.reverse) {
      int hb = t % (p.heads * p.batch);
      return {p.num_blocks - 1 - t / (p.heads * p.batch), hb % p.heads, hb / p.heads, true, t};
    }
    int hb = t / p.num_blocks;
    return {t % p.num_blocks, hb % p.heads, hb / p.heads, true, t};
  }
  __device__ static WorkTile initial_work(const Params& p) { return tile(p, int(blockIdx.x)); }
  __device__ static WorkTile next_work(const Params& p, const WorkTile& w) {
    return tile(p, w.index + int(gridDim.x));
  }
};

}  // namespace flashkit::cuda::attn
