// monotonic_alignment_search on the CPU: exact equality with the Cython transcription
// (src/cpu/reference_mas.cpp) on random, tie-heavy, random-length, -inf/NaN-holding, fp16/bf16
// and strided inputs for each NEG; durations = the path's row sums; every validation error.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/host_tensor.h"
#include "mas_case.h"
#include "common/mas_likelihood.h"
#include "cpu/reference_mas.h"
#include "flashkit/errors.h"
#include "flashkit/mas.h"

using namespace flashkit;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNegs[] = {-1e9f, -1e32f, -kInf};

// Random lengths with the edge cases mixed in: tx == ty, tx == 1, ty == S, tx == T, tx == 0.
void random_lengths(std::mt19937_64& rng, int64_t B, int64_t T, int64_t S, std::vector<int32_t>& tx,
                    std::vector<int32_t>& ty) {
  tx.resize(B);
  ty.resize(B);
  for (int64_t b = 0; b < B; ++b) {
    int x = std::uniform_int_distribution<int>(1, static_cast<int>(T))(rng);
    int y = std::uniform_int_distribution<int>(x, static_cast<int>(S))(rng);
    switch (b % 6) {
      case 1:
        y = x;
        break;
      case 2:
        x = 1;
        break;
      case 3:
        x = static_cast<int>(T), y = static_cast<int>(S);
        break;
      default:
        break;
    }
    tx[b] = x;
    ty[b] = y;
  }
}

// Runs flashkit on `value` (any view) and compares path (dtype `path_dtype`, optionally written
// through a transposed view) and durations with the oracle. Returns the mismatching cells.
int64_t mismatches_vs_oracle(const TensorView& value, const std::vector<int32_t>& tx,
                             const std::vector<int32_t>& ty, float neg,
                             DType path_dtype = DType::i32, bool transposed_path = false) {
  const int64_t B = value.shape[0], T = value.shape[1], S = value.shape[2];
  HostTensor path_buf(
      path_dtype, transposed_path ? std::vector<int64_t>{B, S, T} : std::vector<int64_t>{B, T, S});
  HostTensor dur(DType::i32, {B, T});
  path_buf.poison();
  dur.poison();
  TensorView path = path_buf.view();
  if (transposed_path)
    path = TensorView::strided(path_buf.data(), path_dtype, {B, T, S}, {S * T, 1, T});
  HostTensor txt = lengths_tensor(tx), mel = lengths_tensor(ty);
  MasOptions opts;
  opts.neg = neg;
  monotonic_alignment_search(value, txt, mel, path, dur, opts);

  std::vector<int32_t> ref = ref::monotonic_alignment_search(value, tx.data(), ty.data(), neg);
  int64_t bad = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t x = 0; x < T; ++x) {
      int32_t row_sum = 0;
      for (int64_t y = 0; y < S; ++y) {
        const int32_t r = ref[(b * T + x) * S + y];
        row_sum += r;
        const int64_t off = b * path.stride[0] + x * path.stride[1] + y * path.stride[2];
        bad += load_as_float(path.data, path_dtype, off) != static_cast<float>(r);
      }
      bad += dur.ptr<int32_t>()[b * T + x] != row_sum;
    }
  return bad;
}

// The oracle itself must produce monotonic paths covering every frame of [0, ty) once and
// ending at (tx-1, ty-1): otherwise equality with it would prove nothing.
void expect_oracle_paths_valid(const TensorView& value, const std::vector<int32_t>& tx,
                               const std::vector<int32_t>& ty, float neg) {
  const int64_t T = value.shape[1], S = value.shape[2];
  std::vector<int32_t> ref = ref::monotonic_alignment_search(value, tx.data(), ty.data(), neg);
  for (size_t b = 0; b < tx.size(); ++b) {
    if (tx[b] == 0) continue;
    int prev_x = 0;
    for (int y = 0; y < ty[b]; ++y) {
      int count = 0, x_on = -1;
      for (int x = 0; x < T; ++x)
        if (ref[(b * T + x) * S + y]) ++count, x_on = x;
      ASSERT_EQ(count, 1) << "item " << b << " frame " << y;
      ASSERT_TRUE(x_on == prev_x || x_on == prev_x + 1) << "item " << b << " frame " << y;
      prev_x = x_on;
    }
    ASSERT_EQ(prev_x, tx[b] - 1) << "item " << b;
  }
}

}  // namespace

