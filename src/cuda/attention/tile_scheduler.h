// Tile schedulers shared by the attention kernels (FA3-style interface: grid_shape,
// initial_work, next_work), so the persistent one (sm90 forward) replaces the one-tile-per-CTA
// one (sm80) without touching mainloops or epilogues.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "common/env_knob.h"
#include "cuda/attention/tile_order.h"

namespace flashkit::cuda::attn {

// One CTA per (block, head, batch) on a 1-D grid. (head, batch) pairs come in groups of `group`;
// within a group the block rank varies slowest, so with group > 1 every pair's rank-0 block starts
// before any pair's rank-1 block: with masks whose work falls with the rank (longest first, LPT),
// the short tiles fill the tail of the last wave. `reverse` makes rank 0 the last block (the
// forward's causal query blocks). group = 1 is the plain order, blocks fastest; the launchers size
// groups so the tiles in flight share their K/V (forward) or Q/dO/dQ (backward) through L2.
struct SingleTileScheduler {
  struct Arguments {
    int num_blocks, heads, batch;
    bool reverse;
    int group;
  };
  struct Params {
    int num_blocks, heads, batch;
    bool reverse;
    int group;
  };
  static Params to_params(const Arguments& a) {
    return {a.num_blocks, a.heads, a.batch, a.reverse, a.group < 1 ? 1 : a.group};
  }
  static dim3 grid_shape(const Params& p) { return dim3(unsigned(p.num_blocks * p.heads * p.batch)); }
  __device__ static WorkTile initial_work(const Params& p) {
    return grouped_tile(int(blockIdx.x), p.num_blocks, p.heads, p.batch, p.reverse, p.group);
  }
  __device__ static WorkTile next_work(const Params&, const WorkTile&) { return {0, 0, 0, false}; }
};

// (head, batch) pairs per group whose working set of `bytes_per_pair` fits `budget_mb` of L2
// (32 MB: FA3's budget on the H100's 50 MB), at least 1. FLASHKIT_L2_GROUP_MB (an A/B knob, read
// per launch) replaces the budget.
inline int l2_pair_group(size_t bytes_per_pair, int budget_mb = 32) {
  if (const int env = flashkit::detail::env_int("FLASHKIT_L2_GROUP_MB", 0); env > 0)
    budget_mb = env;
  const size_t budget = size_t(budget_mb) << 20;
  return bytes_per_pair >= budget ? 1 : int(budget / (bytes_per_pair ? bytes_per_pair : 1));
}

}  // namespace flashkit::cuda::attn
