// Every attention argument check: the Error message starts with the argument's name, and no
// output (out, lse, dq, dk, dv, dropout_mask_out) was touched (sentinel bytes unchanged).
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>

#include "common/host_tensor.h"
#include "flashkit/attention.h"
#include "flashkit/errors.h"

using namespace flashkit;

namespace {

class AttentionValidation : public ::testing::Test {
 protected:
  static constexpr int B = 2, S = 16, H = 4, HK = 2, D = 32;
  std::mt19937_64 rng{3};
  HostTensor q{DType::f32, {B, S, H, D}}, k{DType::f32, {B, S, HK, D}},
      v{DType::f32, {B, S, HK, D}};
  HostTensor dout{DType::f32, {B, S, H, D}}, out_in{DType::f32, {B, S, H, D}},
      lse_in{DType::f32, {B, H, S}};
  HostTensor out{DType::f32, {B, S, H, D}}, lse{DType::f32, {B, H, S}};
  HostTensor dq{DType::f32, {B, S, H, D}}, dk{DType::f32, {B, S, HK, D}},
      dv{DType::f32, {B, S, HK, D}};
  HostTensor snapshot[5];
  AttentionOptions o;

  void SetUp() override {
    for (HostTensor* t : {&q, &k, &v, &dout, &out_in, &lse_in}) t->fill_normal(rng);
    int i = 0;
    for (HostTensor* t : {&out, &lse, &dq, &dk, &dv}) {
      t->fill(1234.5f);  // sentinel
      snapshot[i++] = *t;
    }
  }

  // `call` must throw an Error starting with `prefix` and leave every output as it was.
  void expect_error(const std::function<void()>& call, const std::string& prefix) {
    try {
      call();
      ADD_FAILURE() << "no error; expected one starting with '" << prefix << "'";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(prefix, 0), 0u) << "message: " << e.what();
    }
    int i = 0;
    for (HostTensor* t : {&out, &lse, &dq, &dk, &dv})
      EXPECT_TRUE(t->same_bytes(snapshot[i++]))
          << "an output was written before the error (" << prefix << ")";
  }
  void fwd(const TensorView& q_, const TensorView& k_, const TensorView& v_, const TensorView& out_,
           const TensorView& lse_, const std::string& prefix) {
    expect_error([&] { attention_forward(q_, k_, v_, out_, lse_, o); }, prefix);
  }
  void fwd(const std::string& prefix) { fwd(q, k, v, out, lse, prefix); }
  void bwd(const std::string& prefix) {
    expect_error([&] { attention_backward(q, k, v, out_in, dout, lse_in, dq, dk, dv, o); }, prefix);
  }
};

TensorView with_dtype(TensorView t, DType d) {
  t.dtype = d;
  return t;
}
TensorView with_shape(TensorView t, int dim, int64_t size) {
  t.shape[dim] = size;
  return t;
}
TensorView with_stride(TensorView t, int dim, int64_t stride) {
  t.stride[dim] = stride;
  return t;
}

}  // namespace

TEST_F(AttentionValidation, ValidCallsSucceed) {
  EXPECT_NO_THROW(attention_forward(q, k, v, out, lse, o));
  EXPECT_NO_THROW(attention_backward(q, k, v, out_in, dout, lse_in, dq, dk, dv, o));
  EXPECT_EQ(attention_backward_workspace_bytes(q, k, o), 0u);
}

TEST_F(AttentionValidation, Dtypes) {
  fwd(with_dtype(q, DType::f64), with_dtype(k, DType::f64), with_dtype(v, DType::f64), out, lse,
      "q:");
  fwd(q, with_dtype(k, DType::f16), v, out, lse, "k:");
  fwd(q, k, with_dtype(v, DType::bf16), out, lse, "v:");
  fwd(q, k, v, with_dtype(out, DType::f16), lse, "out:");
  fwd(q, k, v, out, with_dtype(lse, DType::f16), "lse:");
  HostTensor dq16(DType::f16, {B, S, H, D});
  expect_error(
      [&] {
        attention_backward(q, k, v, out_in, with_dtype(dout, DType::f16), lse_in, dq, dk, dv, o);
      },
      "dout:");
  expect_error([&] { attention_backward(q, k, v, out_in, dout, lse_in, dq16, dk, dv, o); }, "dq:");
}