// Hand-worked 2x3 cases: a clear winner, the other winner, and a tie (which keeps the index).
TEST(Mas, HandWorkedExamples) {
  struct Case {
    float v[6];
    int32_t path[6];
  } cases[] = {
      {{1, 2, 3, 4, 5, 6}, {1, 0, 0, 0, 1, 1}},
      {{1, 5, 3, 4, 1, 6}, {1, 1, 0, 0, 0, 1}},
      {{1, 2, 3, 4, 2, 6}, {1, 0, 0, 0, 1, 1}},  // Q[0,1] == Q[1,1] == 3: stay on row 1
  };
  for (auto& c : cases) {
    TensorView v = TensorView::of(c.v, DType::f32, {1, 2, 3});
    int32_t tx = 2, ty = 3;
    std::vector<int32_t> ref = ref::monotonic_alignment_search(v, &tx, &ty, -1e9f);
    HostTensor path(DType::i32, {1, 2, 3}), dur(DType::i32, {1, 2});
    path.poison();
    dur.poison();
    HostTensor txt = lengths_tensor({2}), mel = lengths_tensor({3});
    monotonic_alignment_search(v, txt, mel, path, dur);
    for (int i = 0; i < 6; ++i) {
      EXPECT_EQ(ref[i], c.path[i]) << i;
      EXPECT_EQ(path.ptr<int32_t>()[i], c.path[i]) << i;
    }
    EXPECT_EQ(dur.ptr<int32_t>()[0], c.path[0] + c.path[1] + c.path[2]);
    EXPECT_EQ(dur.ptr<int32_t>()[1], c.path[3] + c.path[4] + c.path[5]);
  }
}

TEST(Mas, RandomNormalEachNeg) {
  std::mt19937_64 rng(11);
  for (float neg : kNegs)
    for (auto [B, T, S] : {std::tuple{6, 37, 90}, std::tuple{4, 64, 200}, std::tuple{3, 8, 8}}) {
      HostTensor v(DType::f32, {B, T, S});
      v.fill_normal(rng, -3.f, 2.f);
      std::vector<int32_t> tx, ty;
      random_lengths(rng, B, T, S, tx, ty);
      expect_oracle_paths_valid(v, tx, ty, neg);
      EXPECT_EQ(mismatches_vs_oracle(v, tx, ty, neg), 0)
          << "neg " << neg << " T " << T << " S " << S;
    }
}

// Integer values: most comparisons are ties, so any deviation in tie handling shows.
TEST(Mas, TieHeavyIntegerValues) {
  std::mt19937_64 rng(12);
  for (float neg : kNegs)
    for (int lo : {-1, -3}) {
      HostTensor v(DType::f32, {8, 45, 130});
      v.fill_int(rng, lo, 0);
      std::vector<int32_t> tx, ty;
      random_lengths(rng, 8, 45, 130, tx, ty);
      EXPECT_EQ(mismatches_vs_oracle(v, tx, ty, neg), 0) << "neg " << neg;
    }
}

// Values as large as NEG make Q cross it, so the forbidden cells take part in real comparisons.
TEST(Mas, ValuesNearNeg) {
  std::mt19937_64 rng(13);
  HostTensor v(DType::f32, {6, 30, 70});
  v.fill_uniform(rng, -3e9f, 1e9f);
  std::vector<int32_t> tx, ty;
  random_lengths(rng, 6, 30, 70, tx, ty);
  EXPECT_EQ(mismatches_vs_oracle(v, tx, ty, -1e9f), 0);
}

