// TensorView, dtype conversions, the shared validation messages and the softmax-state merge.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "api/validate.h"
#include "common/host_tensor.h"
#include "common/softmax_state.h"
#include "flashkit/errors.h"

using namespace flashkit;

TEST(TensorView, ContiguousStridesAndShapeString) {
  float buf[24];
  TensorView t = TensorView::of(buf, DType::f32, {2, 3, 4});
  EXPECT_EQ(t.stride[0], 12);
  EXPECT_EQ(t.stride[1], 4);
  EXPECT_EQ(t.stride[2], 1);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.shape_str(), "[2, 3, 4]");
  TensorView s = TensorView::strided(buf, DType::f32, {3, 2}, {1, 3});
  EXPECT_FALSE(s.is_contiguous());
}

TEST(TensorView, HalfRoundTripIsNearestEven) {
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<float> u(-100.f, 100.f);
  for (int i = 0; i < 10000; ++i) {
    float f = u(rng);
    float h = fp16_to_float(float_to_fp16(f));
    float b = bf16_to_float(float_to_bf16(f));
    EXPECT_LE(std::fabs(h - f), std::fabs(f) * 0x1p-11f + 1e-7f);
    EXPECT_LE(std::fabs(b - f), std::fabs(f) * 0x1p-8f);
  }
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f), float_to_bf16(1.0f));  // tie rounds to even
}

TEST(Validate, MessagesNameTheArgument) {
  float buf[8];
  TensorView t = TensorView::of(buf, DType::f32, {2, 4});
  try {
    detail::check_dtype(t, "q", {DType::f16, DType::bf16});
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "q: expected dtype float16 or bfloat16, got float32");
  }
  try {
    detail::check_shape(t, "lse", {2, -1, 4});
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "lse: expected shape [2, *, 4], got [2, 4]");
  }
  TensorView u = TensorView::of(buf + 2, DType::f32, {2, 2});
  EXPECT_THROW(detail::check_no_overlap(u, "out", t, "q"), Error);
}

TEST(SoftmaxState, MergeIsAssociativeAndMatchesDirectSum) {
  std::mt19937_64 rng(7);
  std::normal_distribution<float> n(0.f, 3.f);
  std::vector<float> s(30);
  for (float& x : s) x = n(rng);
  auto stat_of = [&](int lo, int hi) {
    SoftmaxStat st;
    for (int i = lo; i < hi; ++i) {
      float a = online_update(st, s[i]);
      (void)a;
      st.l += std::exp(s[i] - st.m);
    }
    return st;
  };
  double direct = 0, mx = -1e30;
  for (float x : s) mx = std::max<double>(mx, x);
  for (float x : s) direct += std::exp(x - mx);
  SoftmaxStat a = stat_of(0, 10), b = stat_of(10, 20), c = stat_of(20, 30);
  SoftmaxStat left = merge_stats(merge_stats(a, b).merged, c).merged;
  SoftmaxStat right = merge_stats(a, merge_stats(b, c).merged).merged;
  EXPECT_NEAR(stat_lse(left), mx + std::log(direct), 1e-5);
  EXPECT_NEAR(stat_lse(right), stat_lse(left), 1e-5);
  MergeScales empty = merge_stats(SoftmaxStat{}, SoftmaxStat{});
  EXPECT_EQ(empty.scale_a, 0.f);
  EXPECT_FALSE(std::isnan(stat_lse(empty.merged)));
}

TEST(HostTensor, CopiesOwnTheirData) {
  std::mt19937_64 rng(3);
  HostTensor a(DType::f32, {4, 5});
  a.fill_uniform(rng, -1.f, 1.f);
  HostTensor b = a;
  EXPECT_NE(a.data(), b.data());
  EXPECT_TRUE(b.same_bytes(a));
  b.set(3, 42.f);
  EXPECT_NE(a.get(3), 42.f);
  HostTensor c;
  c = a;
  EXPECT_NE(c.data(), a.data());
  EXPECT_TRUE(c.same_bytes(a));
}

// float8 e4m3 (OCP "fn"): every finite code round-trips, known values, ties to even, saturation.
TEST(TensorView, E4m3RoundTripAndRounding) {
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(e4m3_to_float(uint8_t(b))));
      continue;
    }
    const float f = e4m3_to_float(uint8_t(b));
    if (f == 0.f) continue;  // +0 / -0 checked below
    EXPECT_EQ(float_to_e4m3(f), b) << "code " << b << " value " << f;
  }
  EXPECT_EQ(float_to_e4m3(0.f), 0x00);
  EXPECT_EQ(float_to_e4m3(-0.f), 0x80);
  EXPECT_EQ(e4m3_to_float(0x38), 1.f);
  EXPECT_EQ(e4m3_to_float(0x7e), 448.f);
  EXPECT_EQ(e4m3_to_float(0x01), std::ldexp(1.f, -9));  // smallest subnormal
  EXPECT_EQ(e4m3_to_float(0x08), std::ldexp(1.f, -6));  // smallest normal
  EXPECT_EQ(float_to_e4m3(1.0625f), 0x38);   // halfway 1 .. 1.125: to even (1)
  EXPECT_EQ(float_to_e4m3(1.1875f), 0x3a);   // halfway 1.125 .. 1.25: to even (1.25)
  EXPECT_EQ(float_to_e4m3(1000.f), 0x7e);    // saturates to 448
  EXPECT_EQ(float_to_e4m3(-INFINITY), 0xfe);
  EXPECT_EQ(float_to_e4m3(std::ldexp(1.f, -11)), 0x00);  // below half the smallest subnormal
  EXPECT_EQ(float_to_e4m3(std::ldexp(3.f, -10)), 0x02);  // 1.5 x 2^-9 ties to even (2 x 2^-9)
  EXPECT_EQ(float_to_e4m3(std::ldexp(1.f, -10) * 1.0001f), 0x01);
  EXPECT_STREQ(dtype_name(DType::e4m3), "float8_e4m3fn");
  EXPECT_EQ(dtype_size(DType::e4m3), 1u);
}
