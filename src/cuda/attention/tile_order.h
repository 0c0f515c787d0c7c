// The attention kernels' tile orders (the grouped order of the one-tile-per-CTA and dynamic
// schedulers, the sm90 forward's fixed persistent order): pure index math, host and device, so
// the CPU tests can check that every CTA count and shape takes every tile exactly once and in
// equal shares (tests/cpp/test_tile_order.cpp).
#pragma once
#include "common/hd.h"

namespace flashkit::cuda::attn {

struct WorkTile {
  int block, head, batch;
  bool valid;
  int index = 0;  // position in a persistent scheduler's tile order
};

// Tile t of the grouped order: (head, batch) pairs in groups of `group`; within a group the block
// rank varies slowest, pairs fastest; `reverse` makes rank 0 the last block (the causal query
// blocks, longest first). tile_scheduler.h's SingleTileScheduler lays its CTAs out this way, and
// the sm90 forward's dynamic scheduler hands tiles out in this order (sm90/fwd_scheduler.h).
FK_HD WorkTile grouped_tile(int t, int num_blocks, int heads, int batch, bool reverse, int group) {
  const int pairs = heads * batch, per_group = group * num_blocks;
  const int first = t / per_group * group, in = t % per_group;
  const int size = pairs - first < group ? pairs - first : group;
  const int rank = in / size, pair = first + in % size;
  return {reverse ? num_blocks - 1 - rank : rank, pair % heads, pair / heads, true, t};
}

// Dense (`reverse` off): query blocks vary fastest, so the CTAs of one wave share a head's K/V
// in L2. Causal (`reverse` on, the query blocks' key ranges growing with the block): a work
// unit is two query blocks of one (head, batch) pair, ranks num_blocks-1-r and r (the long one
// first), whose causal costs (num_blocks - r and r + 1 key blocks) add up to the same
// num_blocks + 1 for every unit (an odd count: the last block alone, the rest paired as r and
// num_blocks-2-r); units are laid out pair by pair like the dense order. Every CTA thus gets an
// equal share, and the CTAs in flight read the K/V of a few pairs, which stay in L2. (v5's order,
// longest first over all pairs, started every pair's K/V stream at once: a short causal problem
// re-read K/V from DRAM for every query block; bench/NOTES-attention.md v6 / v7.) CTA c of n
// walks steps s = 0, 1, ... (reverse: two steps a unit); WorkTile::index is the step.
struct PersistentOrder {
  int num_blocks, heads, batch;
  bool reverse;
  int num_ctas, units;  // units: work items (tiles, or reverse's block pairs)

  static PersistentOrder make(int num_blocks, int heads, int batch, bool reverse, int ctas) {
    const int units = (reverse ? (num_blocks + 1) / 2 : num_blocks) * heads * batch;
    return {num_blocks, heads, batch, reverse, units < ctas ? units : ctas, units};
  }
  FK_HD WorkTile tile(int c, int n, int s) const {
    if (!reverse) {
      const int t = s * n + c;
      if (t >= units) return {0, 0, 0, false, s};
      const int hb = t / num_blocks;
      return {t % num_blocks, hb % heads, hb / heads, true, s};
    }
    const int u = (s >> 1) * n + c, per_pair = (num_blocks + 1) / 2;
    if (u >= units) return {0, 0, 0, false, s};
    const int pair = u / per_pair, k = u % per_pair;
    const int odd = num_blocks & 1, even = num_blocks - odd, r = k - odd;
    const int block = r < 0 ? num_blocks - 1 : (s & 1) ? r : even - 1 - r;
    return {block, pair % heads, pair / heads, true, s};
  }
  // Step s is the empty second half of an odd block count's single-block unit.
  FK_HD bool empty_half(int c, int n, int s) const {
    return reverse && (s & 1) && (num_blocks & 1) && ((s >> 1) * n + c) % ((num_blocks + 1) / 2) == 0;
  }
  FK_HD WorkTile first(int c, int n) const { return tile(c, n, 0); }
  FK_HD WorkTile next(const WorkTile& w, int c, int n) const {
    const int s = w.index + 1;
    return tile(c, n, empty_half(c, n, s) ? s + 1 : s);
  }
};

}  // namespace flashkit::cuda::attn