// -inf cells (e.g. masked log-likelihoods) and NaN cells follow the Cython comparisons too.
TEST(Mas, InfAndNanHoldingInputs) {
  std::mt19937_64 rng(14);
  for (float special : {-kInf, std::numeric_limits<float>::quiet_NaN()})
    for (float neg : kNegs) {
      HostTensor v(DType::f32, {5, 33, 81});
      v.fill_normal(rng);
      std::uniform_int_distribution<int64_t> cell(0, v.numel() - 1);
      for (int i = 0; i < v.numel() / 8; ++i) v.set(cell(rng), special);
      std::vector<int32_t> tx, ty;
      random_lengths(rng, 5, 33, 81, tx, ty);
      EXPECT_EQ(mismatches_vs_oracle(v, tx, ty, neg), 0) << "special " << special << " neg " << neg;
    }
}

TEST(Mas, HalfAndBfloat16Inputs) {
  std::mt19937_64 rng(15);
  for (DType dt : {DType::f16, DType::bf16})
    for (bool ties : {false, true}) {
      HostTensor v(dt, {6, 41, 99});
      if (ties)
        v.fill_int(rng, -2, 0);
      else
        v.fill_normal(rng, -2.f, 1.f);
      std::vector<int32_t> tx, ty;
      random_lengths(rng, 6, 41, 99, tx, ty);
      EXPECT_EQ(mismatches_vs_oracle(v, tx, ty, -1e9f), 0) << dtype_name(dt) << " ties " << ties;
    }
}

// VITS keeps [B, S, T]; a transposed view serves it. Also a view with padding in both dims.
TEST(Mas, StridedViews) {
  std::mt19937_64 rng(16);
  const int64_t B = 5, T = 29, S = 77;
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    HostTensor vits(dt, {B, S, T});
    vits.fill_normal(rng);
    TensorView v = TensorView::strided(vits.data(), dt, {B, T, S}, {S * T, 1, T});
    std::vector<int32_t> tx, ty;
    random_lengths(rng, B, T, S, tx, ty);
    EXPECT_EQ(mismatches_vs_oracle(v, tx, ty, -1e9f), 0) << dtype_name(dt);

    HostTensor big(dt, {B, T + 3, S + 5});
    big.fill_int(rng, -2, 0);
    TensorView padded =
        TensorView::strided(big.data(), dt, {B, T, S}, {(T + 3) * (S + 5), S + 5, 1});
    EXPECT_EQ(mismatches_vs_oracle(padded, tx, ty, -kInf), 0) << dtype_name(dt);
  }
}

TEST(Mas, EdgeLengths) {
  std::mt19937_64 rng(17);
  const int64_t B = 7, T = 20, S = 40;
  HostTensor v(DType::f32, {B, T, S});
  v.fill_normal(rng);
  // tx == ty (the diagonal), tx = 1, ty = 1, tx == 0 (empty), full size, tx == T == ty.
  std::vector<int32_t> tx = {13, 1, 1, 0, 20, 20, 9}, ty = {13, 40, 1, 17, 40, 20, 9};
  for (float neg : kNegs) EXPECT_EQ(mismatches_vs_oracle(v, tx, ty, neg), 0);
  HostTensor one(DType::f32, {1, 1, 1});
  one.fill_normal(rng);
  EXPECT_EQ(mismatches_vs_oracle(one, {1}, {1}, -1e9f), 0);
}

TEST(Mas, EveryPathDtypeAndTransposedPath) {
  std::mt19937_64 rng(18);
  HostTensor v(DType::f32, {4, 26, 60});
  v.fill_int(rng, -2, 0);
  std::vector<int32_t> tx, ty;
  random_lengths(rng, 4, 26, 60, tx, ty);
  for (DType pd : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::u8, DType::bool8})
    for (bool transposed : {false, true})
      EXPECT_EQ(mismatches_vs_oracle(v, tx, ty, -1e9f, pd, transposed), 0)
          << dtype_name(pd) << " transposed " << transposed;
}

