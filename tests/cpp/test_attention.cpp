// CPU FlashAttention-2 forward and backward against the fp64 naive reference on fresh random
// inputs, with the DESIGN.md tolerance rule (2x the naive low-precision error + 1e-5): dtypes,
// head dims, causal alignment, GQA/MQA, varlen, odd lengths, every modifier and some pairs.
// Also the Philox generator against its known-answer vectors and the dropout draws built on it.
// FK_VERBOSE=1 prints each error next to its tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "attention_case.h"
#include "common/philox.h"
#include "cpu/attention_policy.h"

using namespace flashkit;
using namespace flashkit::testing;

namespace {

// Runs forward (and backward) of `s` on poisoned outputs and checks every output against the
// fp64 reference within the tolerance rule.
void check_case(const AttentionSpec& s, uint64_t seed, bool backward = true) {
  AttentionCase c(s, seed);
  SCOPED_TRACE(c.spec.str());  // the case's spec: varlen batch and lengths filled in
  HostTensor out(s.dtype, c.q_shape()), lse(DType::f32, c.lse_shape());
  out.poison();
  lse.poison();
  attention_forward(c.q, c.k, c.v, out, lse, c.opts);
  HostTensor ref_out, ref_lse, lp_out, lp_lse;
  c.reference_forward(ref_out, ref_lse, DType::f64);
  c.reference_forward(lp_out, lp_lse, s.dtype);
  ErrorBound eo = bound(out, lp_out, ref_out);
  ErrorBound el = bound(lse, lp_lse, ref_lse, 1e-4);
  if (getenv("FK_VERBOSE"))
    printf("%s out %.3g/%.3g lse %.3g/%.3g\n", c.spec.str().c_str(), eo.error, eo.tolerance,
           el.error, el.tolerance);
  EXPECT_TRUE(eo.ok()) << "out error " << eo.error << " > " << eo.tolerance;

  EXPECT_TRUE(el.ok()) << "lse error " << el.error << " > " << el.tolerance;
  if (!backward) return;
  HostTensor dq(s.dtype, c.q_shape()), dk(s.dtype, c.kv_shape()), dv(s.dtype, c.kv_shape());
  dq.poison();
  dk.poison();
  dv.poison();
  // The backward takes the forward's own out/lse, as training does.
  attention_backward(c.q, c.k, c.v, out, c.dout, lse, dq, dk, dv, c.opts);
  HostTensor rq, rk, rv, lq, lk, lv;
  c.reference_backward(rq, rk, rv, DType::f64);
  c.reference_backward(lq, lk, lv, s.dtype);
  for (auto [name, got, lp, ref] :
       {std::tuple{"dq", &dq, &lq, &rq}, std::tuple{"dk", &dk, &lk, &rk},
        std::tuple{"dv", &dv, &lv, &rv}}) {
    ErrorBound e = bound(*got, *lp, *ref);
    if (getenv("FK_VERBOSE")) printf("   %s %.3g/%.3g\n", name, e.error, e.tolerance);
    EXPECT_TRUE(e.ok()) << name << " error " << e.error << " > " << e.tolerance;
  }
}

AttentionSpec spec(DType dt, int b, int sq, int sk, int h, int hk, int d) {
  return AttentionSpec::dense(dt, b, sq, sk, h, hk, d);
}

}  // namespace

class AttentionDtypeHdim : public ::testing::TestWithParam<std::tuple<DType, int>> {};

TEST_P(AttentionDtypeHdim, ForwardBackwardMatchReference) {
  auto [dt, d] = GetParam();
  check_case(spec(dt, 2, 77, 70, 2, 2, d), 100 + d);
}

INSTANTIATE_TEST_SUITE_P(All, AttentionDtypeHdim,
                         ::testing::Combine(::testing::Values(DType::f32, DType::f16, DType::bf16),
                                            ::testing::Values(8, 32, 40, 64, 72, 128, 256)),
                         [](const auto& info) {  // e.g. bfloat16_hdim128
                           return std::string(dtype_name(std::get<0>(info.param))) + "_hdim" +
                                  std::to_string(std::get<1>(info.param));
                         });

