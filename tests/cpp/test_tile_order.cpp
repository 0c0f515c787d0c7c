// The persistent attention kernels' tile order (src/cuda/attention/tile_order.h) on the CPU: for
// dense and causal problems, every CTA count, odd and even block counts, each tile is taken by
// exactly one CTA; in causal order every CTA's share of key blocks (cost r + 1 for query block r)
// is within one unit of the mean.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "cuda/attention/tile_order.h"

namespace {

using flashkit::cuda::attn::PersistentOrder;
using flashkit::cuda::attn::WorkTile;

struct Walk {
  std::multiset<std::tuple<int, int, int>> tiles;
  std::vector<long> cost;  // key blocks per CTA (causal: r + 1)
};

Walk walk(const PersistentOrder& o) {
  Walk w;
  for (int c = 0; c < o.num_ctas; ++c) {
    long cost = 0;
    for (WorkTile t = o.first(c, o.num_ctas); t.valid; t = o.next(t, c, o.num_ctas)) {
      w.tiles.insert({t.block, t.head, t.batch});
      cost += t.block + 1;
    }
    w.cost.push_back(cost);
  }
  return w;
}

TEST(TileOrder, EveryTileExactlyOnce) {
  for (bool reverse : {false, true})
    for (int nb : {1, 2, 3, 7, 11, 16, 43, 128})
      for (int heads : {1, 3, 16})
        for (int batch : {1, 2, 5})
          for (int ctas : {1, 4, 132}) {
            const PersistentOrder o = PersistentOrder::make(nb, heads, batch, reverse, ctas);
            const Walk w = walk(o);
            std::multiset<std::tuple<int, int, int>> want;
            for (int b = 0; b < batch; ++b)
              for (int h = 0; h < heads; ++h)
                for (int m = 0; m < nb; ++m) want.insert({m, h, b});
            EXPECT_EQ(w.tiles, want) << "reverse " << reverse << " nb " << nb << " heads " << heads
                                     << " batch " << batch << " ctas " << ctas;
          }
}

TEST(TileOrder, CausalSharesEqualWithinOneUnit) {
  // The FA2 protocol's causal shapes at 128-row (hdim 128) and 192-row (hdim 64) query blocks.
  for (auto [nb, heads, batch] : {std::tuple{16, 16, 8}, {32, 16, 4}, {64, 16, 2}, {128, 16, 1},
                                  {11, 32, 8}, {22, 32, 4}, {43, 32, 2}, {86, 32, 1}}) {
    const PersistentOrder o = PersistentOrder::make(nb, heads, batch, true, 132);
    const Walk w = walk(o);
    const auto [lo, hi] = std::minmax_element(w.cost.begin(), w.cost.end());
    // A unit costs nb + 1 (even nb) or nb (odd); CTAs differ by at most one unit.
    EXPECT_LE(*hi - *lo, nb + 1) << "nb " << nb;
    EXPECT_GT(*lo, 0);
  }
}

// The grouped order (the dynamic scheduler's): tiles 0 .. n-1 are every tile once; within a
// group of pairs, reverse (causal) hands out query blocks longest first, so a tile never costs
// more than the one before it in its group; a group's pairs are consecutive.
TEST(TileOrder, GroupedOrderEveryTileOnceLongestFirst) {
  using flashkit::cuda::attn::grouped_tile;
  for (bool reverse : {false, true})
    for (int nb : {1, 2, 7, 11, 16, 43})
      for (int heads : {1, 3, 16})
        for (int batch : {1, 2, 5})
          for (int group : {1, 2, 4, 7, 64}) {
            const int n = nb * heads * batch;
            std::multiset<std::tuple<int, int, int>> got, want;
            for (int b = 0; b < batch; ++b)
              for (int h = 0; h < heads; ++h)
                for (int m = 0; m < nb; ++m) want.insert({m, h, b});
            const std::string at = "reverse " + std::to_string(reverse) + " nb " +
                                   std::to_string(nb) + " heads " + std::to_string(heads) +
                                   " batch " + std::to_string(batch) + " group " +
                                   std::to_string(group);
            for (int t = 0; t < n; ++t) {
              const WorkTile w = grouped_tile(t, nb, heads, batch, reverse, group);
              ASSERT_TRUE(w.valid) << at;
              got.insert({w.block, w.head, w.batch});
              const int pair = w.batch * heads + w.head, g = t / (group * nb);
              EXPECT_EQ(pair / group, g) << at << " t " << t;  // the tile's pair is in its group
              if (t % (group * nb) > 0) {
                const WorkTile prev = grouped_tile(t - 1, nb, heads, batch, reverse, group);
                if (reverse) EXPECT_LE(w.block, prev.block) << at << " t " << t;
                else EXPECT_GE(w.block, prev.block) << at << " t " << t;
              }
            }
            EXPECT_EQ(got, want) << at;
          }
}

TEST(TileOrder, DenseQueryBlocksFastest) {
  const PersistentOrder o = PersistentOrder::make(8, 4, 2, false, 132);
  EXPECT_EQ(o.num_ctas, 64);  // never more CTAs than tiles
  const WorkTile t = o.first(9, o.num_ctas);
  EXPECT_EQ(t.block, 1);
  EXPECT_EQ(t.head, 1);
  EXPECT_EQ(t.batch, 0);
}

}  // namespace