TEST(Mas, DurationsAloneAndValueUntouched) {
  std::mt19937_64 rng(19);
  const int64_t B = 4, T = 31, S = 64;
  HostTensor v(DType::f32, {B, T, S});
  v.fill_normal(rng);
  const std::vector<uint8_t> before = bytes_of(v);
  std::vector<int32_t> tx, ty;
  random_lengths(rng, B, T, S, tx, ty);
  HostTensor txt = lengths_tensor(tx), mel = lengths_tensor(ty), dur(DType::i32, {B, T});
  dur.poison();
  monotonic_alignment_search(v, txt, mel, TensorView{}, dur);
  std::vector<int32_t> ref = ref::monotonic_alignment_search(v, tx.data(), ty.data(), -1e9f);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t x = 0; x < T; ++x) {
      int32_t s = 0;
      for (int64_t y = 0; y < S; ++y) s += ref[(b * T + x) * S + y];
      EXPECT_EQ(dur.ptr<int32_t>()[b * T + x], s) << b << "," << x;
    }
  EXPECT_EQ(bytes_of(v), before);
}

// ---- validation: the message names the argument, the outputs are left as they were --------------

namespace {

struct Args {
  HostTensor value{DType::f32, {4, 6, 10}};
  HostTensor txt = lengths_tensor({6, 3, 1, 5});
  HostTensor mel = lengths_tensor({10, 3, 7, 9});
  HostTensor path{DType::f32, {4, 6, 10}};
  HostTensor dur{DType::i32, {4, 6}};
  Args() {
    std::mt19937_64 rng(20);
    value.fill_normal(rng);
    path.poison();
    dur.poison();
  }
};

// Expects an Error containing `msg`, with path and durations byte-identical to before.
void expect_error(const Args& a, const TensorView& value, const TensorView& txt,
                  const TensorView& mel, const TensorView& path, const TensorView& dur,
                  const std::string& msg, MasOptions opts = {}) {
  const std::vector<uint8_t> path0 = bytes_of(a.path), dur0 = bytes_of(a.dur);
  try {
    monotonic_alignment_search(value, txt, mel, path, dur, opts);
    ADD_FAILURE() << "no error; expected: " << msg;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(msg), std::string::npos)
        << "got: " << e.what() << "\nexpected to contain: " << msg;
  }
  EXPECT_EQ(bytes_of(a.path), path0) << msg;
  EXPECT_EQ(bytes_of(a.dur), dur0) << msg;
}

}  // namespace

TEST(MasValidation, TextLongerThanMelNamesTheItem) {
  Args a;
  a.txt.ptr<int32_t>()[3] = 6;
  a.mel.ptr<int32_t>()[3] = 5;
  expect_error(a, a.value, a.txt, a.mel, a.path, a.dur,
               "text_lengths[3]: expected <= mel_lengths[3] (5), got 6: no monotonic path");
}

TEST(MasValidation, LengthsOutOfRange) {
  {
    Args a;
    a.txt.ptr<int32_t>()[2] = 7;
    expect_error(a, a.value, a.txt, a.mel, a.path, a.dur,
                 "text_lengths[2]: expected 0..6 (value's dim 1), got 7");
  }
  {
    Args a;
    a.txt.ptr<int32_t>()[1] = -1;
    expect_error(a, a.value, a.txt, a.mel, a.path, a.dur, "text_lengths[1]: expected 0..6");
  }
  {
    Args a;
    a.mel.ptr<int32_t>()[0] = 11;
    expect_error(a, a.value, a.txt, a.mel, a.path, a.dur,
                 "mel_lengths[0]: expected 0..10 (value's dim 2), got 11");
  }
}