TEST(Attention, CausalSquareAndBothRectangles) {
  for (DType dt : {DType::f32, DType::bf16})
    for (auto [sq, sk] : {std::pair{129, 129}, std::pair{17, 129}, std::pair{129, 17},
                          std::pair{1, 65}, std::pair{65, 1}}) {
      AttentionSpec s = spec(dt, 2, sq, sk, 2, 1, 64);
      s.causal = true;
      check_case(s, 7 * sq + sk);
    }
}

TEST(Attention, OddLengths) {
  for (auto [sq, sk] : {std::pair{1, 1}, std::pair{1, 17}, std::pair{17, 1}, std::pair{129, 63},
                        std::pair{200, 130}})
    check_case(spec(DType::f16, 1, sq, sk, 3, 3, 32), 11 * sq + sk);
}

TEST(Attention, GqaAndMqa) {
  check_case(spec(DType::bf16, 2, 70, 90, 6, 2, 64), 1);
  check_case(spec(DType::f32, 1, 70, 90, 4, 1, 64), 2);
  AttentionSpec s = spec(DType::f16, 2, 90, 70, 8, 2, 32);
  s.causal = true;
  check_case(s, 3);
}

TEST(Attention, VarlenWithEmptyAndOddSequences) {
  AttentionSpec s = spec(DType::bf16, 0, 0, 0, 4, 2, 64);
  s.lens_q = {1, 17, 0, 129, 64};
  s.lens_k = {5, 17, 9, 100, 64};
  check_case(s, 21);
  s.causal = true;
  check_case(s, 22);
  s.dtype = DType::f32;
  s.window_left = 8;
  s.block_q = 16;
  s.block_k = 32;
  check_case(s, 23);
}

TEST(Attention, EachModifier) {
  AttentionSpec base = spec(DType::f32, 2, 100, 120, 2, 2, 64);
  AttentionSpec s = base;
  s.window_left = 10;
  s.window_right = 5;
  check_case(s, 31);
  s = base;
  s.window_left = 0;  // the diagonal key only
  check_case(s, 32);
  s = base;
  s.softcap = 1.5f;
  check_case(s, 33);
  s = base;
  s.alibi_dims = 1;
  check_case(s, 34);
  s = base;
  s.alibi_dims = 2;
  check_case(s, 35);
  s = base;
  s.block_q = 16;  // blocks smaller than the 64 x 64 tiles and not aligned with them
  s.block_k = 24;
  check_case(s, 36);
  s = base;
  s.block_q = 128;
  s.block_k = 128;
  check_case(s, 37);
  s = base;
  s.dropout_p = 0.3f;
  check_case(s, 38);
  s = base;
  s.softmax_scale = 0.3f;
  check_case(s, 39);
}

TEST(Attention, ModifierPairs) {
  AttentionSpec s = spec(DType::bf16, 2, 90, 90, 4, 2, 64);
  s.causal = true;
  s.alibi_dims = 1;
  check_case(s, 41);
  s = spec(DType::f16, 2, 80, 100, 2, 2, 64);
  s.softcap = 2.f;
  s.window_left = 20;
  s.window_right = 3;
  check_case(s, 42);
  s = spec(DType::f32, 2, 70, 130, 4, 1, 32);
  s.dropout_p = 0.2f;
  s.causal = true;
  check_case(s, 43);
  s = spec(DType::f32, 1, 130, 130, 2, 2, 64);
  s.block_q = 32;
  s.block_k = 32;
  s.causal = true;
  s.softcap = 3.f;
  check_case(s, 44);
}

