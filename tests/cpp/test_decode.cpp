// CPU decode against the fp64 reference for every schedule on dense/paged/ragged/GQA/MQA caches,
// q_len 1..16 and f32/f16/bf16; schedule independence; merge_states; validation errors.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "decode_case.h"
#include "flashkit/decode.h"
#include "flashkit/errors.h"

using namespace flashkit;
using namespace flashkit::testing;

namespace {

const DecodeSchedule kSchedules[] = {DecodeSchedule::single, DecodeSchedule::split_kv,
                                     DecodeSchedule::flash_decoding, DecodeSchedule::lean,
                                     DecodeSchedule::automatic};

void run_and_check(const DecodeCase& c, DeviceInfo dev, DecodeSchedule s, const char* what,
                   const DecodeOptions& opts = {}) {
  DecodeInputs in = make_decode_inputs(c);
  poison_below_window(in, c, opts.window_left);
  // `auto` plans for the window (DecodeProblem::window_left), the others for the whole cache.
  if (s == DecodeSchedule::automatic) in.problem.window_left = opts.window_left;
  DecodePlan plan = make_decode_plan(in.problem, c.lens, dev, s);
  decode(in.q, in.k, in.v, in.seqlens, in.table_view(), in.out, in.lse, plan, opts);
  auto exact = cpu::reference_decode(in.q, in.k, in.v, in.seqlens, in.table_view(), 0.f, false,
                                     opts.softcap, opts.window_left);
  auto naive = cpu::reference_decode(in.q, in.k, in.v, in.seqlens, in.table_view(), 0.f, true,
                                     opts.softcap, opts.window_left);
  const double tol = decode_tolerance(exact, naive);
  EXPECT_LE(max_abs_err(in.out, exact.out), tol) << what << " " << plan.describe();
  EXPECT_LE(max_abs_err(in.lse, exact.lse), 1e-4) << what << " " << plan.describe();
}

}  // namespace

TEST(Decode, EverySchedule_DenseRaggedGqa) {
  for (DType dt : {DType::f32, DType::f16, DType::bf16})
    for (DecodeSchedule s : kSchedules) {
      DecodeCase c{.batch = 4, .q_len = 1, .hq = 8, .hkv = 2, .d = 64, .dtype = dt,
                   .lens = {1, 300, 1000, 77}, .seed = 11};
      run_and_check(c, {5, 2}, s, dtype_name(dt));
    }
}

TEST(Decode, EverySchedule_PagedPageSizes) {
  for (int ps : {1, 16, 64, 100})
    for (DecodeSchedule s : kSchedules) {
      DecodeCase c{.batch = 3, .q_len = 2, .hq = 4, .hkv = 4, .d = 128, .dtype = DType::bf16,
                   .page_size = ps, .lens = {129, 700, 5}, .seed = static_cast<uint64_t>(ps)};
      run_and_check(c, {3, 1}, s, ("page " + std::to_string(ps)).c_str());
    }
}

TEST(Decode, QueryTokensCausalAndMqa) {
  for (int q_len : {1, 3, 7, 16})
    for (DecodeSchedule s : kSchedules) {
      // MQA: 8 query heads share one KV head; 8 x 16 = 128 rows -> 8 row blocks. Length 2 < q_len
      // leaves the first query tokens with no visible key (O = 0, lse = -inf).
      DecodeCase c{.batch = 3, .q_len = q_len, .hq = 8, .hkv = 1, .d = 32, .dtype = DType::f16,
                   .page_size = 16, .lens = {2, 260, 513}, .seed = static_cast<uint64_t>(q_len)};
      run_and_check(c, {4, 1}, s, ("q_len " + std::to_string(q_len)).c_str());
    }
}

