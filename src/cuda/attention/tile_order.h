// The attention kernels' tile orders (the grouped order of the one-tile-per-CTA and dynamic
// schedulers, the sm90 forward's fixed persistent order): pure index math, host and device, so
// the CPU tests can check that every CTA count and shape takes every tile exactly once and in
// equal shares (tests/cpp/test_tile_order.cpp).
#pragma once
#include <cstdint>

#include "common/hd.h"

namespace flashkit::cuda::attn {

// Division by a divisor fixed at launch (1 <= d < 2^31) for dividends in [0, 2^31): a multiply
// high, an add and a shift instead of the ~20 dependent instructions of an integer division by
// a register (Granlund and Montgomery's round-up method: l = ceil(log2 d), m = floor(2^32 (2^l -
// d) / d) + 1, q = (mulhi(m, n) + n) >> l). The sm90 forward's schedulers divide tile numbers by
// block and head counts once per tile, on the consumers' path between two tiles (session 23: ~600
// cycles of a tile's ~4k-cycle boundary; bench/NOTES-attention.md). Host-made, used on both sides.
struct FastDiv {
  int d = 1;
  uint32_t m = 1, l = 0;
  static FastDiv make(int d) {
    uint32_t l = 0;
    while ((uint64_t(1) << l) < uint64_t(d)) ++l;
    const uint64_t m = ((uint64_t(1) << 32) * ((uint64_t(1) << l) - uint64_t(d))) / uint64_t(d) + 1;
    return {d, uint32_t(m), l};
  }
  FK_HD int div(int n) const {
#if defined(__CUDA_ARCH__)
    const uint32_t hi = __umulhi(m, uint32_t(n));
#else
    const uint32_t hi = uint32_t((uint64_t(m) * uint32_t(n)) >> 32);
#endif
    return int((uint64_t(hi) + uint32_t(n)) >> l);
  }
  FK_HD int mod(int n, int q) const { return n - q * d; }  // q = div(n)
};

struct WorkTile {
  int block, head, batch;
  bool valid;
  int index = 0;  // position in a persistent scheduler's tile order
};

// Division by a register, FastDiv's interface: the one-tile-per-CTA schedulers divide once per
// CTA and keep the plain instruction sequence (no divisor setup on the device).
struct PlainDiv {
  int d;
  FK_HD int div(int n) const { return n / d; }
  FK_HD int mod(int n, int q) const { return n - q * d; }  // q = div(n)
};

// Tile t of the grouped order: (head, batch) pairs in groups of `group`; within a group the block
// rank varies slowest, pairs fastest; `reverse` makes rank 0 the last block (the causal query
// blocks, longest first). tile_scheduler.h's SingleTileScheduler lays its CTAs out this way, and
// the sm90 forward's dynamic scheduler hands tiles out in this order (sm90/fwd_scheduler.h). The
// order's arithmetic, written once over a divider D: by group * num_blocks, by the size of the
// group that starts at pair `first` (size_of(first): the last group may hold fewer pairs) and by
// heads.
template <class D, class SizeOf>
FK_HD WorkTile grouped_tile_by(int t, int num_blocks, int group, bool reverse, const D& per_group,
                               const SizeOf& size_of, const D& heads) {
  const int gi = per_group.div(t), in = per_group.mod(t, gi), first = gi * group;
  const D size = size_of(first);
  const int rank = size.div(in), pair = first + size.mod(in, rank);
  const int b = heads.div(pair);
  return {reverse ? num_blocks - 1 - rank : rank, heads.mod(pair, b), b, true, t};
}

FK_HD WorkTile grouped_tile(int t, int num_blocks, int heads, int batch, bool reverse, int group) {
  const int pairs = heads * batch;
  const auto size_of = [&](int first) {
    return PlainDiv{pairs - first < group ? pairs - first : group};
  };
  return grouped_tile_by(t, num_blocks, group, reverse, PlainDiv{group * num_blocks}, size_of,
                         PlainDiv{heads});
}

// grouped_tile with the launch's divisors made once (the sm90 forward's dynamic scheduler: one
// tile number a tile, from the counter).
struct GroupedOrder {
  int num_blocks, pairs, heads, group;
  bool reverse;
  FastDiv div_per_group, div_group, div_last, div_heads;  // div_last: the last group's size
  static GroupedOrder make(int num_blocks, int heads, int batch, bool reverse, int group) {
    const int pairs = heads * batch, last = pairs % group == 0 ? group : pairs % group;
    GroupedOrder g{};
    g.num_blocks = num_blocks, g.pairs = pairs, g.heads = heads, g.group = group;
    g.reverse = reverse;
    g.div_per_group = FastDiv::make(group * num_blocks);
    g.div_group = FastDiv::make(group);
    g.div_last = FastDiv::make(last);
    g.div_heads = FastDiv::make(heads);
    return g;
  }
  FK_HD WorkTile tile(int t) const {
    const auto size_of = [&](int first) { return pairs - first < group ? div_last : div_group; };
    return grouped_tile_by(t, num_blocks, group, reverse, div_per_group, size_of, div_heads);
  }
};

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
  FastDiv div_blocks, div_heads, div_pair;  // by num_blocks, heads, (num_blocks + 1) / 2

  static PersistentOrder make(int num_blocks, int heads, int batch, bool reverse, int ctas) {
    const int units = (reverse ? (num_blocks + 1) / 2 : num_blocks) * heads * batch;
    PersistentOrder o{};
    o.num_blocks = num_blocks, o.heads = heads, o.batch = batch, o.reverse = reverse;
    o.num_ctas = units < ctas ? units : ctas, o.units = units;
    o.div_blocks = FastDiv::make(num_blocks);
    o.div_heads = FastDiv::make(heads);
    o.div_pair = FastDiv::make((num_blocks + 1) / 2);
    return o;
  }
  FK_HD WorkTile tile(int c, int n, int s) const {
    if (!reverse) {
      const int t = s * n + c;
      if (t >= units) return {0, 0, 0, false, s};
      const int hb = div_blocks.div(t), b = div_heads.div(hb);
      return {div_blocks.mod(t, hb), div_heads.mod(hb, b), b, true, s};
    }
    const int u = (s >> 1) * n + c;
    if (u >= units) return {0, 0, 0, false, s};
    const int pair = div_pair.div(u), k = div_pair.mod(u, pair);
    const int odd = num_blocks & 1, even = num_blocks - odd, r = k - odd;
    const int block = r < 0 ? num_blocks - 1 : (s & 1) ? r : even - 1 - r;
    const int b = div_heads.div(pair);
    return {block, div_heads.mod(pair, b), b, true, s};
  }
  // Step s is the empty second half of an odd block count's single-block unit.
  FK_HD bool empty_half(int c, int n, int s) const {
    if (!(reverse && (s & 1) && (num_blocks & 1))) return false;
    const int u = (s >> 1) * n + c;
    return div_pair.mod(u, div_pair.div(u)) == 0;
  }
  FK_HD WorkTile first(int c, int n) const { return tile(c, n, 0); }
  FK_HD WorkTile next(const WorkTile& w, int c, int n) const {
    const int s = w.index + 1;
    return tile(c, n, empty_half(c, n, s) ? s + 1 : s);
  }
};

}  // namespace flashkit::cuda::attn