TEST(Attention, StridedPackedQkvAndOutputs) {
  // q, k, v as views into one packed [b, s, 3, h, d] buffer (last dim contiguous only), and out /
  // dq as views into wider buffers: the tile loaders must honour every stride.
  const int b = 2, s = 40, h = 2, d = 32;
  std::mt19937_64 rng(5);
  HostTensor qkv(DType::bf16, {b, s, 3, h, d});
  qkv.fill_normal(rng);
  auto view = [&](int which) {
    return TensorView::strided(static_cast<uint16_t*>(qkv.data()) + which * h * d, DType::bf16,
                               {b, s, h, d}, {s * 3 * h * d, 3 * h * d, d, 1});
  };
  TensorView q = view(0), k = view(1), v = view(2);
  HostTensor wide(DType::bf16, {b, s, h, 2 * d}), lse(DType::f32, {b, h, s});
  wide.poison();
  TensorView out = TensorView::strided(wide.data(), DType::bf16, {b, s, h, d},
                                       {s * h * 2 * d, h * 2 * d, 2 * d, 1});
  AttentionOptions o;
  o.causal = true;
  attention_forward(q, k, v, out, lse, o);
  // Same problem, contiguous copies.
  HostTensor qc(DType::bf16, {b, s, h, d}), kc(DType::bf16, {b, s, h, d}),
      vc(DType::bf16, {b, s, h, d});
  for (int64_t i = 0; i < qc.numel(); ++i) {
    const int64_t c = i % d, hh = (i / d) % h, t = (i / (d * h)) % s, bb = i / (d * h * s);
    const int64_t src = ((bb * s + t) * 3 * h + hh) * d + c;
    qc.set(i, qkv.get(src));
    kc.set(i, qkv.get(src + h * d));
    vc.set(i, qkv.get(src + 2 * h * d));
  }
  HostTensor outc(DType::bf16, {b, s, h, d}), lsec(DType::f32, {b, h, s});
  attention_forward(qc, kc, vc, outc, lsec, o);
  for (int64_t i = 0; i < outc.numel(); ++i) {
    const int64_t c = i % d, row = i / d;
    ASSERT_EQ(outc.get(i), wide.get(row * 2 * d + c)) << "element " << i;
    ASSERT_TRUE(std::isnan(wide.get(row * 2 * d + d + c))) << "wrote outside the view at " << i;
  }
  EXPECT_TRUE(lse.same_bytes(lsec));
}

TEST(Attention, BackwardIsDeterministic) {
  AttentionSpec s = spec(DType::f32, 2, 150, 150, 4, 2, 64);
  s.causal = true;
  AttentionCase c(s, 9);
  HostTensor out(s.dtype, c.q_shape()), lse(DType::f32, c.lse_shape());
  attention_forward(c.q, c.k, c.v, out, lse, c.opts);
  HostTensor dq[2], dk[2], dv[2];
  for (int r = 0; r < 2; ++r) {
    dq[r].reset(s.dtype, c.q_shape());
    dk[r].reset(s.dtype, c.kv_shape());
    dv[r].reset(s.dtype, c.kv_shape());
    attention_backward(c.q, c.k, c.v, out, c.dout, lse, dq[r], dk[r], dv[r], c.opts);
  }
  EXPECT_TRUE(dq[0].same_bytes(dq[1]));
  EXPECT_TRUE(dk[0].same_bytes(dk[1]));
  EXPECT_TRUE(dv[0].same_bytes(dv[1]));
}

TEST(Attention, DropoutMaskOutMatchesPhiloxAndRate) {
  AttentionSpec s = spec(DType::f32, 2, 50, 70, 3, 3, 32);
  s.dropout_p = 0.25f;
  s.causal = true;  // the mask covers masked elements too
  AttentionCase c(s, 13);
  HostTensor out(s.dtype, c.q_shape()), lse(DType::f32, c.lse_shape());
  HostTensor mask(DType::u8, {2, 3, 50, 70});
  mask.poison();
  c.opts.dropout_mask_out = mask.view();
  attention_forward(c.q, c.k, c.v, out, lse, c.opts);
  const uint32_t thr = dropout_threshold(s.dropout_p);
  ASSERT_EQ(thr, 64u);  // 0.25 is exact in 1/256 units
  int64_t kept = 0;
  for (int b = 0; b < 2; ++b)
    for (int h = 0; h < 3; ++h)
      for (int i = 0; i < 50; ++i)
        for (int j = 0; j < 70; ++j) {
          const uint8_t m = mask.ptr<uint8_t>()[((b * 3 + h) * 50 + i) * 70 + j];
          ASSERT_EQ(m, dropout_keep(c.opts.dropout_seed, c.opts.dropout_offset, b, h, 3, i, j, thr)
                           ? 1
                           : 0);
          kept += m;
        }
  const double n = static_cast<double>(mask.numel());
  EXPECT_NEAR(kept / n, 0.75, 4 * std::sqrt(0.25 * 0.75 / n));
  // A different offset gives a different mask (the offset is part of the counter).
  HostTensor mask2(DType::u8, {2, 3, 50, 70});
  c.opts.dropout_mask_out = mask2.view();
  c.opts.dropout_offset += 1;
  attention_forward(c.q, c.k, c.v, out, lse, c.opts);
  EXPECT_FALSE(mask.same_bytes(mask2));
}