// Gemma-2's softcap and Mistral's sliding window, alone and together, for every schedule on
// dense and paged caches, q_len 1 and 5 (the window moves with each query token), GQA; windows
// from 0 (each query sees itself) to wider than every cache.
TEST(Decode, SoftcapAndSlidingWindowEverySchedule) {
  struct Mode {
    float softcap;
    int window;
  };
  for (Mode m : {Mode{1.5f, -1}, Mode{0.f, 0}, Mode{0.f, 37}, Mode{2.f, 200}, Mode{0.f, 5000}})
    for (int ps : {0, 16})
      for (int q_len : {1, 5})
        for (DecodeSchedule s : kSchedules) {
          DecodeCase c{.batch = 4,
                       .q_len = q_len,
                       .hq = 8,
                       .hkv = 2,
                       .d = 64,
                       .dtype = DType::bf16,
                       .page_size = ps,
                       .lens = {3, 300, 1000, 77},
                       .seed = static_cast<uint64_t>(7 + ps + q_len)};
          DecodeOptions o;
          o.softcap = m.softcap;
          o.window_left = m.window;
          run_and_check(
              c, {5, 2}, s,
              ("softcap " + std::to_string(m.softcap) + " window " + std::to_string(m.window) +
               " page " + std::to_string(ps) + " q_len " + std::to_string(q_len))
                  .c_str(),
              o);
        }
}

// A window as long as the longest cache the plan serves, or INT_MAX, hides nothing: the output
// equals decode without a window, byte for byte.
TEST(Decode, WindowPastEveryCacheIsNoWindow) {
  DecodeCase c{.batch = 2, .q_len = 3, .hq = 4, .hkv = 2, .d = 32, .dtype = DType::bf16,
               .lens = {90, 200}, .seed = 9};
  DecodeInputs in = make_decode_inputs(c);
  const DecodePlan plan = make_decode_plan(in.problem, c.lens, {3, 1}, DecodeSchedule::split_kv);
  decode(in.q, in.k, in.v, in.seqlens, in.table_view(), in.out, in.lse, plan);
  const HostTensor out0 = in.out;
  for (int w : {200, 1 << 30, std::numeric_limits<int>::max()}) {
    DecodeOptions o;
    o.window_left = w;
    in.out.poison();
    decode(in.q, in.k, in.v, in.seqlens, in.table_view(), in.out, in.lse, plan, o);
    EXPECT_TRUE(in.out.same_bytes(out0)) << w;
  }
}

TEST(Decode, HeadDimsAndEmptySequence) {
  for (int d : {8, 40, 256})
    for (DecodeSchedule s : kSchedules) {
      DecodeCase c{.batch = 3, .q_len = 1, .hq = 6, .hkv = 3, .d = d, .dtype = DType::f32,
                   .lens = {0, 200, 33}, .seed = static_cast<uint64_t>(d)};
      run_and_check(c, {6, 1}, s, ("hdim " + std::to_string(d)).c_str());
    }
}

// Same inputs through many schedules and CTA counts: the results agree within fp32 rounding.
TEST(Decode, ResultIndependentOfSplitsAndCtas) {
  DecodeCase c{.batch = 2, .q_len = 2, .hq = 8, .hkv = 2, .d = 64, .dtype = DType::f32,
               .page_size = 16, .lens = {3000, 1100}, .seed = 5};
  DecodeInputs in = make_decode_inputs(c);
  DecodePlan base = make_decode_plan(in.problem, c.lens, {1, 1}, DecodeSchedule::single);
  decode(in.q, in.k, in.v, in.seqlens, in.table, in.out, in.lse, base);
  std::vector<double> ref(in.out.numel());
  for (int64_t i = 0; i < in.out.numel(); ++i) ref[i] = in.out.get(i);
  for (DeviceInfo dev : {DeviceInfo{1, 1}, DeviceInfo{2, 1}, DeviceInfo{7, 3}, DeviceInfo{132, 4}})
    for (DecodeSchedule s : {DecodeSchedule::split_kv, DecodeSchedule::flash_decoding, DecodeSchedule::lean}) {
      DecodePlan plan = make_decode_plan(in.problem, c.lens, dev, s);
      in.out.poison();
      decode(in.q, in.k, in.v, in.seqlens, in.table, in.out, in.lse, plan);
      EXPECT_LE(max_abs_err(in.out, ref), 2e-6) << plan.describe();
    }
}