// The schedulers' divider (FastDiv) against integer division: small divisors exhaustively over
// small dividends, and every divisor shape (powers of two and their neighbours, large ones)
// against dividends up to 2^31 - 1.
TEST(TileOrder, FastDivEqualsDivision) {
  using flashkit::cuda::attn::FastDiv;
  std::vector<int> divisors;
  for (int d = 1; d <= 300; ++d) divisors.push_back(d);
  for (int k = 1; k < 31; ++k)
    for (int e : {-1, 0, 1}) divisors.push_back((1 << k) + e);
  divisors.push_back(2147483647);
  std::vector<int> dividends;
  for (int n = 0; n < 5000; ++n) dividends.push_back(n);
  uint32_t x = 12345;
  for (int i = 0; i < 3000; ++i) {
    x = x * 1664525u + 1013904223u;
    dividends.push_back(int(x >> 1));
  }
  for (int k = 1; k < 31; ++k)
    for (int e : {-1, 0, 1}) dividends.push_back((1 << k) + e);
  dividends.push_back(2147483647);
  for (int d : divisors) {
    if (d <= 0) continue;
    const FastDiv f = FastDiv::make(d);
    for (int n : dividends) {
      if (n < 0) continue;
      const int q = f.div(n);
      ASSERT_EQ(q, n / d) << n << " / " << d;
      ASSERT_EQ(f.mod(n, q), n % d) << n << " % " << d;
    }
  }
}

// The dynamic scheduler's GroupedOrder (divisors made once) hands out grouped_tile's tiles.
TEST(TileOrder, GroupedOrderEqualsGroupedTile) {
  using flashkit::cuda::attn::grouped_tile;
  using flashkit::cuda::attn::GroupedOrder;
  for (bool reverse : {false, true})
    for (int nb : {1, 2, 7, 11, 16, 43, 128})
      for (int heads : {1, 3, 16, 40})
        for (int batch : {1, 2, 5})
          for (int group : {1, 2, 3, 4, 7, 64}) {
            const GroupedOrder g = GroupedOrder::make(nb, heads, batch, reverse, group);
            for (int t = 0; t < nb * heads * batch; ++t) {
              const WorkTile a = g.tile(t), b = grouped_tile(t, nb, heads, batch, reverse, group);
              ASSERT_TRUE(a.block == b.block && a.head == b.head && a.batch == b.batch &&
                          a.valid == b.valid && a.index == b.index)
                  << "t " << t << " nb " << nb << " heads " << heads << " batch " << batch
                  << " group " << group << " reverse " << reverse;
            }
          }
}
