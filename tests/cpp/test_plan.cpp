// DecodePlan properties over many random problems (make_decode_plan + check_decode_plan), an
// independent re-derivation of the Lean invariants, and proof that the checker catches breakage.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <random>

#include "flashkit/errors.h"
#include "flashkit/plan.h"
#include "plan/decode_plan_check.h"

using namespace flashkit;

namespace {

struct Case {
  DecodeProblem problem;
  std::vector<int> lengths;
  DeviceInfo dev;
};

Case random_case(std::mt19937_64& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Case c;
  DecodeProblem& p = c.problem;
  p.batch = pick(1, 64);
  p.q_len = pick(0, 3) == 0 ? pick(1, 16) : 1;
  p.num_kv_heads = std::vector<int>{1, 2, 4, 8, 16, 32}[pick(0, 5)];
  p.num_q_heads = p.num_kv_heads * std::vector<int>{1, 2, 4, 8, 16}[pick(0, 4)];
  p.hdim = std::vector<int>{64, 128, 256, 96}[pick(0, 3)];
  p.paged = pick(0, 1);
  p.page_size = p.paged ? std::vector<int>{1, 16, 64, 256}[pick(0, 3)] : 0;
  const int mode = pick(0, 3);
  for (int b = 0; b < p.batch; ++b) {
    int len;
    switch (mode) {
      case 0: len = pick(1, 4); break;                                 // tiny, incl. 1
      case 1: len = pick(0, 20) == 0 ? pick(100000, 1 << 20) : pick(1, 3000); break;  // ragged + huge
      case 2: len = 4096; break;                                       // uniform
      default: len = pick(0, 70000);                                   // incl. empty sequences
    }
    c.lengths.push_back(len);
  }
  // Keep the test fast: cap the LeanTiles of very large random problems.
  int64_t iters = 0;
  for (int l : c.lengths) iters += std::max(1, (l + 63) / 64);
  while (iters * p.num_kv_heads * ((p.rows() + 15) / 16) > 3'000'000 && p.num_kv_heads > 1)
    p.num_kv_heads /= 2, p.num_q_heads /= 2;
  c.dev = DeviceInfo{pick(1, 132), pick(1, 4)};
  return c;
}

}  // namespace

TEST(DecodePlan, InvariantsHoldOnRandomProblems) {
  std::mt19937_64 rng(2026);
  for (int i = 0; i < 400; ++i) {
    Case c = random_case(rng);
    for (DecodeSchedule s : {DecodeSchedule::single, DecodeSchedule::split_kv, DecodeSchedule::flash_decoding,
                             DecodeSchedule::lean, DecodeSchedule::automatic}) {
      DecodePlan plan = make_decode_plan(c.problem, c.lengths, c.dev, s);
      ASSERT_EQ(check_decode_plan(plan), "") << "case " << i << " " << plan.describe();
      ASSERT_NE(plan.schedule, DecodeSchedule::automatic);
    }
  }
}