// A plan for longer lengths (e.g. rounded up, reused over decode steps) masks the extra keys.
TEST(Decode, PlanForLongerLengthsServesShorterCaches) {
  DecodeCase c{.batch = 2, .q_len = 2, .hq = 4, .hkv = 2, .d = 64, .dtype = DType::bf16,
               .page_size = 64, .lens = {1000, 37}, .seed = 8};
  DecodeInputs in = make_decode_inputs(c);
  DecodePlan plan = make_decode_plan(in.problem, {1024, 256}, {3, 2}, DecodeSchedule::lean);
  in.table.reset(DType::i32, {2, 16});
  DecodeInputs fresh = make_decode_inputs(c);  // same seed: the same pages
  for (int i = 0; i < 32; ++i) in.table.ptr<int32_t>()[i] = 0;
  for (int b = 0; b < 2; ++b)
    for (int j = 0; j < fresh.table.view().shape[1]; ++j)
      in.table.ptr<int32_t>()[b * 16 + j] = std::max(0, fresh.table.ptr<int32_t>()[b * fresh.table.view().shape[1] + j]);
  decode(in.q, in.k, in.v, in.seqlens, in.table, in.out, in.lse, plan);
  auto exact = cpu::reference_decode(in.q, in.k, in.v, in.seqlens, in.table, 0.f);
  auto naive = cpu::reference_decode(in.q, in.k, in.v, in.seqlens, in.table, 0.f, true);
  EXPECT_LE(max_abs_err(in.out, exact.out), decode_tolerance(exact, naive));
}

TEST(MergeStates, MatchesDirectAttentionAndSkipsEmptyParts) {
  // Split one cache into P disjoint key ranges, attend to each (reference), merge, compare.
  const int P = 4, n = 3, h = 5, d = 24, len = 400;
  DecodeCase c{.batch = n, .q_len = 1, .hq = h, .hkv = h, .d = d, .dtype = DType::f32,
               .lens = std::vector<int>(n, len), .seed = 21};
  DecodeInputs in = make_decode_inputs(c);
  auto full = cpu::reference_decode(in.q, in.k, in.v, in.seqlens, TensorView{}, 0.f);
  for (DType odt : {DType::f32, DType::bf16}) {
    HostTensor o_parts(odt, {P, n, h, d}), lse_parts(DType::f32, {P, n, h});
    const int cut[P + 1] = {0, 100, 100, 350, len};  // part 1 is empty
    for (int p = 0; p < P; ++p) {
      TensorView k = in.k.view(), v = in.v.view();
      k.data = in.k.ptr<float>() + cut[p] * k.stride[1];
      v.data = in.v.ptr<float>() + cut[p] * v.stride[1];
      HostTensor sl(DType::i32, {n});
      for (int b = 0; b < n; ++b) sl.ptr<int32_t>()[b] = cut[p + 1] - cut[p];
      auto part = cpu::reference_decode(in.q, k, v, sl, TensorView{}, 1.f / std::sqrt(float(d)));
      for (int i = 0; i < n * h * d; ++i) o_parts.set(p * n * h * d + i, p == 1 ? NAN : part.out[i]);
      for (int i = 0; i < n * h; ++i) lse_parts.ptr<float>()[p * n * h + i] = part.lse[i];
    }
    HostTensor out(DType::f32, {n, h, d}), lse(DType::f32, {n, h});
    out.poison();
    lse.poison();
    merge_states(o_parts, lse_parts, out, lse);
    EXPECT_LE(max_abs_err(out, full.out), odt == DType::f32 ? 1e-5 : 2e-2);
    EXPECT_LE(max_abs_err(lse, full.lse), 1e-4);
  }
  // All parts empty: O = 0, lse = -inf.
  HostTensor o_parts(DType::f32, {2, 1, 1, 8}), lse_parts(DType::f32, {2, 1, 1}), out(DType::f32, {1, 1, 8}),
      lse(DType::f32, {1, 1});
  o_parts.fill(NAN);
  lse_parts.fill(-INFINITY);
  merge_states(o_parts, lse_parts, out, lse);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(out.get(i), 0.f);
  EXPECT_EQ(lse.get(0), -INFINITY);
}

