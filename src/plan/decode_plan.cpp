// make_decode_plan (include/flashkit/plan.h): host-side scheduling for `decode`. Called once per
// batch shape by the user (or the CLI/tests); the CPU and CUDA backends both execute the result.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "api/validate.h"
#include "flashkit/plan.h"

namespace flashkit {

using detail::fail;

const char* schedule_name(DecodeSchedule s) {
  switch (s) {
    case DecodeSchedule::automatic: return "auto";
    case DecodeSchedule::single: return "single";
    case DecodeSchedule::split_kv: return "split_kv";
    case DecodeSchedule::flash_decoding: return "flash_decoding";
    case DecodeSchedule::lean: return "lean";
  }
  return "?";
}

DecodeSchedule parse_schedule(const std::string& name, const char* what) {
  if (name == "auto" || name == "automatic") return DecodeSchedule::automatic;
  if (name == "single") return DecodeSchedule::single;
  if (name == "split_kv" || name == "split") return DecodeSchedule::split_kv;
  if (name == "flash_decoding") return DecodeSchedule::flash_decoding;
  if (name == "lean") return DecodeSchedule::lean;
  fail(what, ": expected auto, single, split_kv, flash_decoding or lean, got '", name, "'");
}

namespace {

void check_problem(const DecodeProblem& p, const std::vector<int>& kv_lengths, DeviceInfo dev) {
  if (p.batch < 1) fail("problem.batch: expected >= 1, got ", p.batch);
  if (p.q_len < 1 || p.q_len > 16) fail("problem.q_len: expected 1..16, got ", p.q_len);
  if (p.num_kv_heads < 1) fail("problem.num_kv_heads: expected >= 1, got ", p.num_kv_heads);
  if (p.num_q_heads < 1 || p.num_q_heads % p.num_kv_heads != 0)
    fail("problem.num_q_heads: expected a positive multiple of num_kv_heads (", p.num_kv_heads,
         "), got ", p.num_q_heads);
  if (p.hdim < 8 || p.hdim > 256 || p.hdim % 8 != 0)
    fail("problem.hdim: expected a multiple of 8 in 8..256, got ", p.hdim);
  if (p.dtype != DType::f32 && p.dtype != DType::f16 && p.dtype != DType::bf16)
    fail("problem.dtype: expected float32, float16 or bfloat16, got ", dtype_name(p.dtype));
  if (p.paged && p.page_size < 1)
    fail("problem.page_size: expected >= 1 for a paged cache, got ", p.page_size);
  if (p.window_left < -1)
    fail("problem.window_left: expected -1 (none) or a number of keys >= 0, got ", p.window_left);
  if (static_cast<int64_t>(kv_lengths.size()) != p.batch)
    fail("kv_lengths: expected ", p.batch, " lengths (one per sequence), got ", kv_lengths.size());
  for (size_t b = 0; b < kv_lengths.size(); ++b)
    if (kv_lengths[b] < 0) fail("kv_lengths: expected lengths >= 0, got ", kv_lengths[b],
                                " for sequence ", b);
  if (dev.sm_count < 1) fail("dev.sm_count: expected >= 1, got ", dev.sm_count);
  if (dev.ctas_per_sm < 1) fail("dev.ctas_per_sm: expected >= 1, got ", dev.ctas_per_sm);
}

// FlashAttention-2's split heuristic: the fewest splits whose wave efficiency (work / launched
// waves) is within 85% of the best, so short sequences are not cut into useless slivers.
int choose_num_splits(int64_t tiles, int capacity, int max_splits) {
  if (tiles >= capacity * 8 / 10 || max_splits <= 1) return 1;
  auto eff = [&](int s) {
    double waves = static_cast<double>(tiles) * s / capacity;
    return waves / std::ceil(waves);
  };
  double best = 0;
  for (int s = 1; s <= max_splits; ++s) best = std::max(best, eff(s));
  for (int s = 1; s <= max_splits; ++s)
    if (eff(s) >= 0.85 * best) return s;
  return 1;
}

// split_kv's splits (flash_decoding always keeps FA2's rule above: it is the FlashDecoding
// baseline). Where the kernel fits more than two CTAs a SM (hdim 64's 2 x 16 KB ring: four), one
// wave of two CTAs a SM (splits = 2 SMs / tiles, at least 1; cuDNN's decode grid): on an H200 at
// hdim 64 that was 3-6% faster than FA2's rule over the four a SM (b1 h56 64k 234 vs 250 us, 16 h
// 512k 492 vs 514, 8k 42.0 vs 43.3; bench/NOTES-decode.md, session 18); at hdim 128 (two a SM)
// FA2's rule stays (its one-wave split measured 4% slower in v6). FLASHKIT_DECODE_SPLIT_RULE (an
// A/B knob read at every plan): `fa2` or `wave` (one wave of the co-resident CTAs) force a rule.
int split_kv_splits(int64_t tiles, const DeviceInfo& dev, int max_splits) {
  const char* e = std::getenv("FLASHKIT_DECODE_SPLIT_RULE");
  const std::string rule = e ? e : "";
  const int64_t capacity = static_cast<int64_t>(dev.sm_count) * dev.ctas_per_sm;
  auto wave = [&](int64_t cap) {
    return static_cast<int>(std::clamp<int64_t>(cap / tiles, 1, std::max(1, max_splits)));
  };
  if (rule == "wave") return wave(capacity);
  if (rule != "fa2" && dev.ctas_per_sm > 2) return wave(int64_t{dev.sm_count} * 2);
  return choose_num_splits(tiles, static_cast<int>(std::min<int64_t>(capacity, INT32_MAX)),
                           max_splits);
}

// Which CTA holds iteration `it` when `total` iterations are dealt to `grid` CTAs, the first
// `rem` of them getting one more than the rest.
int cta_of(int64_t it, int64_t base, int64_t rem) {
  int64_t big = rem * (base + 1);
  return static_cast<int>(it < big ? it / (base + 1) : rem + (it - big) / base);
}

}  // namespace

DecodePlan make_decode_plan(const DecodeProblem& problem, const std::vector<int>& kv_lengths,
                            DeviceInfo dev, DecodeSchedule schedule) {
  check_problem(problem, kv_lengths, dev);
  DecodePlan plan;
  plan.problem = problem;
  plan.requested = schedule;
  plan.device = dev;
  plan.kv_lengths = kv_lengths;
  plan.lean_tile = lean_tile_tokens(problem.hdim);
  plan.row_blocks = (problem.rows() + kDecodeRowsPerBlock - 1) / kDecodeRowsPerBlock;
  const int lt = plan.lean_tile;
  const int64_t capacity = static_cast<int64_t>(dev.sm_count) * dev.ctas_per_sm;

  int64_t total = 0;
  int max_iters = 1;
  for (int b = 0; b < problem.batch; ++b) {
    int n = std::max(1, (kv_lengths[b] + lt - 1) / lt);
    max_iters = std::max(max_iters, n);
    for (int h = 0; h < problem.num_kv_heads; ++h)
      for (int r = 0; r < plan.row_blocks; ++r) {
        DecodeTile t;
        t.seq = b;
        t.kv_head = h;
        t.row_block = r;
        t.first_iter = static_cast<int>(std::min<int64_t>(total, INT32_MAX));
        t.num_iters = n;
        plan.tiles.push_back(t);
        total += n;
      }
  }
  if (total > INT32_MAX)
    fail("kv_lengths: ", total, " LeanTiles in all exceed the 2^31 the plan indexes");
  plan.total_iters = static_cast<int>(total);
  const int64_t num_tiles = static_cast<int64_t>(plan.tiles.size());
  if (num_tiles * max_iters > INT32_MAX)
    fail("problem: batch x kv heads x row blocks x splits exceeds 2^31 CTAs");

  if (schedule == DecodeSchedule::automatic) {
    // Every tile a single LeanTile: nothing to split. Otherwise Lean wherever split-KV's CTAs
    // need two or more waves and those waves are less than 80% full (FA2's rule keeps one split
    // once the tiles fill 80% of a wave, e.g. 272 tiles on 264 slots: a second wave of 8 CTAs,
    // each streaming a whole head alone); there Lean's equal shares were 1.06-1.20x faster (H100
    // and H200, bench/NOTES-decode.md). One partial wave is no tail: its CTAs all run at once.
    // Elsewhere, from the H200 sweeps: Lean at hdim 65-128, where it was level or up to 12% faster,
    // split-KV at hdim <= 64 (Lean 2-15% slower: two pipeline restarts and a host reduce a CTA) and
    // at hdim 256 (not measured).
    const int64_t split_grid =
        num_tiles * split_kv_splits(num_tiles, dev, std::min(max_iters, 128));
    const int64_t waves = (split_grid + capacity - 1) / capacity;  // capacity >= 1 (checked)
    const bool ragged_wave = waves >= 2 && split_grid * 10 < waves * capacity * 8;
    const bool lean_wins = ragged_wave || (problem.hdim > 64 && problem.hdim <= 128);
    // A sliding window: split-KV, whose splits share the window's keys (schedulers.h).
    schedule = max_iters == 1                         ? DecodeSchedule::single
               : lean_wins && problem.window_left < 0 ? DecodeSchedule::lean
                                                      : DecodeSchedule::split_kv;
  }
  plan.schedule = schedule;

  if (schedule == DecodeSchedule::single) {
    plan.grid = static_cast<int>(num_tiles);
    for (int64_t i = 0; i < num_tiles; ++i)
      plan.tiles[i].host_cta = plan.tiles[i].finishing_cta = static_cast<int>(i);
  } else if (is_split_kv(schedule)) {
    const int max_splits = std::min(max_iters, 128);
    const int p =
        schedule == DecodeSchedule::split_kv
            ? split_kv_splits(num_tiles, dev, max_splits)
            : choose_num_splits(num_tiles, static_cast<int>(std::min<int64_t>(capacity, INT32_MAX)),
                                max_splits);
    plan.num_splits = p;
    plan.grid = static_cast<int>(num_tiles * p);
    plan.num_partial_slots = plan.grid;
    for (int64_t i = 0; i < num_tiles; ++i)
      plan.tiles[i].host_cta = plan.tiles[i].finishing_cta = static_cast<int>(i * p);
    for (int b = 0; b < problem.batch; ++b) {
      int len = kv_lengths[b];
      int per = ((len + lt - 1) / lt + p - 1) / p * lt;  // whole LeanTiles per split
      for (int s = 0; s < p; ++s) {
        int64_t lo = std::min<int64_t>(static_cast<int64_t>(s) * per, len);
        int64_t hi = std::min<int64_t>(static_cast<int64_t>(s + 1) * per, len);
        plan.splits.push_back(KvSplit{static_cast<int>(lo), static_cast<int>(hi)});
      }
    }
  } else {  // lean
    int64_t grid = std::min<int64_t>(capacity, total);
    int64_t base = total / grid, rem = total % grid;
    plan.grid = static_cast<int>(grid);
    plan.ctas.resize(grid);
    size_t t = 0;
    int slot = 0;
    for (int c = 0; c < grid; ++c) {
      LeanCta& cta = plan.ctas[c];
      cta.begin = static_cast<int>(c * base + std::min<int64_t>(c, rem));
      cta.end = static_cast<int>(cta.begin + base + (c < rem ? 1 : 0));
      while (plan.tiles[t].first_iter + plan.tiles[t].num_iters <= cta.begin) ++t;
      cta.first_tile = static_cast<int>(t);
      // A CTA that starts inside a tile is that tile's peer: its first segment is a partial.
      if (cta.begin != plan.tiles[t].first_iter) cta.partial_slot = slot++;
    }
    plan.num_partial_slots = slot;
    for (DecodeTile& tile : plan.tiles) {
      tile.host_cta = cta_of(tile.first_iter, base, rem);
      tile.finishing_cta = cta_of(static_cast<int64_t>(tile.first_iter) + tile.num_iters - 1, base, rem);
      if (tile.finishing_cta > tile.host_cta)
        tile.first_peer_slot = plan.ctas[tile.host_cta + 1].partial_slot;
    }
  }
  return plan;
}

bool decode_prefers_cp_async(const DecodePlan& plan) {
  const DecodeProblem& p = plan.problem;
  if (p.paged) return p.hdim < 256 || p.page_size >= 64;
  if (p.hdim >= 128) return true;
  const double tokens_per_cta =
      static_cast<double>(plan.total_iters) * plan.lean_tile / std::max(1, plan.grid);
  return tokens_per_cta >= 4096;
}

// snprintf rather than iostreams: the Python extension was seen to crash in an ostream locale
// facet when loaded next to torch on the GPU machine (bench/NOTES-decode.md).
std::string DecodePlan::describe() const {
  char buf[256];
  int n = std::snprintf(buf, sizeof buf, "%s: grid %d (%d SMs x %d), %zu tiles, %d LeanTiles of %d",
                        schedule_name(schedule), grid, device.sm_count, device.ctas_per_sm, tiles.size(),
                        total_iters, lean_tile);
  std::string r(buf, std::min<size_t>(n, sizeof buf - 1));
  if (is_split_kv(schedule)) {
    std::snprintf(buf, sizeof buf, ", %d splits per sequence", num_splits);
    r += buf;
  }
  if (problem.window_left >= 0) {
    std::snprintf(buf, sizeof buf, ", window %d", problem.window_left);
    r += buf;
  }
  if (schedule == DecodeSchedule::lean && grid > 0) {
    const int lo = total_iters / grid, hi = lo + (total_iters % grid ? 1 : 0);
    if (hi > lo) std::snprintf(buf, sizeof buf, ", %d-%d per CTA, %d partials", lo, hi, num_partial_slots);
    else std::snprintf(buf, sizeof buf, ", %d per CTA, %d partials", lo, num_partial_slots);
    r += buf;
  }
  return r;
}

}  // namespace flashkit