// The Lean properties asked by the issue, derived here from the CTA ranges alone (not trusting
// the plan's tile bookkeeping): exact cover, load balance, co-residency, one host and one
// finishing CTA per tile, and at most one partial per non-host CTA.
TEST(DecodePlan, LeanStreamKProperties) {
  std::mt19937_64 rng(99);
  for (int i = 0; i < 300; ++i) {
    Case c = random_case(rng);
    DecodePlan plan = make_decode_plan(c.problem, c.lengths, c.dev, DecodeSchedule::lean);
    ASSERT_LE(plan.grid, c.dev.sm_count * c.dev.ctas_per_sm);
    int64_t want = 0;
    std::vector<int64_t> tile_start;
    for (int b = 0; b < c.problem.batch; ++b)
      for (int t = 0; t < c.problem.num_kv_heads * plan.row_blocks; ++t) {
        tile_start.push_back(want);
        want += std::max(1, (c.lengths[b] + plan.lean_tile - 1) / plan.lean_tile);
      }
    tile_start.push_back(want);
    ASSERT_EQ(plan.total_iters, want);
    std::vector<int> cover(want, 0);
    int lo = INT32_MAX, hi = 0;
    for (const LeanCta& cta : plan.ctas) {
      for (int it = cta.begin; it < cta.end; ++it) ++cover[it];
      lo = std::min(lo, cta.end - cta.begin);
      hi = std::max(hi, cta.end - cta.begin);
    }
    ASSERT_LE(hi - lo, 1);
    ASSERT_TRUE(std::all_of(cover.begin(), cover.end(), [](int n) { return n == 1; }));
    for (size_t t = 0; t + 1 < tile_start.size(); ++t) {
      int hosts = 0, finishers = 0;
      for (int ci = 0; ci < plan.grid; ++ci) {
        const LeanCta& cta = plan.ctas[ci];
        if (cta.begin <= tile_start[t] && tile_start[t] < cta.end) {
          ++hosts;
          ASSERT_EQ(plan.tiles[t].host_cta, ci);
        }
        if (cta.begin < tile_start[t + 1] && tile_start[t + 1] <= cta.end) {
          ++finishers;
          ASSERT_EQ(plan.tiles[t].finishing_cta, ci);
        }
      }
      ASSERT_EQ(hosts, 1);
      ASSERT_EQ(finishers, 1);
    }
    int partials = 0;
    for (const LeanCta& cta : plan.ctas)
      partials += std::find(tile_start.begin(), tile_start.end(), cta.begin) == tile_start.end();
    ASSERT_EQ(partials, plan.num_partial_slots);
  }
}

TEST(DecodePlan, SplitKvCoversEachSequence) {
  DecodeProblem p{.batch = 3, .q_len = 1, .num_q_heads = 8, .num_kv_heads = 2, .hdim = 128};
  DecodePlan plan = make_decode_plan(p, {1000, 1, 0}, DeviceInfo{132, 1}, DecodeSchedule::split_kv);
  ASSERT_GT(plan.num_splits, 1);
  EXPECT_EQ(check_decode_plan(plan), "");
  int covered = 0;
  for (int s = 0; s < plan.num_splits; ++s) covered += plan.splits[s].end - plan.splits[s].begin;
  EXPECT_EQ(covered, 1000);
  EXPECT_EQ(plan.splits[plan.num_splits].end - plan.splits[plan.num_splits].begin, 1);  // seq 1
}

// FlashDecoding (separate merge kernel) and split-KV (merge in the kernel) are one plan: the same
// FA2-rule split count, splits, grid and partial layout; only the requested/resolved name differs.
TEST(DecodePlan, FlashDecodingSharesSplitKvPlan) {
  if (std::getenv("FLASHKIT_DECODE_SPLIT_RULE")) GTEST_SKIP() << "split_kv's A/B split rule is set";
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200; ++i) {
    Case c = random_case(rng);
    const DecodePlan a = make_decode_plan(c.problem, c.lengths, c.dev, DecodeSchedule::split_kv);
    const DecodePlan b = make_decode_plan(c.problem, c.lengths, c.dev, DecodeSchedule::flash_decoding);
    ASSERT_EQ(b.schedule, DecodeSchedule::flash_decoding);
    if (c.dev.ctas_per_sm > 2) {  // split_kv: one wave of two CTAs a SM (FA2's rule in b)
      int64_t tiles = static_cast<int64_t>(a.tiles.size()), iters = 1;
      for (int l : c.lengths) iters = std::max<int64_t>(iters, (l + a.lean_tile - 1) / a.lean_tile);
      const int64_t want =
          std::clamp<int64_t>(2 * c.dev.sm_count / tiles, 1, std::min<int64_t>(iters, 128));
      ASSERT_EQ(a.num_splits, want) << i;
      ASSERT_EQ(check_decode_plan(a), "") << i;
      continue;
    }
    ASSERT_EQ(a.num_splits, b.num_splits) << i;
    ASSERT_EQ(a.grid, b.grid) << i;
    ASSERT_EQ(a.num_partial_slots, b.num_partial_slots) << i;
    ASSERT_EQ(a.splits.size(), b.splits.size()) << i;
    for (size_t k = 0; k < a.splits.size(); ++k)
      ASSERT_TRUE(a.splits[k].begin == b.splits[k].begin && a.splits[k].end == b.splits[k].end) << i;
  }
  EXPECT_EQ(parse_schedule("flash_decoding"), DecodeSchedule::flash_decoding);
  EXPECT_STREQ(schedule_name(DecodeSchedule::flash_decoding), "flash_decoding");
  EXPECT_TRUE(is_split_kv(DecodeSchedule::flash_decoding) && is_split_kv(DecodeSchedule::split_kv));
  EXPECT_FALSE(is_split_kv(DecodeSchedule::lean) || is_split_kv(DecodeSchedule::single));
}