TEST(Attention, FullyMaskedRowsGiveZeroAndMinusInfLse) {
  AttentionSpec s = spec(DType::f32, 1, 40, 10, 1, 1, 32);
  s.causal = true;  // bottom-right: query rows 0..29 see no key
  AttentionCase c(s, 17);
  HostTensor out(s.dtype, c.q_shape()), lse(DType::f32, c.lse_shape());
  out.poison();
  attention_forward(c.q, c.k, c.v, out, lse, c.opts);
  for (int i = 0; i < 30; ++i) {
    EXPECT_EQ(lse.get(i), -INFINITY);
    for (int d = 0; d < 32; ++d) EXPECT_EQ(out.get(i * 32 + d), 0.f);
  }
  EXPECT_TRUE(std::isfinite(lse.get(30)));
}

// Dropout's 8-bit draws (common/philox.h): one Philox call decides 16 columns of a row, column c
// of the group taking byte c & 3 of word c >> 2. The pinned bytes were computed by this code: a
// change of counter, key or byte order shows here. The GPU orders (KeepOrder) are permutations
// of the same 16 bits, and the SWAR byte compare equals a plain one for every byte and threshold.
TEST(Dropout, EightBitDrawLayout) {
  const uint64_t seed = 0x0123456789abcdefull, offset = 0x0000000500000007ull;
  // batch 1, head 2 of 3, row 10, columns 32..47 (col16 = 2)
  const Philox4 d = dropout_draws(seed, offset, 1, 2, 3, 10, 2);
  const Philox4 raw =
      philox4x32<kDropoutPhiloxRounds>(2, 10, 1 * 3 + 2, 7, 0x89abcdefu, 0x01234567u ^ 5u);
  for (int w = 0; w < 4; ++w) EXPECT_EQ(d.x[w], raw.x[w]);
  const uint32_t bytes[16] = {0x71, 0x75, 0x17, 0xb5, 0x80, 0xa1, 0x1b, 0x9c,
                              0xe2, 0x80, 0x83, 0xe4, 0xdb, 0x48, 0xd6, 0xfd};
  for (int c = 0; c < 16; ++c) {
    EXPECT_EQ(dropout_byte(d, c), bytes[c]) << "column " << c;
    EXPECT_EQ(dropout_byte(d, c), (d.x[c / 4] >> (8 * (c % 4))) & 0xFFu);
  }
  EXPECT_EQ(dropout_threshold(0.5f), 128u);
  for (uint32_t t = 0; t < 256; ++t) {
    uint32_t keep = 0;
    for (int c = 0; c < 16; ++c) {
      keep |= uint32_t(bytes[c] >= t) << c;
      EXPECT_EQ(dropout_keep(seed, offset, 1, 2, 3, 10, 32 + c, t), bytes[c] >= t) << c << " " << t;
    }
    ASSERT_EQ(dropout_keep16(d, t), keep) << t;
    uint32_t pairs = 0, inter = 0;  // KeepOrder's documented permutations
    for (int f = 0; f < 4; ++f)
      for (int e = 0; e < 4; ++e)
        pairs |= ((keep >> ((e < 2 ? 2 * f : 8 + 2 * f) + e % 2)) & 1u) << (4 * f + e);
    for (int f = 0; f < 8; ++f)
      for (int e = 0; e < 2; ++e) inter |= ((keep >> (f + 8 * e)) & 1u) << (2 * f + e);
    ASSERT_EQ(dropout_keep16_as<KeepOrder::kPairs>(d, t), pairs) << t;
    ASSERT_EQ(dropout_keep16_as<KeepOrder::kInterleaved>(d, t), inter) << t;
  }
  for (uint32_t x : {0u, 0xFFFFFFFFu, 0x80808080u, 0x7F7F7F7Fu, 0x00FF807Fu, 0x12345678u})
    for (uint32_t t = 0; t < 256; ++t) {
      uint32_t want = 0;
      for (int b = 0; b < 4; ++b) want |= uint32_t(((x >> (8 * b)) & 0xFFu) >= t) << b;
      ASSERT_EQ(dropout_bytes_ge(x, t), want) << std::hex << x << " " << t;
    }
}

