// check_decode_plan (decode_plan_check.h): an independent walk over a plan that recomputes what
// each CTA covers and compares it with the plan's own bookkeeping.
#include "plan/decode_plan_check.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "api/validate.h"

namespace flashkit {

using detail::cat;

namespace {

std::string check_tiles(const DecodePlan& p) {
  const DecodeProblem& pr = p.problem;
  size_t expect = static_cast<size_t>(pr.batch) * pr.num_kv_heads * p.row_blocks;
  if (p.row_blocks * kDecodeRowsPerBlock < pr.rows() || (p.row_blocks - 1) * kDecodeRowsPerBlock >= pr.rows())
    return cat("row_blocks ", p.row_blocks, " do not tile ", pr.rows(), " rows");
  if (p.tiles.size() != expect) return cat("expected ", expect, " tiles, got ", p.tiles.size());
  int64_t next = 0;
  for (size_t i = 0; i < p.tiles.size(); ++i) {
    const DecodeTile& t = p.tiles[i];
    size_t id = (static_cast<size_t>(t.seq) * pr.num_kv_heads + t.kv_head) * p.row_blocks + t.row_block;
    if (id != i) return cat("tile ", i, " is (", t.seq, ", ", t.kv_head, ", ", t.row_block, "), out of order");
    int len = p.kv_lengths[t.seq];
    int want = std::max(1, (len + p.lean_tile - 1) / p.lean_tile);
    if (t.num_iters != want) return cat("tile ", i, " has ", t.num_iters, " LeanTiles, expected ", want);
    if (t.first_iter != next) return cat("tile ", i, " starts at iteration ", t.first_iter, ", expected ", next);
    next += t.num_iters;
  }
  if (next != p.total_iters) return cat("total_iters ", p.total_iters, ", tiles sum to ", next);
  return "";
}

std::string check_lean(const DecodePlan& p) {
  int64_t capacity = static_cast<int64_t>(p.device.sm_count) * p.device.ctas_per_sm;
  if (p.grid < 1 || p.grid > capacity)
    return cat("grid ", p.grid, " exceeds the ", capacity, " co-resident CTAs");
  if (static_cast<int>(p.ctas.size()) != p.grid) return cat(p.ctas.size(), " CTA ranges for grid ", p.grid);
  // Walk every CTA's segments and count, per (tile, LeanTile), how often it is covered.
  std::vector<std::vector<int>> covered(p.tiles.size());
  for (size_t i = 0; i < p.tiles.size(); ++i) covered[i].assign(p.tiles[i].num_iters, 0);
  std::vector<int> hosts(p.tiles.size(), 0), finishers(p.tiles.size(), 0);
  int min_load = INT32_MAX, max_load = 0, slot = 0;
  for (int c = 0; c < p.grid; ++c) {
    const LeanCta& cta = p.ctas[c];
    min_load = std::min(min_load, cta.end - cta.begin);
    max_load = std::max(max_load, cta.end - cta.begin);
    if (cta.end <= cta.begin) return cat("CTA ", c, " has no work");
    size_t t = 0;
    while (t < p.tiles.size() && p.tiles[t].first_iter + p.tiles[t].num_iters <= cta.begin) ++t;
    if (t == p.tiles.size() || static_cast<int>(t) != cta.first_tile)
      return cat("CTA ", c, " first_tile ", cta.first_tile, ", its first iteration is in tile ", t);
    bool starts_inside = cta.begin != p.tiles[t].first_iter;
    if (starts_inside != (cta.partial_slot >= 0))
      return cat("CTA ", c, (starts_inside ? " starts inside a tile but has no partial slot"
                                           : " starts a tile but has a partial slot"));
    if (starts_inside && cta.partial_slot != slot++)
      return cat("CTA ", c, " partial slot ", cta.partial_slot, " not the next free one");
    for (int it = cta.begin; it < cta.end; ++it) {
      if (t >= p.tiles.size()) return cat("CTA ", c, " runs past the last tile");
      const DecodeTile& tile = p.tiles[t];
      int k = it - tile.first_iter;
      ++covered[t][k];
      if (k == 0) {
        ++hosts[t];
        if (tile.host_cta != c) return cat("tile ", t, " starts in CTA ", c, ", host_cta says ", tile.host_cta);
      }
      if (k == tile.num_iters - 1) {
        ++finishers[t];
        if (tile.finishing_cta != c)
          return cat("tile ", t, " ends in CTA ", c, ", finishing_cta says ", tile.finishing_cta);
        ++t;
      }
    }
  }
  if (max_load - min_load > 1) return cat("CTA loads range from ", min_load, " to ", max_load, " LeanTiles");
  if (slot != p.num_partial_slots) return cat(slot, " partials, plan says ", p.num_partial_slots);
  for (size_t t = 0; t < p.tiles.size(); ++t) {
    for (int k = 0; k < p.tiles[t].num_iters; ++k)
      if (covered[t][k] != 1) return cat("tile ", t, " LeanTile ", k, " covered ", covered[t][k], " times");
    if (hosts[t] != 1 || finishers[t] != 1)
      return cat("tile ", t, " has ", hosts[t], " host and ", finishers[t], " finishing CTAs");
    const DecodeTile& tile = p.tiles[t];
    for (int c = tile.host_cta + 1; c <= tile.finishing_cta; ++c)
      if (p.ctas[c].partial_slot != tile.first_peer_slot + (c - tile.host_cta - 1))
        return cat("tile ", t, " peer CTA ", c, " writes slot ", p.ctas[c].partial_slot,
                   ", not first_peer_slot + ", c - tile.host_cta - 1);
    if (tile.finishing_cta == tile.host_cta && tile.first_peer_slot != -1)
      return cat("tile ", t, " has no peers but first_peer_slot ", tile.first_peer_slot);
  }
  return "";
}

std::string check_split(const DecodePlan& p) {
  int s = p.num_splits;
  if (s < 1) return cat("num_splits ", s);
  if (static_cast<int64_t>(p.grid) != static_cast<int64_t>(p.tiles.size()) * s)
    return cat("grid ", p.grid, " is not tiles x splits");
  if (p.splits.size() != static_cast<size_t>(p.problem.batch) * s)
    return cat(p.splits.size(), " splits, expected batch x ", s);
  if (p.num_partial_slots != p.grid) return cat("partial slots ", p.num_partial_slots, " != grid");
  for (int b = 0; b < p.problem.batch; ++b) {
    int pos = 0;
    for (int k = 0; k < s; ++k) {
      const KvSplit& sp = p.splits[static_cast<size_t>(b) * s + k];
      if (sp.begin != pos || sp.end < sp.begin)
        return cat("sequence ", b, " split ", k, " is [", sp.begin, ", ", sp.end, "), expected to start at ", pos);
      if (sp.end > sp.begin && sp.begin % p.lean_tile != 0)
        return cat("sequence ", b, " split ", k, " starts off a LeanTile boundary");
      pos = sp.end;
    }
    if (pos != p.kv_lengths[b]) return cat("sequence ", b, " splits cover ", pos, " of ", p.kv_lengths[b], " tokens");
  }
  for (size_t i = 0; i < p.tiles.size(); ++i)
    if (p.tiles[i].host_cta != static_cast<int>(i) * s || p.tiles[i].finishing_cta != p.tiles[i].host_cta)
      return cat("tile ", i, " host/finishing CTA not tile x splits");
  return "";
}

}  // namespace

std::string check_decode_plan(const DecodePlan& p) {
  if (p.kv_lengths.size() != static_cast<size_t>(p.problem.batch))
    return cat(p.kv_lengths.size(), " kv_lengths for batch ", p.problem.batch);
  if (p.lean_tile != lean_tile_tokens(p.problem.hdim)) return cat("lean_tile ", p.lean_tile);
  std::string e = check_tiles(p);
  if (!e.empty()) return e;
  switch (p.schedule) {
    case DecodeSchedule::automatic: return "schedule left unresolved (automatic)";
    case DecodeSchedule::single:
      if (p.grid != static_cast<int>(p.tiles.size())) return cat("single: grid ", p.grid, " != tiles");
      for (size_t i = 0; i < p.tiles.size(); ++i)
        if (p.tiles[i].host_cta != static_cast<int>(i) || p.tiles[i].finishing_cta != static_cast<int>(i))
          return cat("single: tile ", i, " not its own CTA");
      return "";
    case DecodeSchedule::split_kv:
    case DecodeSchedule::flash_decoding: return check_split(p);
    case DecodeSchedule::lean: return check_lean(p);
  }
  return "unknown schedule";
}

}  // namespace flashkit
