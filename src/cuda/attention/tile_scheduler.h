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
// in L2. Causal (`reverse` on, the query blocks' key ranges growing with the block): a work
// unit is two query blocks of one (head, batch) pair, ranks num_blocks-1-r and r (the long one
// first), whose causal costs (num_blocks - r and r + 1 key blocks) add up to the same
// num_blocks + 1 for every unit (an odd count: the last block alone, the rest paired as r and
// num_blocks-2-r); units are laid out pair by pair like the dense order. Every CTA
// thus gets an equal share, and the CTAs in flight read the K/V of a few pairs, which stay in L2.
// (v5's order, longest first over all pairs, started every pair's K/V stream at once: a short
// causal problem re-read K/V from DRAM for every query block; bench/NOTES-attention.md v6.)
// WorkTile::index is the CTA's step in its own sequence.
struct StaticPersistentScheduler {
  struct Arguments {
    int num_blocks, heads, batch;
    bool reverse;
    int num_ctas;  // the SM count
  };
  struct Params {
    int num_blocks, heads, batch;
    bool reverse;
    int num_ctas, units;  // units: work items (tiles, or reverse's block pairs)
  };
  static Params to_params(const Arguments& a) {
    const int pairs = a.heads * a.batch;
    const int units = (a.reverse ? (a.num_blocks + 1) / 2 : a.num_blocks) * pairs;
    return {a.num_blocks, a.heads, a.batch, a.reverse, units < a.num_ctas ? units : a.num_ctas, units};
  }
  static dim3 grid_shape(const Params& p) { return dim3(unsigned(p.num_ctas)); }
  // Step s of this CTA (reverse: two steps a unit).
  __device__ static WorkTile tile(const Params& p, int s) {
    const int c = int(blockIdx.x), n = int(gridDim.x);
    if (!p.reverse) {
      const int t = s * n + c;
      if (t >= p.units) return {0, 0, 0, false, s};
      const int hb = t / p.num_blocks;
      return {t % p.num_blocks, hb % p.heads, hb / p.heads, true, s};
    }
    const int u = (s >> 1) * n + c, per_pair = (p.num_blocks + 1) / 2;
    if (u >= p.units) return {0, 0, 0, false, s};
    const int pair = u / per_pair, k = u % per_pair;
    // Odd count: unit 0 is the last block alone (cost num_blocks), the others pair r with
    // num_blocks-2-r (also num_blocks), so no unit is a half-size middle one.
    const int nb = p.num_blocks - (p.num_blocks & 1), r = k - (p.num_blocks & 1);
    const int block = r < 0 ? p.num_blocks - 1 : s & 1 ? r : nb - 1 - r;
    return {block, pair % p.heads, pair / p.heads, true, s};
  }
  // Step s is the empty second half of an odd block count's single-block unit.
  __device__ static bool empty_half(const Params& p, int s) {
    return p.reverse && (s & 1) && (p.num_blocks & 1) &&
           ((s >> 1) * int(gridDim.x) + int(blockIdx.x)) % ((p.num_blocks + 1) / 2) == 0;
  }
  __device__ static WorkTile initial_work(const Params& p) { return tile(p, 0); }
  __device__ static WorkTile next_work(const Params& p, const WorkTile& w) {
    const int s = w.index + 1;
    return tile(p, empty_half(p, s) ? s + 1 : s);
  }
};

// (head, batch) pairs per group whose working set of `bytes_per_pair` fits 32 MB of L2 (FA3's
// budget on the H100's 50 MB), at least 1.
inline int l2_pair_group(size_t bytes_per_pair) {
  constexpr size_t kBudget = size_t(32) << 20;
  return bytes_per_pair >= kBudget ? 1 : int(kBudget / (bytes_per_pair ? bytes_per_pair : 1));
}

}  // namespace flashkit::cuda::attn