// The layout split-KV decoding merges with: parts [P, b, q_len, h, d], lse viewed strided.
TEST(MergeStates, StridedLseAndThreeLeadingDims) {
  std::mt19937_64 rng(3);
  const int P = 3, b = 2, t = 3, h = 4, d = 16;
  HostTensor o_parts(DType::f32, {P, b, t, h, d}), lse_parts(DType::f32, {P, b, t, h});
  o_parts.fill_normal(rng);
  lse_parts.fill_normal(rng, 0.f, 2.f);
  HostTensor out(DType::f16, {b, t, h, d}), lse_bht(DType::f32, {b, h, t});
  out.poison();
  lse_bht.poison();
  TensorView lse = TensorView::strided(lse_bht.data(), DType::f32, {b, t, h}, {h * t, 1, t});
  merge_states(o_parts, lse_parts, out, lse);
  for (int i = 0; i < b * t * h; ++i) {
    const int bb = i / (t * h), tt = i / h % t, hh = i % h;
    double m = -INFINITY, s = 0;
    for (int p = 0; p < P; ++p) m = std::max(m, double(lse_parts.get(p * b * t * h + i)));
    for (int p = 0; p < P; ++p) s += std::exp(lse_parts.get(p * b * t * h + i) - m);
    EXPECT_NEAR(lse_bht.get((bb * h + hh) * t + tt), m + std::log(s), 1e-5);
    for (int c = 0; c < d; ++c) {
      double o = 0;
      for (int p = 0; p < P; ++p)
        o += std::exp(lse_parts.get(p * b * t * h + i) - m) / s * o_parts.get((p * b * t * h + i) * d + c);
      EXPECT_NEAR(out.get(i * d + c), o, 2e-3);
    }
  }
}