// p is quantised to 1/256 (round to nearest, at most 255/256); the keep scale inverts the
// quantised keep probability exactly, so E[keep * scale] = 1.
TEST(Dropout, ThresholdQuantisesP) {
  EXPECT_EQ(dropout_threshold(0.f), 0u);
  EXPECT_EQ(dropout_threshold(0.1f), 26u);  // 25.6
  EXPECT_EQ(dropout_threshold(0.5f), 128u);
  EXPECT_EQ(dropout_threshold(0.75f), 192u);
  EXPECT_EQ(dropout_threshold(0.99f * (1.f / 512)), 0u);  // below half a step: keeps all
  EXPECT_EQ(dropout_threshold(1.01f * (1.f / 512)), 1u);
  EXPECT_EQ(dropout_threshold(0.99999994f), 255u);  // the largest float below 1: clamped
  for (float p : {0.f, 0.1f, 0.3f, 0.5f, 0.9f, 0.99999994f}) {
    const uint32_t t = dropout_threshold(p);
    if (p < 0.99f) {  // not clamped: within half a step
      EXPECT_LE(std::fabs(t / 256.0 - p), 0.5 / 256) << p;
    }
    EXPECT_DOUBLE_EQ(dropout_keep_scale(t) * (256 - t), 256.0) << p;
  }
  EXPECT_EQ(dropout_keep_scale(0), 1.0);
}

// The kept fraction over ~800k elements lies within 4 sigma of the quantised 1 - p, for a p that
// rounds up (0.1), one that rounds down (1/3) and a large one.
TEST(Dropout, KeptFractionMatchesQuantisedP) {
  for (float p : {0.1f, 1.f / 3, 0.9f}) {
    const uint32_t thr = dropout_threshold(p);
    const double keep_p = 1.0 - thr / 256.0;
    int64_t kept = 0, n = 0;
    for (int b = 0; b < 2; ++b)
      for (int h = 0; h < 3; ++h)
        for (int i = 0; i < 256; ++i)
          for (int j = 0; j < 520; ++j, ++n)
            kept += dropout_keep(0x9e3779b97f4a7c15ull, 12345, b, h, 3, i, j, thr);
    EXPECT_NEAR(double(kept) / n, keep_p, 4 * std::sqrt(keep_p * (1 - keep_p) / n)) << "p " << p;
  }
}

// The CPU tile loop's dropout scales equal the per-element rule for any tile split, tiles starting
// mid-group of 16 included: the draws do not depend on the order or grouping of evaluation.
TEST(Dropout, ScalesIndependentOfTileSplit) {
  AttentionShape sh;
  sh.batch = 2, sh.heads = 3, sh.kv_heads = 3, sh.hdim = 32, sh.seqlen_q = 9, sh.seqlen_k = 77;
  AttentionOptions o;
  o.dropout_p = 0.3f, o.dropout_seed = 0xfeedfacecafebeefull, o.dropout_offset = 0x100000003ull;
  const cpu::ScorePolicy pol(sh, o, {0, 0, sh.seqlen_q, sh.seqlen_k}, 1, 2);
  const uint32_t thr = dropout_threshold(o.dropout_p);
  const float scale = static_cast<float>(dropout_keep_scale(thr));
  EXPECT_EQ(pol.keep_scale, scale);
  for (int width : {1, 3, 5, 8, 13, 77}) {
    std::vector<float> z(sh.seqlen_q * sh.seqlen_k, -1.f);
    std::vector<uint8_t> mask(z.size(), 7);
    for (int r0 = 0; r0 < sh.seqlen_q; r0 += 2)
      for (int c0 = 0; c0 < sh.seqlen_k; c0 += width) {
        const int nr = std::min(2, sh.seqlen_q - r0), nc = std::min(width, sh.seqlen_k - c0);
        pol.dropout_scales(&z[r0 * sh.seqlen_k + c0], sh.seqlen_k, r0, nr, c0, nc,
                           &mask[r0 * sh.seqlen_k + c0], sh.seqlen_k);
      }
    for (int i = 0; i < sh.seqlen_q; ++i)
      for (int j = 0; j < sh.seqlen_k; ++j) {
        const bool keep = dropout_keep(o.dropout_seed, o.dropout_offset, 1, 2, 3, i, j, thr);
        ASSERT_EQ(mask[i * sh.seqlen_k + j], keep ? 1 : 0) << width << " " << i << " " << j;
        ASSERT_EQ(z[i * sh.seqlen_k + j], keep ? scale : 0.f) << width << " " << i << " " << j;
      }
  }
}