TEST(MasValidation, WrongDtypesShapesAndMissingTensors) {
  Args a;
  HostTensor vi(DType::i32, {4, 6, 10}), v2(DType::f32, {4, 60});
  expect_error(a, vi, a.txt, a.mel, a.path, a.dur,
               "value: expected dtype float32 or float16 or bfloat16, got int32");
  expect_error(a, v2, a.txt, a.mel, a.path, a.dur, "value: expected 3 dims, got 2");
  expect_error(a, TensorView{}, a.txt, a.mel, a.path, a.dur, "value: expected a tensor");
  HostTensor t64(DType::i64, {4}), t5(DType::i32, {5});
  expect_error(a, a.value, t64, a.mel, a.path, a.dur,
               "text_lengths: expected dtype int32, got int64");
  expect_error(a, a.value, a.txt, t5, a.path, a.dur, "mel_lengths: expected shape [4], got [5]");
  expect_error(a, a.value, a.txt, TensorView{}, a.path, a.dur, "mel_lengths: expected a tensor");
  HostTensor p64(DType::f64, {4, 6, 10}), pshape(DType::f32, {4, 6, 11});
  expect_error(a, a.value, a.txt, a.mel, p64, a.dur, "path: expected dtype float32 or float16");
  expect_error(a, a.value, a.txt, a.mel, pshape, a.dur,
               "path: expected shape [4, 6, 10], got [4, 6, 11]");
  HostTensor df(DType::f32, {4, 6}), dshape(DType::i32, {4, 7});
  expect_error(a, a.value, a.txt, a.mel, a.path, df,
               "durations: expected dtype int32, got float32");
  expect_error(a, a.value, a.txt, a.mel, a.path, dshape,
               "durations: expected shape [4, 6], got [4, 7]");
  expect_error(a, a.value, a.txt, a.mel, TensorView{}, TensorView{},
               "path: expected a path and/or a durations output, got neither");
}

TEST(MasValidation, DevicesStridesOverlapAndNeg) {
  Args a;
  TensorView cuda_txt = a.txt.view();
  cuda_txt.device = Device::cuda;
  expect_error(a, a.value, cuda_txt, a.mel, a.path, a.dur,
               "text_lengths: expected device cpu:0 like value, got cuda:0");
  TensorView cuda_path = a.path.view();
  cuda_path.device = Device::cuda;
  expect_error(a, a.value, a.txt, a.mel, cuda_path, a.dur,
               "path: expected device cpu:0 like value");
  TensorView broadcast = TensorView::strided(a.path.data(), DType::f32, {4, 6, 10}, {60, 0, 1});
  expect_error(a, a.value, a.txt, a.mel, broadcast, a.dur,
               "path: expected strides that do not alias");
  TensorView neg_stride = TensorView::strided(a.value.data(), DType::f32, {4, 6, 10}, {60, 10, -1});
  expect_error(a, neg_stride, a.txt, a.mel, a.path, a.dur, "value: expected non-negative strides");
  TensorView on_value = a.value.view();
  expect_error(a, a.value, a.txt, a.mel, on_value, a.dur,
               "path: expected memory separate from value, got an overlapping buffer");
  TensorView dur_on_path = TensorView::of(a.path.data(), DType::i32, {4, 6});
  expect_error(a, a.value, a.txt, a.mel, a.path, dur_on_path,
               "durations: expected memory separate from path");
  MasOptions nan_neg;
  nan_neg.neg = std::numeric_limits<float>::quiet_NaN();
  expect_error(a, a.value, a.txt, a.mel, a.path, a.dur, "neg: expected a number", nan_neg);
}

// ---- fused likelihood --------------------------------------------------------------------------