// Every validation error names its argument and leaves out/lse untouched.
TEST(Decode, ValidationErrorsNameArgumentAndWriteNothing) {
  DecodeCase c{.batch = 2, .q_len = 1, .hq = 8, .hkv = 2, .d = 64, .dtype = DType::bf16,
               .page_size = 16, .lens = {100, 40}, .seed = 4};
  DecodeInputs in = make_decode_inputs(c);
  const DecodePlan plan = make_decode_plan(in.problem, c.lens, {4, 1}, DecodeSchedule::lean);
  const HostTensor out0 = in.out, lse0 = in.lse;
  struct Args {
    TensorView q, k, v, sl, bt, out, lse;
    DecodePlan plan;
    DecodeOptions opts;
  };
  auto expect_error = [&](const char* prefix, const std::string& contains,
                          const std::function<void(Args&)>& mutate) {
    Args a{in.q, in.k, in.v, in.seqlens, in.table, in.out, in.lse, plan, {}};
    mutate(a);
    try {
      decode(a.q, a.k, a.v, a.sl, a.bt, a.out, a.lse, a.plan, a.opts);
      ADD_FAILURE() << "no error for " << prefix << " " << contains;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(prefix, 0), 0u) << e.what();
      EXPECT_NE(std::string(e.what()).find(contains), std::string::npos) << e.what();
    }
    EXPECT_TRUE(in.out.same_bytes(out0)) << prefix;
    EXPECT_TRUE(in.lse.same_bytes(lse0)) << prefix;
  };
  HostTensor q16(DType::bf16, {2, 1, 16, 64}), q_f16(DType::f16, {2, 1, 8, 64}), lse_bad(DType::f32, {2, 1, 8});
  HostTensor sl_i64(DType::i64, {2}), sl_long(DType::i32, {2}), bt_bad(DType::i32, {2, 2}), bt_oob(DType::i32, {2, 8});
  sl_long.ptr<int32_t>()[0] = 101, sl_long.ptr<int32_t>()[1] = 40;
  for (int i = 0; i < 16; ++i) bt_oob.ptr<int32_t>()[i] = 999;
  HostTensor kv_heads3(DType::bf16, {20, 16, 3, 64});
  expect_error("q:", "expected 8 heads like the plan, got 16", [&](Args& a) { a.q = q16; });
  expect_error("q:", "dtype bfloat16 like the plan, got float16", [&](Args& a) { a.q = q_f16; });
  expect_error("q:", "expected a tensor", [&](Args& a) { a.q.data = nullptr; });
  expect_error("q:", "contiguous last dim", [&](Args& a) { a.q.stride[3] = 2; });
  expect_error("k_cache:", "expected 2 kv heads like the plan, got 3", [&](Args& a) { a.k = kv_heads3; });
  expect_error("k_cache:", "page size 16", [&](Args& a) { a.k.shape[1] = 8; });
  expect_error("v_cache:", "like k_cache", [&](Args& a) { a.v.shape[0] -= 1; });
  expect_error("v_cache:", "dtype", [&](Args& a) { a.v.dtype = DType::f16; });
  expect_error("cache_seqlens:", "int32", [&](Args& a) { a.sl = sl_i64; });
  expect_error("cache_seqlens:", "0..100", [&](Args& a) { a.sl = sl_long; });
  expect_error("block_table:", "got none", [&](Args& a) { a.bt = TensorView{}; });
  expect_error("block_table:", "at least 7 pages", [&](Args& a) { a.bt = bt_bad; });
  expect_error("block_table:", "page indices", [&](Args& a) { a.bt = bt_oob; });
  expect_error("out:", "shape", [&](Args& a) { a.out.shape[2] = 4; });
  expect_error("out:", "separate from q", [&](Args& a) { a.out.data = a.q.data; });
  expect_error("lse:", "shape [2, 8, 1]", [&](Args& a) { a.lse = lse_bad; a.lse.shape[1] = 1; a.lse.shape[2] = 8; });
  expect_error("opts.softmax_scale:", "finite", [&](Args& a) { a.opts.softmax_scale = NAN; });
  expect_error("opts.softcap:", "finite value >= 0", [&](Args& a) { a.opts.softcap = -1.f; });
  expect_error("opts.softcap:", "finite value >= 0", [&](Args& a) { a.opts.softcap = INFINITY; });
  expect_error("opts.window_left:", "-1 (unbounded)", [&](Args& a) { a.opts.window_left = -2; });
  DecodeProblem windowed = in.problem;
  windowed.window_left = 50;
  expect_error("opts.window_left:", "the plan's window 50, got 20", [&](Args& a) {
    a.plan = make_decode_plan(windowed, c.lens, {4, 1});
    a.opts.window_left = 20;
  });
  expect_error("opts.stream:", "CPU", [&](Args& a) { a.opts.stream = reinterpret_cast<Stream>(1); });
  expect_error("plan:", "inconsistent", [&](Args& a) { a.plan.tiles.pop_back(); });
  expect_error("q:", "expected 1 tokens like the plan", [&](Args& a) { a.q.shape[1] = 2; });
  // A dense plan given a block table.
  DecodeProblem dense = in.problem;
  dense.paged = false;
  dense.page_size = 0;
  expect_error("k_cache:", "batch 2 like the plan", [&](Args& a) { a.plan = make_decode_plan(dense, c.lens, {4, 1}); });
}

TEST(MergeStates, ValidationErrorsNameArgumentAndWriteNothing) {
  HostTensor o(DType::f32, {3, 2, 4, 8}), l(DType::f32, {3, 2, 4}), out(DType::f32, {2, 4, 8}), lse(DType::f32, {2, 4});
  HostTensor l_bad(DType::f32, {3, 2, 5}), out_bad(DType::f32, {2, 4, 9}), l_f16(DType::f16, {3, 2, 4});
  out.poison();
  lse.poison();
  const HostTensor out0 = out, lse0 = lse;
  auto expect_error = [&](const char* prefix, const TensorView& a, const TensorView& b, const TensorView& c,
                          const TensorView& d) {
    try {
      merge_states(a, b, c, d);
      ADD_FAILURE() << "no error for " << prefix;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(prefix, 0), 0u) << e.what();
    }
    EXPECT_TRUE(out.same_bytes(out0));
    EXPECT_TRUE(lse.same_bytes(lse0));
  };
  expect_error("lse_parts:", o, l_bad, out, lse);
  expect_error("lse_parts:", o, l_f16, out, lse);
  expect_error("out:", o, l, out_bad, lse);
  expect_error("lse:", o, l, out, l);
  expect_error("o_parts:", TensorView{}, l, out, lse);
  expect_error("out:", o, l, TensorView::of(o.data(), DType::f32, {2, 4, 8}), lse);
}