TEST(Philox, MatchesRandom123KnownAnswers) {
  // Philox4x32-10 known-answer vectors from Random123's kat_vectors.
  Philox4 a = philox4x32<10>(0, 0, 0, 0, 0, 0);
  EXPECT_EQ(a.x[0], 0x6627e8d5u);
  EXPECT_EQ(a.x[1], 0xe169c58du);
  EXPECT_EQ(a.x[2], 0xbc57ac4cu);
  EXPECT_EQ(a.x[3], 0x9b00dbd8u);
  Philox4 b = philox4x32<10>(~0u, ~0u, ~0u, ~0u, ~0u, ~0u);
  EXPECT_EQ(b.x[0], 0x408f276du);
  EXPECT_EQ(b.x[1], 0x41c83b0eu);
  EXPECT_EQ(b.x[2], 0xa20bc7c6u);
  EXPECT_EQ(b.x[3], 0x6d5451fdu);
  Philox4 c =
      philox4x32<10>(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u);
  EXPECT_EQ(c.x[0], 0xd16cfe09u);
  EXPECT_EQ(c.x[1], 0x94fdccebu);
  EXPECT_EQ(c.x[2], 0x5001e420u);
  EXPECT_EQ(c.x[3], 0x24126ea1u);
  // Philox4x32-7 (dropout's rounds), same vectors and source.
  const uint32_t kat7[3][4] = {{0x5f6fb709u, 0x0d893f64u, 0x4f121f81u, 0x4f730a48u},
                               {0x5207ddc2u, 0x45165e59u, 0x4d8ee751u, 0x8c52f662u},
                               {0x4dfccabau, 0x190a87f0u, 0xc47362bau, 0xb6b5242au}};
  const Philox4 r7[3] = {
      philox4x32<7>(0, 0, 0, 0, 0, 0), philox4x32<7>(~0u, ~0u, ~0u, ~0u, ~0u, ~0u),
      philox4x32<7>(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u)};
  for (int v = 0; v < 3; ++v)
    for (int w = 0; w < 4; ++w)
      EXPECT_EQ(r7[v].x[w], kat7[v][w]) << "vector " << v << " word " << w;
}

// FP8 (e4m3) inputs on the CPU: the fp32 forward of the dequantized inputs (descales applied),
// out rounded to bf16 — so out is the fp64 reference to within bf16 rounding, lse within the fp32
// rule. Runs case c quantized (descales per tensor, or per (batch, KV head)) on poisoned outputs.
namespace {
void check_fp8_cpu(AttentionCase& c, bool per_head) {
  SCOPED_TRACE(c.spec.str() + (per_head ? " per-head descales" : ""));
  Fp8Inputs f = quantize_e4m3(c, per_head);
  AttentionOptions o = c.opts;
  o.q_descale = f.q_descale.view(), o.k_descale = f.k_descale.view();
  o.v_descale = f.v_descale.view();
  HostTensor out(DType::bf16, c.q_shape()), lse(DType::f32, c.lse_shape());
  out.poison();
  lse.poison();
  attention_forward(f.q8, f.k8, f.v8, out, lse, o);
  HostTensor ref_out, ref_lse, lp_out, lp_lse;
  c.reference_forward(ref_out, ref_lse, DType::f64);
  c.reference_forward(lp_out, lp_lse, DType::f32);
  double worst = 0;
  for (int64_t i = 0; i < out.numel(); ++i) {
    const double r = ref_out.ptr<double>()[i], e = std::fabs(out.get(i) - r);
    worst = std::max(worst, e / (std::ldexp(std::fabs(r), -8) + 1e-6));
  }
  EXPECT_LE(worst, 1.0) << "out differs from the reference by more than bf16 rounding";
  ErrorBound el = bound(lse, lp_lse, ref_lse, 1e-4);
  EXPECT_TRUE(el.ok()) << "lse error " << el.error << " > " << el.tolerance;
}
}  // namespace