TEST_F(AttentionValidation, Shapes) {
  fwd(q, with_shape(k, 0, 1), with_shape(v, 0, 1), out, lse, "k:");    // batch
  fwd(q, with_shape(k, 3, 16), with_shape(v, 3, 16), out, lse, "k:");  // hdim
  fwd(q, k, with_shape(v, 1, 8), out, lse, "v:");                      // v unlike k
  fwd(q, k, v, with_shape(out, 1, 8), lse, "out:");
  fwd(q, k, v, out, with_shape(lse, 2, 8), "lse:");
  HostTensor k3(DType::f32, {B, S, 3, D}), v3(DType::f32, {B, S, 3, D});
  fwd(q, k3, v3, out, lse, "k:");  // 4 heads % 3 kv heads
  HostTensor q3(DType::f32, {B, S, D});
  fwd(q3, k, v, out, lse, "q:");  // 3-D without cu_seqlens
  expect_error(
      [&] { attention_backward(q, k, v, out_in, dout, lse_in, dq, with_shape(dk, 1, 8), dv, o); },
      "dk:");
  expect_error(
      [&] { attention_backward(q, k, v, out_in, dout, lse_in, dq, dk, with_shape(dv, 2, 1), o); },
      "dv:");
}

TEST_F(AttentionValidation, UnsupportedHdim) {
  for (int d : {4, 12, 264}) {
    HostTensor qd(DType::f32, {B, S, H, d}), kd(DType::f32, {B, S, HK, d}),
        vd(DType::f32, {B, S, HK, d});
    HostTensor od(DType::f32, {B, S, H, d});
    expect_error([&] { attention_forward(qd, kd, vd, od, lse, o); }, "q:");
    expect_error([&] { attention_backward_workspace_bytes(qd, kd, o); }, "q:");
  }
}

TEST_F(AttentionValidation, Strides) {
  fwd(with_stride(q, 3, 2), k, v, out, lse, "q:");        // last dim not contiguous
  fwd(q, with_stride(k, 1, -HK * D), v, out, lse, "k:");  // negative stride
  fwd(q, k, v, with_stride(out, 3, 2), lse, "out:");
  fwd(q, k, v, out, with_stride(lse, 2, 2), "lse:");
  expect_error(
      [&] { attention_backward(q, k, v, out_in, dout, lse_in, with_stride(dq, 3, 0), dk, dv, o); },
      "dq:");
}

TEST_F(AttentionValidation, Devices) {
  TensorView kc = k.view();
  kc.device = Device::cuda;
  fwd(q, kc, v, out, lse, "k:");
  TensorView lc = lse.view();
  lc.device = Device::cuda;
  fwd(q, k, v, out, lc, "lse:");
#ifndef FLASHKIT_WITH_CUDA
  auto on_cuda = [](TensorView t) {
    t.device = Device::cuda;
    return t;
  };
  fwd(on_cuda(q), on_cuda(k), on_cuda(v), on_cuda(out), on_cuda(lse), "q:");
#endif
}