TEST(DecodePlan, LeanTileWidthPerHdim) {
  EXPECT_EQ(lean_tile_tokens(64), 256);
  EXPECT_EQ(lean_tile_tokens(128), 128);
  EXPECT_EQ(lean_tile_tokens(256), 64);
}

// The checker must be able to fail: break each invariant and see it named.
TEST(DecodePlan, CheckerCatchesBrokenPlans) {
  DecodeProblem p{.batch = 5, .q_len = 2, .num_q_heads = 16, .num_kv_heads = 4, .hdim = 128};
  const DecodePlan good = make_decode_plan(p, {700, 5000, 1, 130, 2600}, DeviceInfo{7, 2}, DecodeSchedule::lean);
  ASSERT_EQ(check_decode_plan(good), "");
  ASSERT_GT(good.num_partial_slots, 0);
  DecodePlan bad = good;
  bad.ctas[2].end += 1;  // overlaps CTA 3
  EXPECT_NE(check_decode_plan(bad), "");
  bad = good;
  bad.tiles[3].host_cta += 1;
  EXPECT_NE(check_decode_plan(bad), "");
  bad = good;
  bad.tiles[3].finishing_cta = bad.grid - 1;
  EXPECT_NE(check_decode_plan(bad), "");
  bad = good;
  bad.device.ctas_per_sm = 1;  // grid no longer co-resident
  EXPECT_NE(check_decode_plan(bad), "");
  bad = good;
  std::swap(bad.ctas[0].end, bad.ctas[1].end);  // uneven loads
  bad.ctas[1].begin = bad.ctas[0].end;
  EXPECT_NE(check_decode_plan(bad), "");
  DecodePlan split = make_decode_plan(p, {700, 5000, 1, 130, 2600}, DeviceInfo{132, 1}, DecodeSchedule::split_kv);
  ASSERT_EQ(check_decode_plan(split), "");
  split.splits[1].end -= 1;
  EXPECT_NE(check_decode_plan(split), "");
  DecodePlan fd = make_decode_plan(p, {700, 5000, 1, 130, 2600}, DeviceInfo{132, 1}, DecodeSchedule::flash_decoding);
  ASSERT_EQ(check_decode_plan(fd), "");
  fd.grid += 1;
  EXPECT_NE(check_decode_plan(fd), "");
}