namespace {

struct FusedInputs {
  HostTensor z, m, logs;
};

FusedInputs fused_inputs(std::mt19937_64& rng, DType dt, int64_t B, int64_t C, int64_t T,
                         int64_t S) {
  FusedInputs in{HostTensor(dt, {B, C, S}), HostTensor(dt, {B, C, T}), HostTensor(dt, {B, C, T})};
  in.z.fill_normal(rng);
  in.m.fill_normal(rng);
  in.logs.fill_uniform(rng, -1.f, 0.5f);
  return in;
}

// The likelihood materialised with the shared fp32 recipe, and (in `ref64`) in float64.
HostTensor materialise(const FusedInputs& in, std::vector<double>* ref64) {
  const int64_t B = in.z.view().shape[0], C = in.z.view().shape[1], S = in.z.view().shape[2],
                T = in.m.view().shape[2];
  HostTensor v(DType::f32, {B, T, S});
  if (ref64) ref64->assign(static_cast<size_t>(B * T * S), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t x = 0; x < T; ++x)
      for (int64_t y = 0; y < S; ++y) {
        float acc = 0.f;
        double acc64 = 0.0;
        for (int64_t c = 0; c < C; ++c) {
          const float m = in.m.get((b * C + c) * T + x), ls = in.logs.get((b * C + c) * T + x),
                      z = in.z.get((b * C + c) * S + y);
          acc = mas::add_rn(acc, mas::term(mas::coeffs(m, ls), z));
          const double d = double(z) - m;
          acc64 += -0.5 * std::log(2 * M_PI) - ls - 0.5 * std::exp(-2.0 * ls) * d * d;
        }
        v.ptr<float>()[(b * T + x) * S + y] = acc;
        if (ref64) (*ref64)[(b * T + x) * S + y] = acc64;
      }
  return v;
}

}  // namespace

// The fp32 recipe is the textbook formula to fp32 accuracy, and the fused search equals the
// unfused one on the materialised likelihood, path and durations, for each dtype and NEG.
TEST(MasFused, EqualsUnfusedOnTheSameLikelihood) {
  std::mt19937_64 rng(30);
  for (DType dt : {DType::f32, DType::bf16})
    for (float neg : {-1e9f, -kInf}) {
      const int64_t B = 5, C = 7, T = 21, S = 57;
      FusedInputs in = fused_inputs(rng, dt, B, C, T, S);
      std::vector<double> ref64;
      HostTensor v = materialise(in, &ref64);
      double worst = 0;
      for (int64_t i = 0; i < v.numel(); ++i)
        worst =
            std::max(worst, std::fabs(v.ptr<float>()[i] - ref64[i]) / (1 + std::fabs(ref64[i])));
      EXPECT_LT(worst, 1e-5) << "fp32 likelihood vs float64";

      std::vector<int32_t> tx, ty;
      random_lengths(rng, B, T, S, tx, ty);
      HostTensor txt = lengths_tensor(tx), mel = lengths_tensor(ty);
      HostTensor p_fused(DType::u8, {B, T, S}), p_plain(DType::u8, {B, T, S});
      HostTensor d_fused(DType::i32, {B, T}), d_plain(DType::i32, {B, T}), status(DType::i32, {1});
      p_fused.poison();
      d_fused.poison();
      status.poison();
      MasOptions opts;
      opts.neg = neg;
      opts.status = status.view();
      monotonic_alignment_search_fused(in.z, in.m, in.logs, txt, mel, p_fused, d_fused, opts);
      EXPECT_EQ(status.ptr<int32_t>()[0], -1);
      opts.status = TensorView{};
      monotonic_alignment_search(v, txt, mel, p_plain, d_plain, opts);
      EXPECT_EQ(bytes_of(p_fused), bytes_of(p_plain)) << dtype_name(dt) << " neg " << neg;
      EXPECT_EQ(bytes_of(d_fused), bytes_of(d_plain)) << dtype_name(dt) << " neg " << neg;
      EXPECT_EQ(mismatches_vs_oracle(v, tx, ty, neg), 0);
    }
}