TEST_F(AttentionValidation, Options) {
  o.dropout_p = 1.f;
  fwd("dropout_p:");
  o.dropout_p = -0.1f;
  bwd("dropout_p:");
  o = {};
  o.window_left = -2;
  fwd("window_left:");
  o = {};
  o.window_right = -5;
  bwd("window_right:");
  o = {};
  o.softcap = -1.f;
  fwd("softcap:");
  o = {};
  o.softmax_scale = INFINITY;
  fwd("softmax_scale:");
  o = {};
  HostTensor slopes(DType::f32, {H + 1}), slopes64(DType::f64, {H});
  o.alibi_slopes = slopes.view();
  fwd("alibi_slopes:");
  o.alibi_slopes = slopes64.view();
  bwd("alibi_slopes:");
  o = {};
  HostTensor bm(DType::u8, {B, H, 1, 2}), bm_f(DType::f32, {B, H, 1, 1});
  o.block_mask = bm.view();  // seqlen 16 with 128-blocks: 1 x 1 blocks expected
  fwd("block_mask:");
  o.block_mask = bm_f.view();
  fwd("block_mask:");
  HostTensor bm1(DType::u8, {1, 1, 1, 1});
  o.block_mask = bm1.view();
  o.block_mask_block_q = 0;
  fwd("block_mask_block_q:");
  o = {};
  HostTensor mask(DType::u8, {B, H, S, S + 1});
  mask.fill(7.f);
  HostTensor mask_snap = mask;
  o.dropout_p = 0.1f;
  o.dropout_mask_out = mask.view();
  fwd("dropout_mask_out:");
  EXPECT_TRUE(mask.same_bytes(mask_snap));
}

TEST_F(AttentionValidation, Varlen) {
  HostTensor qv(DType::f32, {20, H, D}), kv(DType::f32, {24, HK, D}), vv(DType::f32, {24, HK, D});
  HostTensor ov(DType::f32, {20, H, D}), lv(DType::f32, {H, 20});
  HostTensor cq(DType::i32, {3}), ck(DType::i32, {3}), c64(DType::i64, {3}), ck4(DType::i32, {4});
  int32_t good_q[] = {0, 8, 20}, good_k[] = {0, 10, 24};
  std::copy(good_q, good_q + 3, cq.ptr<int32_t>());
  std::copy(good_k, good_k + 3, ck.ptr<int32_t>());
  ov.fill(5.f);
  lv.fill(5.f);
  HostTensor ov0 = ov, lv0 = lv;
  auto run = [&](const std::string& prefix) {
    expect_error([&] { attention_forward(qv, kv, vv, ov, lv, o); }, prefix);
    EXPECT_TRUE(ov.same_bytes(ov0) && lv.same_bytes(lv0)) << prefix;
  };
  o.cu_seqlens_q = cq.view();
  run("cu_seqlens_k:");  // only one given
  o.cu_seqlens_k = c64.view();
  run("cu_seqlens_k:");  // dtype
  o.cu_seqlens_k = ck4.view();
  run("cu_seqlens_k:");  // batch differs from cu_seqlens_q
  o.cu_seqlens_k = ck.view();
  EXPECT_NO_THROW(attention_forward(qv, kv, vv, ov, lv, o));
  ov = ov0;
  lv = lv0;
  cq.ptr<int32_t>()[1] = 21;  // decreasing
  run("cu_seqlens_q:");
  cq.ptr<int32_t>()[1] = 8;
  cq.ptr<int32_t>()[0] = 1;  // not starting at 0
  run("cu_seqlens_q:");
  cq.ptr<int32_t>()[0] = 0;
  ck.ptr<int32_t>()[2] = 25;  // beyond k's 24 tokens
  run("cu_seqlens_k:");
  ck.ptr<int32_t>()[2] = 24;
  o.max_seqlen_q = 5;  // shorter than the longest query sequence (12)
  run("max_seqlen_q:");
  o.max_seqlen_q = 0;
  HostTensor lbad(DType::f32, {B, H, 12});
  expect_error([&] { attention_forward(qv, kv, vv, ov, lbad, o); }, "lse:");
  HostTensor mask(DType::u8, {2, H, 12, 14});
  o.dropout_mask_out = mask.view();
  run("dropout_mask_out:");
}

TEST_F(AttentionValidation, OutputsOverlappingInputs) {
  fwd(q, k, v, q, lse, "out:");
  TensorView lse_in_k = TensorView::of(k.data(), DType::f32, {B, H, S});
  fwd(q, k, v, out, lse_in_k, "lse:");
  expect_error([&] { attention_backward(q, k, v, out_in, dout, lse_in, dout, dk, dv, o); }, "dq:");
  expect_error([&] { attention_backward(q, k, v, out_in, dout, lse_in, dq, dk, dk, o); }, "dv:");
  TensorView dk_in_v = TensorView::of(v.data(), DType::f32, {B, S, HK, D});
  expect_error([&] { attention_backward(q, k, v, out_in, dout, lse_in, dq, dk_in_v, dv, o); },
               "dk:");
}

