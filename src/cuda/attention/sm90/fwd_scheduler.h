// The Hopper forward's persistent tile scheduler: one CTA per SM, each taking tiles one after
// another, in one of two ways chosen per launch.
// - Fixed (PersistentOrder, tile_order.h): CTA c walks its own share of a fixed order; every
//   role computes the same sequence without communicating. Used where tiles cost the same
//   (dense) or where no counter is given.
// - Dynamic (FA3's dynamic persistent scheduler): CTAs draw the next tile from a global counter
//   in the grouped longest-first order (grouped_tile: L2-sized groups of (head, batch) pairs,
//   within a group the causal query blocks longest first), so a CTA that drew short tiles draws
//   more of them, and the last tiles of the launch are the shortest. One producer lane draws the
//   next tile's number while its tile's loads are issued and hands it to the consumer
//   warpgroups through a two-slot mailbox in shared memory (full / empty mbarriers per slot).
//   The counter (tile_counters.h: cleared on the stream just before the launch) ends at the
//   number of tiles: one draw per tile a CTA runs.
#pragma once
#include <cutlass/arch/barrier.h>

#include "cuda/attention/tile_order.h"

namespace flashkit::cuda::attn::sm90 {

struct FwdScheduler {
  struct Arguments {
    int num_blocks, heads, batch;
    bool reverse;      // causal: the last query blocks carry the most key blocks
    int num_ctas;      // the SM count
    unsigned* counter;  // dynamic when set (zero at launch), else the fixed order
    int group;         // dynamic: (head, batch) pairs per L2 group
  };
  struct Params {
    PersistentOrder fixed;
    GroupedOrder grouped;  // dynamic
    unsigned* counter;
    int tiles, ctas;  // dynamic: the grid is min(tiles, SMs)
  };
  struct SharedStorage {
    alignas(8) uint64_t full[2], empty[2];
    int tile[2];
  };
  using Barrier = cutlass::arch::ClusterBarrier;

  static Params to_params(const Arguments& a) {
    const PersistentOrder fixed =
        PersistentOrder::make(a.num_blocks, a.heads, a.batch, a.reverse, a.num_ctas);
    const int tiles = a.num_blocks * a.heads * a.batch, group = a.group < 1 ? 1 : a.group;
    const GroupedOrder grouped =
        GroupedOrder::make(a.num_blocks, a.heads, a.batch, a.reverse, group);
    const int ctas = a.counter ? (tiles < a.num_ctas ? tiles : a.num_ctas) : fixed.num_ctas;
    return {fixed, grouped, a.counter, tiles, ctas};
  }
  static dim3 grid_shape(const Params& p) { return dim3(unsigned(p.ctas)); }

  // One thread, before the block-wide barrier that publishes it.
  __device__ static void init(SharedStorage& s, int consumer_threads) {
    for (int i = 0; i < 2; ++i) {
      Barrier::init(&s.full[i], 1);
      Barrier::init(&s.empty[i], consumer_threads);
    }
  }
  __device__ static WorkTile dynamic_tile(const Params& p, int t) {
    if (t >= p.tiles) return {0, 0, 0, false, t};
    return p.grouped.tile(t);
  }
  __device__ static WorkTile initial_work(const Params& p) {
    if (p.counter) return dynamic_tile(p, int(blockIdx.x));
    return p.fixed.first(int(blockIdx.x), int(gridDim.x));
  }

  // Producer warp, as it starts its k-th tile (k = 0, 1, ...): the leader lane draws the number
  // of the tile after it (its latency hides behind the tile's loads).
  __device__ static unsigned request(const Params& p, bool leader) {
    return p.counter && leader ? atomicAdd(p.counter, 1u) : 0u;
  }
  // Producer warp, its k-th tile's loads issued: the next tile, published to the consumers.
  __device__ static WorkTile producer_next(const Params& p, SharedStorage& s, const WorkTile& w,
                                           unsigned ticket, int k, bool leader, int leader_lane) {
    if (!p.counter) return p.fixed.next(w, int(blockIdx.x), int(gridDim.x));
    int t = int(ticket) + int(gridDim.x);
    if (leader) {
      // Publication k + 1 goes to slot (k + 1) & 1, the slot's (k >> 1)-th use: wait until the
      // consumers have read its previous use (passes at once on the first).
      const int slot = (k + 1) & 1;
      Barrier::wait(&s.empty[slot], ((k >> 1) & 1) ^ 1);
      s.tile[slot] = t;
      Barrier::arrive(&s.full[slot]);  // release: the store above is seen by the waiters
    }
    t = __shfl_sync(0xffffffffu, t, leader_lane);
    return dynamic_tile(p, t);
  }
  // Every consumer thread, its k-th tile done: the next tile.
  __device__ static WorkTile consumer_next(const Params& p, SharedStorage& s, const WorkTile& w,
                                           int k) {
    if (!p.counter) return p.fixed.next(w, int(blockIdx.x), int(gridDim.x));
    const int slot = (k + 1) & 1;
    Barrier::wait(&s.full[slot], (k >> 1) & 1);
    const int t = s.tile[slot];
    Barrier::arrive(&s.empty[slot]);
    return dynamic_tile(p, t);
  }
};

}  // namespace flashkit::cuda::attn::sm90