// Plain, causal, GQA and the score variants (the CPU takes every option).
TEST(Attention, Fp8ForwardMatchesReference) {
  std::vector<AttentionSpec> specs = {spec(DType::f32, 2, 37, 53, 4, 2, 64),
                                      spec(DType::f32, 1, 70, 45, 2, 1, 128),
                                      spec(DType::f32, 1, 1, 77, 2, 2, 32)};
  specs[1].causal = true;
  AttentionSpec var = spec(DType::f32, 1, 41, 41, 2, 2, 48);
  var.window_left = 7, var.softcap = 20.f, var.alibi_dims = 1, var.causal = true;
  specs.push_back(var);
  uint64_t seed = 900;
  for (bool per_head : {false, true}) {  // descales [1], then [batch, kv_heads]
    for (const AttentionSpec& s : specs) {
      AttentionCase c(s, seed++);
      check_fp8_cpu(c, per_head);
    }
  }
}

// Varlen fp8 on the CPU: per-tensor descales (per-head ones need a dense batch).
TEST(Attention, Fp8VarlenMatchesReference) {
  AttentionSpec s = spec(DType::f32, 0, 0, 0, 4, 2, 32);
  s.causal = true;
  s.lens_q = {1, 30, 17, 0}, s.lens_k = {20, 30, 5, 9};
  AttentionCase c(s, 950);
  check_fp8_cpu(c, false);
}

// FP8 inputs and the bf16 out as strided views (head-major physical layout, padded rows) give the
// same bits as the contiguous call.
TEST(Attention, Fp8StridedViewsMatchContiguous) {
  AttentionCase c(spec(DType::f32, 2, 19, 23, 4, 2, 32), 950);
  Fp8Inputs f = quantize_e4m3(c);
  AttentionOptions o = c.opts;
  o.q_descale = f.q_descale.view(), o.k_descale = f.k_descale.view();
  o.v_descale = f.v_descale.view();
  HostTensor out(DType::bf16, c.q_shape()), lse(DType::f32, c.lse_shape());
  attention_forward(f.q8, f.k8, f.v8, out, lse, o);
  // [b, s, h, d] seen through a [b, h, s, d + 16] buffer.
  auto head_major = [](const HostTensor& t, HostTensor& buf) {
    const TensorView& v = t.view();
    const int64_t b = v.shape[0], s = v.shape[1], h = v.shape[2], d = v.shape[3];
    buf.reset(v.dtype, {b, h, s, d + 16});
    TensorView r = TensorView::strided(buf.data(), v.dtype, {b, s, h, d},
                                       {h * s * (d + 16), d + 16, s * (d + 16), 1});
    for (int64_t i0 = 0; i0 < b; ++i0)
      for (int64_t i1 = 0; i1 < s; ++i1)
        for (int64_t i2 = 0; i2 < h; ++i2)
          for (int64_t i3 = 0; i3 < d; ++i3)
            std::memcpy(static_cast<uint8_t*>(buf.data()) +
                            (i0 * r.stride[0] + i1 * r.stride[1] + i2 * r.stride[2] + i3) *
                                dtype_size(v.dtype),
                        t.bytes() + (((i0 * s + i1) * h + i2) * d + i3) * dtype_size(v.dtype),
                        dtype_size(v.dtype));
    return r;
  };
  HostTensor qb, kb, vb, ob, out2(DType::bf16, c.q_shape());
  const TensorView qs = head_major(f.q8, qb), ks = head_major(f.k8, kb), vs = head_major(f.v8, vb);
  const TensorView os = head_major(out2, ob);
  HostTensor lse2(DType::f32, c.lse_shape());
  attention_forward(qs, ks, vs, os, lse2, o);
  for (int64_t i0 = 0; i0 < c.spec.batch; ++i0)
    for (int64_t i1 = 0; i1 < c.spec.seqlen_q; ++i1)
      for (int64_t i2 = 0; i2 < c.spec.heads; ++i2)
        for (int64_t i3 = 0; i3 < c.spec.hdim; ++i3) {
          const int64_t dense = ((i0 * c.spec.seqlen_q + i1) * c.spec.heads + i2) * c.spec.hdim + i3;
          const int64_t strided =
              i0 * os.stride[0] + i1 * os.stride[1] + i2 * os.stride[2] + i3;
          ASSERT_EQ(out.ptr<uint16_t>()[dense], ob.ptr<uint16_t>()[strided]);
        }
  EXPECT_TRUE(lse2.same_bytes(lse));
}