// FP8 (e4m3) inputs: the forward takes them with a bf16 out and optional fp32 scalar descales;
// everything else is an Error naming the argument, nothing written.
TEST_F(AttentionValidation, Fp8) {
  HostTensor q8(DType::e4m3, {B, S, H, D}), k8(DType::e4m3, {B, S, HK, D}),
      v8(DType::e4m3, {B, S, HK, D}), ob(DType::bf16, {B, S, H, D}), d1(DType::f32, {1}),
      d2(DType::f32, {2});
  for (HostTensor* t : {&q8, &k8, &v8}) t->fill_normal(rng);
  d1.set(0, 0.5f);
  fwd(q8, k8, v8, out, lse, "out:");            // out must be bf16
  fwd(q8, k, v8, ob, lse, "k:");                 // mixed dtypes
  fwd(q8, k8, with_dtype(v, DType::bf16), ob, lse, "v:");
  o.q_descale = d1.view();
  fwd(q, k, v, out, lse, "q_descale:");          // descales need fp8 inputs
  o.q_descale = d2.view();
  fwd(q8, k8, v8, ob, lse, "q_descale:");        // one element or [batch, kv_heads]
  HostTensor dbh(DType::f32, {B, H}), dbk(DType::f32, {B, HK});
  o.q_descale = dbh.view();
  fwd(q8, k8, v8, ob, lse, "q_descale:");        // per KV head, not per query head
  o.q_descale = {};
  {  // per-(batch, KV head) descales need a dense batch
    HostTensor q8v(DType::e4m3, {B * S, H, D}), k8v(DType::e4m3, {B * S, HK, D}),
        obv(DType::bf16, {B * S, H, D}), lsev(DType::f32, {H, B * S}), cu(DType::i32, {B + 1});
    for (int b = 0; b <= B; ++b) cu.ptr<int32_t>()[b] = b * S;
    o.cu_seqlens_q = o.cu_seqlens_k = cu.view();
    o.v_descale = dbk.view();
    fwd(q8v, k8v, k8v, obv, lsev, "v_descale:");
    o.v_descale = {};
    o.cu_seqlens_q = o.cu_seqlens_k = {};
  }
  o.v_descale = with_dtype(d1, DType::f16);
  fwd(q8, k8, v8, ob, lse, "v_descale:");        // fp32
  o.v_descale = {};
  HostTensor q8d(DType::e4m3, {B, S, H, 40}), k8d(DType::e4m3, {B, S, HK, 40}),
      ob40(DType::bf16, {B, S, H, 40});
  fwd(q8d, k8d, k8d, ob40, lse, "q:");           // hdim a multiple of 16
  expect_error([&] { attention_backward(q8, k8, v8, ob, ob, lse_in, dq, dk, dv, o); }, "q:");
  expect_error([&] { attention_backward_workspace_bytes(q8, k8, o); }, "q:");
  EXPECT_EQ(attention_forward_workspace_bytes(q8, k8, o), 0u);  // the CPU needs none
  // A valid call writes out (bf16) and lse; per-(batch, KV head) descales too.
  HostTensor ob2(DType::bf16, {B, S, H, D});
  o.k_descale = d1.view();
  attention_forward(q8, k8, v8, ob2, lse, o);
  for (int64_t i = 0; i < ob2.numel(); ++i) ASSERT_TRUE(std::isfinite(ob2.get(i)));
  for (int64_t i = 0; i < dbk.numel(); ++i) dbk.set(i, 0.25f * float(i + 1));
  o.v_descale = dbk.view();
  ob2.poison();
  attention_forward(q8, k8, v8, ob2, lse, o);
  for (int64_t i = 0; i < ob2.numel(); ++i) ASSERT_TRUE(std::isfinite(ob2.get(i)));
  o.v_descale = {};
}
