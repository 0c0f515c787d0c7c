// Tile schedulers shared by the attention kernels (FA3-style interface: grid_shape,
// initial_work, next_work), so the persistent one (sm90 forward) replaces the one-tile-per-CTA
// one (sm80) without touching mainloops or epilogues.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

namespace flashkit::cuda::attn {

struct WorkTile {
  int block, head, batch;
  bool valid;
  int index = 0;  // position in a persistent scheduler's tile order
};

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
    const int pairs = p.heads * p.batch, idx = int(blockIdx.x);
    const int per_group = p.group * p.num_blocks;
    const int first = idx / per_group * p.group, in = idx % per_group;
    const int size = min(p.group, pairs - first);
    const int rank = in / size, pair = first + in % size;
    return {p.reverse ? p.num_blocks - 1 - rank : rank, pair % p.heads, pair / p.heads, true};
  }
  __device__ static WorkTile next_work(const Params&, const WorkTile&) { return {0, 0, 0, false}; }
};

// Persistent: one CTA per SM (at most one per tile), each striding through a fixed tile order,
// so every role of a warp-specialised CTA computes the same sequence without communicating.
// Dense (`reverse` off): query blocks vary fastest, so the CTAs of one wave share a head's K/V
// in L2. Causal (`reverse` on): longest first within groups of `group` (head, batch) pairs (the
// last query blocks, with the most key tiles, of the group's pairs before any shorter one), so
// the CTAs in flight read the K/V of a few pairs, which stay in L2; over all pairs at once
// (group = every pair, the order before v6) a short causal problem re-reads K/V from DRAM for
// every query block. CTAs take the order's waves alternately forward and backward (a snake), so
// the CTA with the longest tile of one wave gets the shortest of the next.
struct StaticPersistentScheduler {
  struct Arguments {
    int num_blocks, heads, batch;
    bool reverse;
    int num_ctas;   // the SM count
    int group = 0;  // causal: pairs per group (<= 0: all pairs)
    bool snake = true;
  };
  struct Params {
    int num_blocks, heads, batch, total;
    bool reverse;
    int num_ctas, group;
    bool snake;
  };
  static Params to_params(const Arguments& a) {
    const int total = a.num_blocks * a.heads * a.batch, pairs = a.heads * a.batch;
    const int group = a.group <= 0 || a.group > pairs ? pairs : a.group;
    return {a.num_blocks, a.heads, a.batch, total, a.reverse,
            total < a.num_ctas ? total : a.num_ctas, group, a.snake && a.reverse};
  }
  static dim3 grid_shape(const Params& p) { return dim3(unsigned(p.num_ctas)); }
  __device__ static WorkTile tile(const Params& p, int t) {
    if (t >= p.total) return {0, 0, 0, false, t};
    if (p.reverse) {
      const int pairs = p.heads * p.batch, per_group = p.group * p.num_blocks;
      const int first = t / per_group * p.group, in = t % per_group;
      const int size = min(p.group, pairs - first);
      const int rank = in / size, pair = first + in % size;
      return {p.num_blocks - 1 - rank, pair % p.heads, pair / p.heads, true, t};
    }
    int hb = t / p.num_blocks;
    return {t % p.num_blocks, hb % p.heads, hb / p.heads, true, t};
  }
  // This CTA's tile of wave k.
  __device__ static int order(const Params& p, int k) {
    const int c = int(blockIdx.x), n = int(gridDim.x);
    return k * n + (p.snake && (k & 1) ? n - 1 - c : c);
  }
  __device__ static WorkTile initial_work(const Params& p) { return tile(p, order(p, 0)); }
  __device__ static WorkTile next_work(const Params& p, const WorkTile& w) {
    return tile(p, order(p, w.index / int(gridDim.x) + 1));
  }
};

// (head, batch) pairs per group whose working set of `bytes_per_pair` fits 32 MB of L2 (FA3's
// budget on the H100's 50 MB), at least 1.
inline int l2_pair_group(size_t bytes_per_pair) {
  constexpr size_t kBudget = size_t(32) << 20;
  return bytes_per_pair >= kBudget ? 1 : int(kBudget / (bytes_per_pair ? bytes_per_pair : 1));
}

}  // namespace flashkit::cuda::attn