TEST(DecodePlan, AutoPicksTheMeasuredFastestSchedule) {
  // The H200 measurements in bench/NOTES-decode.md (v4, runs B-C): single when every tile is one
  // LeanTile; else Lean at hdim 65-128, split-KV at hdim <= 64 and 256.
  DecodeProblem p{.batch = 64, .q_len = 1, .num_q_heads = 32, .num_kv_heads = 8, .hdim = 128};
  EXPECT_EQ(make_decode_plan(p, std::vector<int>(64, 100), {132, 1}).schedule, DecodeSchedule::single);
  EXPECT_EQ(make_decode_plan(p, std::vector<int>(64, 4096), {132, 1}).schedule, DecodeSchedule::lean);
  p.batch = 1;
  EXPECT_EQ(make_decode_plan(p, {65536}, {132, 1}).schedule, DecodeSchedule::lean);
  for (int d : {64, 256}) {
    p.hdim = d;
    EXPECT_EQ(make_decode_plan(p, {65536}, {132, 1}).schedule, DecodeSchedule::split_kv) << d;
  }
}

TEST(DecodePlan, ErrorsNameTheArgument) {
  DecodeProblem p{.batch = 2, .q_len = 1, .num_q_heads = 8, .num_kv_heads = 3, .hdim = 64};
  auto msg = [&](const DecodeProblem& pr, std::vector<int> l, DeviceInfo d) {
    try {
      make_decode_plan(pr, l, d);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(msg(p, {1, 2}, {1, 1}).rfind("problem.num_q_heads:", 0), 0u);
  p.num_kv_heads = 2;
  EXPECT_EQ(msg(p, {1}, {1, 1}).rfind("kv_lengths:", 0), 0u);
  EXPECT_EQ(msg(p, {1, -3}, {1, 1}).rfind("kv_lengths:", 0), 0u);
  EXPECT_EQ(msg(p, {1, 2}, {0, 1}).rfind("dev.sm_count:", 0), 0u);
  p.q_len = 17;
  EXPECT_EQ(msg(p, {1, 2}, {1, 1}).rfind("problem.q_len:", 0), 0u);
  p.q_len = 1;
  p.hdim = 100;
  EXPECT_EQ(msg(p, {1, 2}, {1, 1}).rfind("problem.hdim:", 0), 0u);
  p.hdim = 64;
  p.window_left = -2;
  EXPECT_EQ(msg(p, {1, 2}, {1, 1}).rfind("problem.window_left:", 0), 0u);
  p.window_left = -1;
  p.paged = true;
  EXPECT_EQ(msg(p, {1, 2}, {1, 1}).rfind("problem.page_size:", 0), 0u);
  EXPECT_THROW(parse_schedule("fast"), Error);
}

// A plan for a sliding window: `auto` picks split-KV where it would pick Lean (whose CTAs keep
// their ranges of the whole cache), and single stays single.
TEST(DecodePlan, AutoWithAWindowPlansSplitKv) {
  const DeviceInfo h200{132, 2};
  DecodeProblem p{.batch = 1, .q_len = 1, .num_q_heads = 32, .num_kv_heads = 32, .hdim = 128};
  EXPECT_EQ(make_decode_plan(p, {131072}, h200).schedule, DecodeSchedule::lean);
  p.window_left = 4096;
  const DecodePlan plan = make_decode_plan(p, {131072}, h200);
  EXPECT_EQ(plan.schedule, DecodeSchedule::split_kv);
  EXPECT_NE(plan.describe().find("window 4096"), std::string::npos) << plan.describe();
  EXPECT_EQ(make_decode_plan(p, {100}, h200).schedule, DecodeSchedule::single);
  EXPECT_EQ(make_decode_plan(p, {131072}, h200, DecodeSchedule::lean).schedule,
            DecodeSchedule::lean);
}

// `auto`: Lean where FlashDecoding's rule leaves a ragged last wave (272 tiles on 264 slots keep
// one split: a second wave of 8 CTAs), split-KV at hdim 64 where its waves are full (the 8k
// anchor: 4 splits, 224 CTAs), Lean at hdim 128, single when no tile has two LeanTiles.
TEST(DecodePlan, AutoPicksLeanForARaggedLastWave) {
  const DeviceInfo h200{132, 2};
  auto pick = [&](int batch, int heads, int hdim, int len) {
    DecodeProblem p;
    p.batch = batch, p.q_len = 1, p.num_q_heads = p.num_kv_heads = heads, p.hdim = hdim;
    return make_decode_plan(p, std::vector<int>(batch, len), h200, DecodeSchedule::automatic)
        .schedule;
  };
  EXPECT_EQ(pick(17, 16, 64, 32768), DecodeSchedule::lean);
  EXPECT_EQ(pick(1, 56, 64, 8192), DecodeSchedule::split_kv);
  EXPECT_EQ(pick(1, 56, 64, 65536), DecodeSchedule::split_kv);
  EXPECT_EQ(pick(9, 32, 128, 16384), DecodeSchedule::lean);
  EXPECT_EQ(pick(1, 56, 128, 65536), DecodeSchedule::lean);
  EXPECT_EQ(pick(4, 8, 64, 200), DecodeSchedule::single);
  // hdim 64's kernel fits four CTAs a SM: split-KV's one wave of two a SM (56 x 4 = 224 CTAs;
  // 272 tiles x 1) is a single partial wave, no tail, so split-KV stays.
  const DeviceInfo four{132, 4};
  DecodeProblem p;
  p.batch = 1, p.q_len = 1, p.num_q_heads = p.num_kv_heads = 56, p.hdim = 64;
  EXPECT_EQ(make_decode_plan(p, {8192}, four, DecodeSchedule::automatic).schedule,
            DecodeSchedule::split_kv);
  p.batch = 17, p.num_q_heads = p.num_kv_heads = 16;
  EXPECT_EQ(
      make_decode_plan(p, std::vector<int>(17, 32768), four, DecodeSchedule::automatic).schedule,
      DecodeSchedule::split_kv);
}

TEST(DecodePlan, HopperLoaderRule) {
  // bench/NOTES-decode.md v10 / v10b (H200): cp.async but for short streams at hdim 64 (< 4096
  // tokens a CTA on average) and on pages under 64 tokens at hdim 256.
  auto cp_async = [](int batch, int heads, int hdim, int len, DecodeSchedule s, int page = 0) {
    DecodeProblem p;
    p.batch = batch, p.q_len = 1, p.num_q_heads = p.num_kv_heads = heads, p.hdim = hdim;
    p.paged = page > 0, p.page_size = page;
    const DeviceInfo dev{132, hdim == 64 ? 4 : hdim == 128 ? 2 : 1};
    return decode_prefers_cp_async(make_decode_plan(p, std::vector<int>(batch, len), dev, s));
  };
  for (DecodeSchedule s :
       {DecodeSchedule::split_kv, DecodeSchedule::lean, DecodeSchedule::single}) {
    EXPECT_TRUE(cp_async(4, 32, 128, 131072, s));
    EXPECT_TRUE(cp_async(1, 56, 128, 8192, s));
    EXPECT_TRUE(cp_async(1, 32, 256, 65536, s));
    EXPECT_TRUE(cp_async(1, 56, 64, 65536, s));
    EXPECT_TRUE(cp_async(4, 32, 64, 131072, s));
    EXPECT_FALSE(cp_async(1, 56, 64, 1024, s));
  }
  EXPECT_FALSE(cp_async(1, 56, 64, 8192, DecodeSchedule::split_kv));  // 2048 tokens a CTA
  EXPECT_TRUE(cp_async(16, 16, 64, 8192, DecodeSchedule::split_kv));  // 8192
  for (DecodeSchedule s :
       {DecodeSchedule::split_kv, DecodeSchedule::lean, DecodeSchedule::single}) {
    for (int page : {1, 16, 64, 256}) {
      EXPECT_TRUE(cp_async(1, 56, 64, 65536, s, page));
      EXPECT_TRUE(cp_async(9, 32, 128, 16384, s, page));
      EXPECT_EQ(cp_async(1, 32, 256, 65536, s, page), page >= 64);
    }
  }
}