TEST(MasFused, ValidationNamesTheArgument) {
  Args a;
  HostTensor z(DType::f32, {4, 3, 10}), m(DType::f32, {4, 3, 6}), logs(DType::f32, {4, 3, 6});
  HostTensor m_bad(DType::f32, {4, 2, 6}), logs_bf(DType::bf16, {4, 3, 6}),
      logs_t(DType::f32, {4, 3, 7});
  auto fused_error = [&](const TensorView& zz, const TensorView& mm, const TensorView& ll,
                         const TensorView& txt, const std::string& msg) {
    const std::vector<uint8_t> p0 = bytes_of(a.path), d0 = bytes_of(a.dur);
    try {
      monotonic_alignment_search_fused(zz, mm, ll, txt, a.mel, a.path, a.dur);
      ADD_FAILURE() << "no error; expected: " << msg;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(msg), std::string::npos) << "got: " << e.what();
    }
    EXPECT_EQ(bytes_of(a.path), p0);
    EXPECT_EQ(bytes_of(a.dur), d0);
  };
  fused_error(z, m_bad, logs, a.txt, "m: expected shape [4, 3, *], got [4, 2, 6]");
  fused_error(z, m, logs_t, a.txt, "logs: expected shape [4, 3, 6] like m, got [4, 3, 7]");
  fused_error(z, m, logs_bf, a.txt, "logs: expected dtype float32 like z, got bfloat16");
  fused_error(TensorView{}, m, logs, a.txt, "z: expected a tensor");
  HostTensor long_text = lengths_tensor({6, 3, 1, 7});
  fused_error(z, m, logs, long_text, "text_lengths[3]: expected 0..6 (m's dim 2), got 7");
  HostTensor too_long = lengths_tensor({6, 3, 1, 6});
  a.mel.ptr<int32_t>()[3] = 5;
  fused_error(z, m, logs, too_long, "text_lengths[3]: expected <= mel_lengths[3] (5), got 6");
}

// Lengths given as mask lines ([B, T] and [B, S], any dtype; the sum is the length), as the
// drop-ins pass mask[:, :, 0] and mask[:, 0, :].
TEST(MasLengths, MaskLinesEqualInt32Lengths) {
  std::mt19937_64 rng(40);
  const int64_t B = 5, T = 23, S = 61;
  HostTensor v(DType::f32, {B, T, S});
  v.fill_int(rng, -2, 0);
  std::vector<int32_t> tx, ty;
  random_lengths(rng, B, T, S, tx, ty);
  HostTensor txt = lengths_tensor(tx), mel = lengths_tensor(ty), want(DType::u8, {B, T, S});
  monotonic_alignment_search(v, txt, mel, want, TensorView{});
  for (DType dt : {DType::f32, DType::bool8, DType::i64, DType::bf16}) {
    // A [B, T, S] mask of ones inside the item; its first column and first row are the lines.
    HostTensor mask(dt, {B, T, S});
    for (int64_t b = 0; b < B; ++b)
      for (int64_t x = 0; x < T; ++x)
        for (int64_t y = 0; y < S; ++y) mask.set((b * T + x) * S + y, x < tx[b] && y < ty[b]);
    TensorView col0 = TensorView::strided(mask.data(), dt, {B, T}, {T * S, S});
    TensorView row0 = TensorView::strided(mask.data(), dt, {B, S}, {T * S, 1});
    HostTensor got(DType::u8, {B, T, S});
    got.poison();
    monotonic_alignment_search(v, col0, row0, got, TensorView{});
    EXPECT_EQ(bytes_of(got), bytes_of(want)) << dtype_name(dt);
  }
  Args a;
  HostTensor line(DType::f32, {4, 7});
  expect_error(a, a.value, line, a.mel, a.path, a.dur,
               "text_lengths: expected shape [4, 6], got [4, 7]");
}
