// GPU attention forward and backward (src/cuda/attention/) against the fp64 CPU reference on fresh
// random inputs with DESIGN.md's tolerance rule; outputs poisoned first. Covers dtypes, head-dim
// buckets and in-between dims, causal alignment, odd lengths, GQA/MQA, varlen, strided views,
// deterministic bitwise reproducibility, the score variants (sliding window, softcap, ALiBi,
// dropout, block mask: alone, in pairs, with causal / GQA / varlen), dropout's mask against the
// CPU's bit for bit, bad input, and on Hopper both kernel families of the forward and the backward
// (FLASHKIT_ATTENTION_PATH). Tests named *Small* run under compute-sanitizer (tests/gpu/run).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

#include "attention_case.h"
#include "common/philox.h"
#include "device_tensor.h"
#include "flashkit/errors.h"
#include "scoped_env.h"

using namespace flashkit;
using namespace flashkit::testing;

namespace {

// Minimal builds: FLASHKIT_KERNELS=minimal, or minimal-f16 (the same kernels in f16 too).
bool minimal_build() { return build_info().kernel_set.rfind("minimal", 0) == 0; }

// Whether the build holds the kernels a case needs: minimal builds keep bf16 (minimal-f16: and
// f16) hdim 33..64 and 97..128, and at 193..256 only the Hopper kernels (plain scores, window,
// ALiBi and bf16 softcap, forward and backward; no sm80 kernel).
bool compiled(DType dt, int hdim, bool hopper_only = false) {
  if (!minimal_build()) return true;
  const bool dtype = dt == DType::bf16 || build_info().kernel_set == "minimal-f16";
  return dtype &&
         ((hdim > 32 && hdim <= 64) || (hdim > 96 && hdim <= 128) || (hopper_only && hdim > 192));
}

// A device copy of a [b, s, h, d] host tensor in a head-major physical layout [b, h, s, d + 8],
// seen through a strided view with the logical shape: every stride differs from the dense one.
class StridedDevice {
 public:
  explicit StridedDevice(const HostTensor& h) {
    const auto& v = h.view();
    b_ = v.shape[0], s_ = v.shape[1], hh_ = v.shape[2], d_ = v.shape[3];
    phys_.reset(v.dtype, {b_, hh_, s_, d_ + 8});
    phys_.fill(0.f);
    for (int64_t b = 0; b < b_; ++b)
      for (int64_t s = 0; s < s_; ++s)
        for (int64_t x = 0; x < hh_; ++x)
          std::memcpy(static_cast<uint8_t*>(phys_.data()) + elem(b, s, x) * 2, h.bytes() + (((b * s_ + s) * hh_ + x) * d_) * 2,
                      d_ * 2);
    dev_.upload(phys_);
    view_ = TensorView::strided(dev_.view().data, v.dtype, {b_, s_, hh_, d_},
                                {hh_ * s_ * (d_ + 8), d_ + 8, s_ * (d_ + 8), 1}, Device::cuda,
                                dev_.view().device_id);
  }
  void poison() { dev_.poison(); }
  void download(HostTensor& h) {
    dev_.download(phys_);
    h.reset(phys_.dtype(), {b_, s_, hh_, d_});
    for (int64_t b = 0; b < b_; ++b)
      for (int64_t s = 0; s < s_; ++s)
        for (int64_t x = 0; x < hh_; ++x)
          std::memcpy(static_cast<uint8_t*>(h.data()) + (((b * s_ + s) * hh_ + x) * d_) * 2,
                      phys_.bytes() + elem(b, s, x) * 2, d_ * 2);
  }
  const TensorView& view() const { return view_; }

 private:
  int64_t elem(int64_t b, int64_t s, int64_t x) const { return ((b * hh_ + x) * s_ + s) * (d_ + 8); }
  TensorView view_;
  int64_t b_, s_, hh_, d_;
  HostTensor phys_;
  DeviceTensor dev_;
};

struct GpuRun {
  HostTensor out, lse, dq, dk, dv;
};

// Runs forward + backward of case `c` on the GPU (dense tensors, or strided views) and returns
// the downloaded outputs.
GpuRun run_gpu(const AttentionCase& c, bool strided, bool deterministic, bool backward = true) {
  const AttentionSpec& s = c.spec;
  AttentionOptions o = c.opts;
  o.deterministic = deterministic;
  DeviceTensor cu_q, cu_k;
  if (s.varlen()) {
    cu_q.upload(c.cu_q);
    cu_k.upload(c.cu_k);
    o.cu_seqlens_q = cu_q.view();
    o.cu_seqlens_k = cu_k.view();
    o.max_seqlen_q = s.seqlen_q;
    o.max_seqlen_k = s.seqlen_k;
  }
  DeviceTensor alibi, block_mask;
  if (c.opts.alibi_slopes.defined()) {
    alibi.upload(c.alibi);
    o.alibi_slopes = alibi.view();
  }
  if (c.opts.block_mask.defined()) {
    block_mask.upload(c.block_mask);
    o.block_mask = block_mask.view();
  }
  GpuRun r;
  r.out.reset(s.dtype, c.q_shape());
  r.lse.reset(DType::f32, c.lse_shape());
  r.dq.reset(s.dtype, c.q_shape());
  r.dk.reset(s.dtype, c.kv_shape());
  r.dv.reset(s.dtype, c.kv_shape());
  DeviceTensor lse(r.lse);
  lse.poison();
  if (strided) {
    StridedDevice q(c.q), k(c.k), v(c.v), dout(c.dout), out(r.out), dq(r.dq), dk(r.dk), dv(r.dv);
    for (StridedDevice* t : {&out, &dq, &dk, &dv}) t->poison();
    attention_forward(q.view(), k.view(), v.view(), out.view(), lse, o);
    if (backward) attention_backward(q.view(), k.view(), v.view(), out.view(), dout.view(), lse, dq.view(), dk.view(), dv.view(), o);
    FK_CUDA_CHECK(cudaDeviceSynchronize());
    out.download(r.out);
    dq.download(r.dq);
    dk.download(r.dk);
    dv.download(r.dv);
  } else {
    DeviceTensor q(c.q), k(c.k), v(c.v), dout(c.dout), out(r.out), dq(r.dq), dk(r.dk), dv(r.dv);
    for (DeviceTensor* t : {&out, &dq, &dk, &dv}) t->poison();
    attention_forward(q, k, v, out, lse, o);
    if (backward) attention_backward(q, k, v, out, dout, lse, dq, dk, dv, o);
    FK_CUDA_CHECK(cudaDeviceSynchronize());
    out.download(r.out);
    dq.download(r.dq);
    dk.download(r.dk);
    dv.download(r.dv);
  }
  lse.download(r.lse);
  return r;
}

void expect_close(const char* name, const HostTensor& got, const HostTensor& lp, const HostTensor& ref,
                  double floor = 1e-5) {
  ErrorBound e = bound(got, lp, ref, floor);
  EXPECT_TRUE(e.ok()) << name << " error " << e.error << " > tolerance " << e.tolerance;
  if (getenv("FK_VERBOSE")) printf("   %s %.3g / %.3g\n", name, e.error, e.tolerance);
}

// Out and LSE of run g against the fp64 reference (DESIGN.md's rule at the case's dtype).
void expect_forward_close(const AttentionCase& c, const GpuRun& g) {
  HostTensor ref_out, ref_lse, lp_out, lp_lse;
  c.reference_forward(ref_out, ref_lse, DType::f64);
  c.reference_forward(lp_out, lp_lse, c.spec.dtype);
  expect_close("out", g.out, lp_out, ref_out);
  expect_close("lse", g.lse, lp_lse, ref_lse, 1e-4);
}

// The gradients of run g against the fp64 reference; dk_floor as in check_case.
void expect_grads_close(const AttentionCase& c, const GpuRun& g, double dk_floor = 1e-5) {
  HostTensor rq, rk, rv, lq, lk, lv;
  c.reference_backward(rq, rk, rv, DType::f64);
  c.reference_backward(lq, lk, lv, c.spec.dtype);
  expect_close("dq", g.dq, lq, rq);
  expect_close("dk", g.dk, lk, rk, dk_floor);
  expect_close("dv", g.dv, lv, rv);
}

// Runs the case (forward, and the backward unless told not to) and checks it against the
// reference; the caller knows the build has its kernels.
void run_and_check(const AttentionSpec& s, uint64_t seed, bool strided = false, bool backward = true) {
  AttentionCase c(s, seed);
  GpuRun g = run_gpu(c, strided, false, backward);
  expect_forward_close(c, g);
  if (!backward) return;
  // One key and no mask: softmax is constant, so the exact dK is 0 and every implementation
  // returns only fp32 rounding noise of dS = P (dP - D) summed over seqlen_q rows; the naive path
  // happens to compute dP and D identically (noise 0), so the 1e-5 floor is raised for this case.
  const bool constant_softmax = s.seqlen_k == 1 && !s.causal && !s.varlen();
  expect_grads_close(c, g, constant_softmax ? 1e-4 : 1e-5);
}

void check_case(const AttentionSpec& s, uint64_t seed, bool strided = false, bool backward = true,
                bool hopper_only = false) {
  SCOPED_TRACE(s.str() + (strided ? " strided" : ""));
  if (!compiled(s.dtype, s.hdim, hopper_only))
    GTEST_SKIP() << "kernel not in this build (minimal)";
  run_and_check(s, seed, strided, backward);
}

// Deterministic mode: `runs` backward runs give the same bits, and they are right.
void check_deterministic(const AttentionSpec& s, uint64_t seed, int runs = 3) {
  AttentionCase c(s, seed);
  GpuRun first = run_gpu(c, false, true);
  for (int i = 1; i < runs; ++i) {
    GpuRun again = run_gpu(c, false, true);
    EXPECT_TRUE(again.dq.same_bytes(first.dq)) << "dq differs in run " << i + 1;
    EXPECT_TRUE(again.dk.same_bytes(first.dk)) << "dk differs in run " << i + 1;
    EXPECT_TRUE(again.dv.same_bytes(first.dv)) << "dv differs in run " << i + 1;
  }
  expect_grads_close(c, first);
}

AttentionSpec spec(DType dt, int b, int sq, int sk, int h, int hk, int d, bool causal = false) {
  AttentionSpec s;
  s.dtype = dt, s.batch = b, s.seqlen_q = sq, s.seqlen_k = sk;
  s.heads = h, s.kv_heads = hk, s.hdim = d, s.causal = causal;
  return s;
}

// Sets FLASHKIT_ATTENTION_PATH (which kernels run: auto, sm80 or sm90) for a scope.
struct ScopedPath : ScopedEnv {
  explicit ScopedPath(const char* path) : ScopedEnv("FLASHKIT_ATTENTION_PATH", path) {}
};

bool hopper_device() {
  int major = 0, minor = 0;
  FK_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
  FK_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0));
  return major == 9 && minor == 0;
}

// Varlen bf16 with GQA 2:1; the lengths (0 allowed) set the batch.
AttentionSpec varlen_spec(int d, std::vector<int> lens_q, std::vector<int> lens_k,
                          bool causal) {
  AttentionSpec s = spec(DType::bf16, 0, 0, 0, 4, 2, d, causal);
  s.lens_q = std::move(lens_q);
  s.lens_k = std::move(lens_k);
  return s;
}

// Runs each case with the Hopper forward demanded (an Error if it did not run) and with the
// sm80-class kernels forced; both must match the reference. The backward runs on the forward's
// LSE and O, so it checks them too; under "sm90" it is the Hopper backward for dense batches,
// score variants and varlen included (combinations of modifiers in minimal builds and score
// variants at hdim 256 fall back to the sm80 one). Minimal builds run hdim 193..256 cases on the
// Hopper kernels alone.
void check_both_paths(const std::vector<std::pair<AttentionSpec, bool>>& cases, uint64_t seed) {
  if (!hopper_device()) GTEST_SKIP() << "no sm_90 device: the Hopper forward cannot run";
  for (const char* path : {"sm90", "sm80"}) {
    SCOPED_TRACE(path);
    ScopedPath scoped(path);
    const bool sm90 = std::string(path) == "sm90";
    for (const auto& [s, backward] : cases) {
      ++seed;
      const bool hopper_only = !compiled(s.dtype, s.hdim) && compiled(s.dtype, s.hdim, true);
      if (hopper_only && !sm90) continue;
      check_case(s, seed, false, backward, hopper_only);
    }
  }
}

}  // namespace

class AttentionGpuHdim : public ::testing::TestWithParam<std::tuple<DType, int, bool>> {};

// Every bucket (32 .. 256) and dims between buckets (zero-padded tails), GQA, sq != sk.
TEST_P(AttentionGpuHdim, ForwardBackwardMatchReference) {
  auto [dt, d, causal] = GetParam();
  check_case(spec(dt, 2, 127, 200, 4, 2, d, causal), 1000 + d * 2 + causal);
}

// Prefixed like the suites so a runner filter 'AttentionGpu*' selects them too.
INSTANTIATE_TEST_SUITE_P(AttentionGpu, AttentionGpuHdim,
                         ::testing::Combine(::testing::Values(DType::bf16, DType::f16),
                                            ::testing::Values(32, 40, 64, 72, 96, 128, 160, 192, 256),
                                            ::testing::Bool()));

TEST(AttentionGpu, LengthsAndCausalAlignment) {
  for (bool causal : {false, true})
    for (auto [sq, sk] : {std::pair{1, 1}, std::pair{1, 1000}, std::pair{1000, 1}, std::pair{17, 127},
                          std::pair{127, 17}, std::pair{1000, 1000}, std::pair{17, 1000}})
      check_case(spec(DType::bf16, 1, sq, sk, 2, 1, 128, causal), sq * 7 + sk + causal);
}

TEST(AttentionGpu, MultiQueryAndGroupedQuery) {
  check_case(spec(DType::bf16, 2, 200, 300, 8, 1, 64, true), 11);
  check_case(spec(DType::bf16, 2, 300, 200, 6, 3, 128, false), 12);
}

TEST(AttentionGpu, Varlen) {
  for (bool causal : {false, true}) {
    AttentionSpec s = spec(DType::bf16, 0, 0, 0, 4, 2, 64, causal);
    s.lens_q = {1, 130, 257, 64};
    s.lens_k = {65, 17, 300, 64};
    check_case(s, 21 + causal);
  }
}

TEST(AttentionGpu, StridedViews) {
  check_case(spec(DType::bf16, 2, 150, 130, 4, 2, 64, true), 31, /*strided=*/true);
  check_case(spec(DType::bf16, 2, 129, 257, 2, 2, 128, false), 32, /*strided=*/true);
}

TEST(AttentionGpu, SoftmaxScale) {
  AttentionSpec s = spec(DType::bf16, 1, 100, 120, 2, 2, 64, true);
  s.softmax_scale = 0.3f;
  check_case(s, 41);
}

// Deterministic mode: three backward runs give the same bits, and they are right.
TEST(AttentionGpu, DeterministicBitwiseEqual) {
  for (bool causal : {false, true}) check_deterministic(spec(DType::bf16, 2, 513, 700, 4, 2, 64, causal), 51 + causal);
}

// Score variants (GeneralScores): one spec per variant alone and in pairs, run for each dtype and
// the two common head dims. Odd lengths with sq != sk, so the window and ALiBi distance are
// bottom-right aligned and partial tiles sit at both window edges; block masks (blocks of 128 on
// cuda) get a 3 x 5 grid with about 1/3 of the blocks dropped.
struct VariantCase {
  const char* name;
  bool causal;
  int window_left, window_right;
  float softcap;
  int alibi_dims;
  float dropout_p = 0.f;
  int block_q = 0, block_k = 0;  // block mask (random, ~1/3 zeros) with these blocks when > 0
};

AttentionSpec variant_spec(DType dt, int d, const VariantCase& v, int sq = 331, int sk = 517) {
  AttentionSpec s = spec(dt, 2, sq, sk, 4, 2, d, v.causal);
  s.window_left = v.window_left, s.window_right = v.window_right;
  s.softcap = v.softcap, s.alibi_dims = v.alibi_dims;
  s.dropout_p = v.dropout_p, s.block_q = v.block_q, s.block_k = v.block_k;
  return s;
}

const VariantCase kVariants[] = {
    {"window", false, 37, 5, 0.f, 0},
    {"window_left_only", false, 70, -1, 0.f, 0},
    {"window_right_only", false, -1, 3, 0.f, 0},
    {"window_narrow", false, 1, 0, 0.f, 0},  // each row sees its diagonal key and the one before
    {"window_causal", true, 50, -1, 0.f, 0},
    {"window_causal_right_capped", true, 20, 9, 0.f, 0},
    {"softcap", false, -1, -1, 1.5f, 0},
    {"softcap_causal", true, -1, -1, 2.f, 0},
    {"alibi_heads", false, -1, -1, 0.f, 1},
    {"alibi_batch_heads_causal", true, -1, -1, 0.f, 2},
    {"softcap_alibi", false, -1, -1, 1.5f, 1},
    {"window_softcap", false, 45, 45, 3.f, 0},
    {"window_alibi", false, 60, 2, 0.f, 2},
    {"all_causal", true, 64, -1, 2.5f, 1},
    {"dropout", false, -1, -1, 0.f, 0, 0.17f},
    {"dropout_causal", true, -1, -1, 0.f, 0, 0.3f},
    {"blocksparse", false, -1, -1, 0.f, 0, 0.f, 128, 128},
    {"blocksparse_causal", true, -1, -1, 0.f, 0, 0.f, 128, 128},
    {"blocksparse_256x128", false, -1, -1, 0.f, 0, 0.f, 256, 128},
    {"dropout_softcap", false, -1, -1, 2.f, 0, 0.2f},
    {"blocksparse_window", false, 90, 10, 0.f, 0, 0.f, 128, 128},
    {"blocksparse_dropout_alibi_causal", true, -1, -1, 0.f, 1, 0.1f, 128, 128},
};

class AttentionGpuVariants : public ::testing::TestWithParam<std::tuple<DType, int>> {};

TEST_P(AttentionGpuVariants, ForwardBackwardMatchReference) {
  auto [dt, d] = GetParam();
  uint64_t seed = 3000 + d;
  for (const VariantCase& v : kVariants) {
    SCOPED_TRACE(v.name);
    check_case(variant_spec(dt, d, v), ++seed);
  }
}

INSTANTIATE_TEST_SUITE_P(AttentionGpu, AttentionGpuVariants,
                         ::testing::Combine(::testing::Values(DType::bf16, DType::f16),
                                            ::testing::Values(64, 128)));

// More queries than keys: the first rows' windows lie left of key 0 (no key: out 0, lse -inf,
// zero gradients); fewer queries than keys: whole key blocks fall outside every window, so
// both passes skip tiles and the backward leaves dK = dV = 0 there.
TEST(AttentionGpuVariantsShapes, WindowRowsAndKeysOutsideEveryWindow) {
  for (int d : {64, 128}) {
    check_case(variant_spec(DType::bf16, d, {"sq>sk", false, 10, 0, 0.f, 0}, 300, 77), 3100 + d);
    check_case(variant_spec(DType::bf16, d, {"sq<sk", false, 30, 0, 0.f, 1}, 40, 1000), 3200 + d);
    check_case(variant_spec(DType::bf16, d, {"sq<sk causal", true, 100, -1, 2.f, 0}, 257, 1500), 3300 + d);
  }
}

// Window + GQA + varlen (and with softcap/ALiBi [batch, heads]): per-sequence alignment.
TEST(AttentionGpuVariantsShapes, WindowGqaVarlen) {
  for (int d : {64, 128}) {
    AttentionSpec s = spec(DType::bf16, 0, 0, 0, 6, 2, d, false);
    s.lens_q = {1, 130, 257, 64, 90};
    s.lens_k = {65, 17, 300, 64, 250};
    s.window_left = 40, s.window_right = 7;
    check_case(s, 3400 + d);
    s.causal = true, s.softcap = 2.f, s.alibi_dims = 2;
    check_case(s, 3500 + d);
  }
}

// Deterministic dQ with a window: the key blocks adding into a dQ block start past key block 0,
// so the turn order must count from the first of them (a wrong count deadlocks or misorders).
TEST(AttentionGpuVariantsShapes, WindowDeterministicBitwiseEqual) {
  check_deterministic(variant_spec(DType::bf16, 64, {"window", false, 150, 20, 0.f, 1}, 700, 900), 3600, 2);
}

// Hopper forward (sm90/) against the reference, and the sm80 forward on the same cases: head dims
// filling and not filling their bucket (TMA zero-fills the tail), odd lengths in both directions
// with causal alignment, GQA/MQA, varlen, and more query tiles than SMs so every persistent CTA
// runs several tiles through the same mbarrier rings. hdim 256 stages O in Q's buffer: tiles with
// no live key block (causal, sq > sk) and CTAs running a second tile after one hand it on; its
// backward shares each 64-key block between both warpgroups (one owns dV, one dK) and takes dQ from
// a row-parallel pass (query blocks that see no key write dQ = 0).
TEST(AttentionGpuSm90, BothPathsMatchReference) {
  std::vector<std::pair<AttentionSpec, bool>> cases;
  for (bool causal : {false, true}) {
    for (int d : {40, 64, 104, 128, 256})
      cases.push_back({spec(DType::bf16, 2, 300, 257, 4, 2, d, causal), true});
    cases.push_back({spec(DType::bf16, 1, 1000, 130, 2, 1, 200, causal), true});
    cases.push_back({spec(DType::bf16, 1, 1, 1000, 3, 3, 256, causal), true});
    cases.push_back({spec(DType::bf16, 1, 300, 100, 48, 16, 256, causal), true});  // 144 tiles
    cases.push_back({varlen_spec(256, {1, 130, 200}, {140, 17, 300}, causal), true});
    cases.push_back({spec(DType::bf16, 1, 1000, 130, 2, 1, 128, causal), false});
    cases.push_back({spec(DType::bf16, 1, 1, 1000, 3, 3, 64, causal), false});
    cases.push_back({spec(DType::bf16, 3, 1100, 1100, 8, 2, 64, causal), false});
    cases.push_back({spec(DType::bf16, 2, 777, 2050, 6, 1, 128, causal), false});
    // Varlen: tiles that read past their sequence into the next one (and past the last token).
    cases.push_back({varlen_spec(64, {1, 130, 257, 64, 300}, {65, 17, 300, 64, 129}, causal), true});
    cases.push_back({varlen_spec(128, {500, 129, 7}, {128, 640, 1}, causal), true});
    // A varlen sequence without keys (its dQ is 0; the conversion launched behind the main
    // kernel waits for 0 key blocks of its heads), and one key block per head before 2100
    // queries: one CTA adds into every dQ block of its two heads (causal: the first blocks see
    // no key). Written for the dQ fold (bench/NOTES-attention.md v11); they cover v12's
    // per-head counts.
    cases.push_back({varlen_spec(128, {70, 20, 130}, {90, 0, 200}, causal), true});
    cases.push_back({spec(DType::bf16, 1, 2100, 100, 4, 2, 128, causal), true});
    cases.push_back({spec(DType::bf16, 1, 2100, 100, 4, 2, 64, causal), true});
    // Causal tiles drawn from the dynamic scheduler's counter (more tiles than SMs): GQA at hdim
    // 128 (288 tiles, sq > sk: the first query blocks see no key), and a varlen batch of 36
    // sequences (4 x 36 x 3 tiles, most past their sequence's end and skipped by both roles).
    cases.push_back({spec(DType::bf16, 2, 1500, 1400, 12, 4, 128, causal), false});
    std::vector<int> lq, lk;
    for (int i = 0; i < 36; ++i) lq.push_back(1 + i * 37 % 500), lk.push_back(1 + i * 53 % 450);
    cases.push_back({varlen_spec(64, lq, lk, causal), false});
  }
  check_both_paths(cases, 4000);
}

// Every score variant on both paths, forward and backward (the sm90 kernels take the same
// policies), bf16 hdim 64 and 128; combinations of modifiers only where the build has their sm90
// kernels (not minimal: AttentionGpuVariants covers them there on the sm80 fall-back).
TEST(AttentionGpuSm90, VariantsBothPaths) {
  const bool minimal = minimal_build();
  std::vector<std::pair<AttentionSpec, bool>> cases;
  for (int d : {64, 128})
    for (const VariantCase& v : kVariants) {
      const int mods =
          (v.softcap > 0.f) + (v.alibi_dims > 0) + (v.dropout_p > 0.f) + (v.block_q > 0);
      if (mods <= 1 || !minimal) cases.push_back({variant_spec(DType::bf16, d, v), true});
    }
  // hdim 256: both Hopper passes take window, ALiBi and (bf16; the forward's bounded softmax)
  // softcap alone (64-key tiles). The windows leave key blocks no query sees (dK = dV = 0) and
  // query blocks that see one key block.
  for (const VariantCase& v : kVariants)
    if ((v.softcap == 0.f || v.alibi_dims == 0) && v.dropout_p == 0.f && v.block_q == 0)
      cases.push_back({variant_spec(DType::bf16, 256, v), true});
  // f16 at hdim 256: the Hopper kernels take window and ALiBi (softcap runs the sm80 kernel, as
  // in every f16 build), the bf16 kernels with the element type changed; where the build has them
  // (full and minimal-f16 builds).
  if (compiled(DType::f16, 256, true))
    for (const VariantCase& v : kVariants)
      if (v.softcap == 0.f && v.dropout_p == 0.f && v.block_q == 0)
        cases.push_back({variant_spec(DType::f16, 256, v), true});
  // ALiBi's one-FFMA form (GeneralScores::fwd_scores_rows, hdim <= 128): more queries than keys
  // (whole tiles above the diagonal, others below, the rest straddling it), a zero left window
  // (every tile takes the above-diagonal form) and a long causal sequence (distances in the
  // thousands, every tile below).
  const struct {
    VariantCase v;
    int sq, sk;
  } alibi_sides[] = {{{"alibi_sq>sk", false, -1, -1, 0.f, 2}, 700, 300},
                     {{"alibi_left0", false, 0, 150, 0.f, 1}, 333, 600},
                     {{"alibi_causal_long", true, -1, -1, 0.f, 1}, 1100, 1300}};
  for (int d : {64, 128})
    for (const auto& a : alibi_sides)
      cases.push_back({variant_spec(DType::bf16, d, a.v, a.sq, a.sk), true});
  check_both_paths(cases, 4400);
}

// Softcap alone bounds every score, so the Hopper forward keeps each row's max from the tile's
// first key block on, never below softcap log2 e - 40, where that bound allows (softcap <= 55.4),
// and the running max above (bench/NOTES-attention.md "Softcap v10"). Saturated scores: q scaled
// so most scaled scores lie past +-softcap, and every third query row aimed against a component
// all keys share, so all its scores sit near -softcap (tanh(-2.5)): with the max's floor at
// softcap log2 e their every P would flush to 0 (out 0, lse -inf). Softcap 20, 50 (Gemma-2's) and
// 70 (the running max); window and causal rows (masked scores) beside them; forward on both paths
// (the sm80-class forward and fp16 keep the running max throughout).
TEST(AttentionGpuSm90, SoftcapSaturatedScores) {
  if (!hopper_device()) GTEST_SKIP() << "no sm_90 device: the Hopper forward cannot run";
  uint64_t seed = 4600;
  auto saturate = [](AttentionCase& c) {
    const AttentionSpec& s = c.spec;
    const int d = s.hdim;
    const float spread = 1.5f * s.softcap;  // sd of an ordinary scaled score
    const float g = std::sqrt(2.5f * s.softcap * std::sqrt(float(d)));  // shared component
    for (int64_t i = 0; i < c.q.numel(); i += d) {
      const bool low = (i / d / s.heads) % 3 == 0;  // token index % 3 (dense [b, s, h, d])
      for (int j = 0; j < d; ++j)
        c.q.set(i + j, low ? (j == 0 ? -g : c.q.get(i + j)) : spread * c.q.get(i + j));
    }
    for (int64_t i = 0; i < c.k.numel(); i += d) c.k.set(i, g);
  };
  for (const char* path : {"sm90", "sm80"}) {
    ScopedPath scoped(path);
    for (DType dt : {DType::bf16, DType::f16})
      for (int d : {64, 128})
        for (float cap : {20.f, 50.f, 70.f})
          for (bool causal : {false, true}) {
            AttentionSpec s =
                variant_spec(dt, d, {"softcap", causal, causal ? 90 : -1, -1, cap, 0}, 259, 400);
            SCOPED_TRACE(std::string(path) + " " + s.str() + " softcap " + std::to_string(cap));
            if (!compiled(s.dtype, s.hdim)) continue;  // f16 in minimal builds
            AttentionCase c(s, ++seed);
            saturate(c);
            expect_forward_close(c, run_gpu(c, false, false, /*backward=*/false));
          }
  }
  // hdim 256's Hopper softcap forward (bf16, the bounded softmax alone) at softcaps it covers.
  ScopedPath sm90("sm90");
  for (float cap : {20.f, 50.f})
    for (bool causal : {false, true}) {
      AttentionSpec s = variant_spec(DType::bf16, 256,
                                     {"softcap", causal, causal ? 90 : -1, -1, cap, 0}, 259, 400);
      SCOPED_TRACE(std::string("sm90 ") + s.str() + " softcap " + std::to_string(cap));
      AttentionCase c(s, ++seed);
      saturate(c);
      expect_forward_close(c, run_gpu(c, false, false, /*backward=*/false));
    }
}

TEST(AttentionGpuSm90, Fp16BothPaths) {
  if (!compiled(DType::f16, 64)) GTEST_SKIP() << "f16 kernels not in this build (minimal)";
  check_both_paths({{spec(DType::f16, 2, 200, 333, 4, 2, 64, true), true},
                    {spec(DType::f16, 2, 333, 200, 4, 4, 128, false), true},
                    {spec(DType::f16, 2, 333, 200, 4, 2, 256, true), true},
                    {spec(DType::f16, 1, 200, 333, 4, 4, 224, false), true}}, 4100);
}

// The Hopper backward against the sm80 one's cases: MQA with many query blocks per key block,
// bottom-right causal with sq < sk and sq > sk (key blocks that no row of a query block sees),
// single rows and keys, dims between buckets, more key blocks than SMs.
TEST(AttentionGpuSm90, BackwardBothPaths) {
  std::vector<std::pair<AttentionSpec, bool>> cases;
  for (bool causal : {false, true}) {
    cases.push_back({spec(DType::bf16, 1, 1000, 130, 8, 1, 64, causal), true});
    cases.push_back({spec(DType::bf16, 2, 130, 1000, 6, 2, 128, causal), true});
    cases.push_back({spec(DType::bf16, 1, 1, 300, 2, 1, 128, causal), true});
    cases.push_back({spec(DType::bf16, 1, 300, 1, 2, 2, 64, causal), true});
    cases.push_back({spec(DType::bf16, 2, 200, 2100, 8, 4, 120, causal), true});  // 136 CTAs
  }
  check_both_paths(cases, 4600);
}

// The Hopper backward's zero-ahead (BwdMainloop::zero_ahead): the preprocess zeroes only the
// first k groups' dQ chunks (k groups of the launch order: about a wave of CTAs), and each group
// zeroes the chunks of the group k later. With a caller's workspace of NaN bytes any chunk left
// unzeroed turns its dQ rows into NaN; each case runs twice, the second time after a backward
// left its sums in the (re-poisoned) scratch. `ahead` > 0 sets k (FLASHKIT_BWD_ZERO_AHEAD), so
// that shapes far smaller than a wave run the mechanism; 0 keeps the wave rule.
void check_poisoned_workspace(const std::vector<AttentionSpec>& specs, int ahead, uint64_t seed) {
  if (!hopper_device()) GTEST_SKIP() << "no sm_90 device";
  ScopedEnv knob("FLASHKIT_BWD_ZERO_AHEAD", ahead > 0 ? std::to_string(ahead).c_str() : "");
  constexpr int64_t kFloats = int64_t(16) << 20;  // 64 MB, more than any case here needs
  HostTensor words;
  words.reset(DType::f32, {kFloats});
  DeviceTensor scratch(words);
  for (const AttentionSpec& s : specs) {
    SCOPED_TRACE(s.str() + " ahead " + std::to_string(ahead));
    if (!compiled(s.dtype, s.hdim, true)) continue;
    AttentionCase c(s, seed++);
    c.opts.workspace = {scratch.view().data, size_t(kFloats) * 4};
    for (int run = 0; run < 2; ++run) {
      scratch.poison();
      expect_grads_close(c, run_gpu(c, false, false));
    }
  }
}

// Dense MHA (groups of one (batch, head) pair: 12 chained groups), GQA with more key blocks than
// query blocks (CTAs with no chunk to zero still count in), GQA, and a causal MQA batch whose L2
// pair groups hold two pairs each (q_bytes 16 MB: groups {0, 1} and {2}), one and two groups
// ahead; score policies one group ahead; then shapes with more key blocks than the wave rule's
// k needs (132 SMs: 32 key blocks a pair, k = 5), MHA and GQA.
TEST(AttentionGpuSm90, BackwardZeroAheadPoisonedWorkspace) {
  const std::vector<AttentionSpec> small = {
      spec(DType::bf16, 3, 700, 700, 4, 4, 128), spec(DType::bf16, 2, 130, 2000, 6, 2, 64),
      spec(DType::bf16, 2, 640, 900, 6, 2, 64), spec(DType::bf16, 3, 512, 512, 32, 1, 128, true)};
  check_poisoned_workspace(small, 1, 4650);
  check_poisoned_workspace(small, 2, 4655);
  // Score policies: a block mask (the producer's whole warp walks, and waits), dropout, and the
  // longest-first order of a block mask under causal and of a right window bound.
  check_poisoned_workspace({variant_spec(DType::bf16, 128, kVariants[16]),
                            variant_spec(DType::bf16, 128, kVariants[14]),
                            variant_spec(DType::bf16, 128, kVariants[17]),
                            variant_spec(DType::bf16, 64, kVariants[2])},
                           1, 4670);
  check_poisoned_workspace(
      {spec(DType::bf16, 2, 130, 4096, 4, 4, 128), spec(DType::bf16, 3, 300, 4096, 6, 2, 64)}, 0,
      4660);
}

// Deterministic mode on both backward kernels: three runs give the same bits, and they are right.
TEST(AttentionGpuSm90, BackwardDeterministicBothPaths) {
  if (!hopper_device()) GTEST_SKIP() << "no sm_90 device";
  for (const char* path : {"sm90", "sm80"}) {
    SCOPED_TRACE(path);
    ScopedPath scoped(path);
    for (bool causal : {false, true}) {
      check_deterministic(spec(DType::bf16, 2, 513, 700, 4, 2, 64, causal), 4700 + causal);
      check_deterministic(spec(DType::bf16, 1, 700, 513, 6, 2, 128, causal), 4710 + causal);
      if (compiled(DType::bf16, 256, std::string(path) == "sm90"))
        check_deterministic(spec(DType::bf16, 1, 600, 450, 4, 2, 256, causal), 4720 + causal);
    }
  }
}

// Varlen with each score modifier on both paths, forward and backward: per-sequence window and
// ALiBi alignment, dropout counters and block-mask grids per sequence, key blocks whose tile
// reads the next sequence's keys (masked) and query blocks reading its rows (LSE padding), a
// sequence without queries (dK = dV = 0 stored) and one without keys; hdim 256 (64-key blocks, dQ
// from the row-parallel pass) with window, softcap and ALiBi.
TEST(AttentionGpuSm90, VarlenVariantsBothPaths) {
  std::vector<std::pair<AttentionSpec, bool>> cases;
  for (int d : {64, 128, 256}) {
    AttentionSpec s = varlen_spec(d, {1, 130, 257, 0, 300, 20}, {65, 17, 300, 90, 129, 0}, false);
    s.window_left = 40, s.window_right = 7;
    cases.push_back({s, true});
    s.causal = true, s.window_right = -1, s.softcap = 2.f;
    cases.push_back({s, true});
    s.softcap = 0.f, s.alibi_dims = 2, s.window_left = -1;
    cases.push_back({s, true});
    if (d == 256) continue;  // hdim 256's Hopper kernels have no dropout or block mask
    s.alibi_dims = 0, s.causal = false, s.dropout_p = 0.3f;
    cases.push_back({s, true});
    s.dropout_p = 0.f, s.block_q = s.block_k = 128;
    cases.push_back({s, true});
  }
  check_both_paths(cases, 5000);
}

// Deterministic mode with variants on both backward kernels: a window (dQ turns counted from the
// first key block a query block sees), softcap and ALiBi, dropout (bits redrawn per run) and a
// block mask (turns count only kept tiles), bitwise equal over runs and right.
TEST(AttentionGpuSm90, VariantsDeterministicBothPaths) {
  if (!hopper_device()) GTEST_SKIP() << "no sm_90 device";
  const VariantCase cases[] = {{"window_softcap", false, 150, 20, 2.f, 0},
                               {"alibi_causal", true, -1, -1, 0.f, 2},
                               {"dropout", false, -1, -1, 0.f, 0, 0.2f},
                               {"blocksparse_causal", true, -1, -1, 0.f, 0, 0.f, 128, 128}};
  for (const char* path : {"sm90", "sm80"}) {
    SCOPED_TRACE(path);
    ScopedPath scoped(path);
    uint64_t seed = 4900;
    for (int d : {64, 128})
      for (const VariantCase& v : cases) {
        SCOPED_TRACE(v.name);
        check_deterministic(variant_spec(DType::bf16, d, v, 300, 420), ++seed, 2);
      }
  }
  // hdim 256 (the Hopper kernels; a minimal build has no sm80 kernel there): the window with
  // softcap and causal ALiBi.
  ScopedPath scoped("sm90");
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE(cases[i].name);
    check_deterministic(variant_spec(DType::bf16, 256, cases[i], 300, 420), 4950 + i, 2);
  }
}

// Asking for the Hopper forward where it has no kernel (hdim above 128 with a score modifier) is
// an Error naming the variable, not a silent fall-back; a bad value is one too.
TEST(AttentionGpuSm90, ForcedPathErrors) {
  if (!hopper_device()) GTEST_SKIP() << "no sm_90 device";
  auto expect_error = [](int hdim, const char* path, const AttentionOptions& o) {
    AttentionCase c(spec(DType::bf16, 1, 16, 16, 2, 2, hdim), 4200);
    DeviceTensor q(c.q), k(c.k), v(c.v), out(c.q), lse(HostTensor(DType::f32, c.lse_shape()));
    ScopedPath scoped(path);
    try {
      attention_forward(q, k, v, out, lse, o);
      ADD_FAILURE() << "no error for FLASHKIT_ATTENTION_PATH=" << path << " at hdim " << hdim;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("FLASHKIT_ATTENTION_PATH", 0), 0u) << e.what();
    }
  };
  expect_error(32, "fastest", {});
  AttentionOptions softcap;
  softcap.softcap = 70.f;  // hdim 256's Hopper softcap is the bounded softmax: softcap <= 55.4
  expect_error(256, "sm90", softcap);
  expect_error(192, "sm90", softcap);
}

// Head dims of the sm80 path's 32, 96 and 192 buckets on the Hopper kernels, padded up to 64, 128
// and 256 (built in minimal builds too): dims filling their sm80 bucket and not, odd lengths,
// GQA, causal with sq != sk; forward and backward.
static void check_padded_buckets(const std::vector<std::pair<AttentionSpec, bool>>& cases, uint64_t seed) {
  if (!hopper_device()) GTEST_SKIP() << "no sm_90 device: the Hopper kernels cannot run";
  ScopedPath scoped("sm90");
  for (const auto& [s, backward] : cases) {
    SCOPED_TRACE(s.str());
    run_and_check(s, ++seed, false, backward);
  }
}

TEST(AttentionGpuSm90, PaddedBuckets) {
  std::vector<std::pair<AttentionSpec, bool>> cases;
  for (bool causal : {false, true}) {
    cases.push_back({spec(DType::bf16, 2, 300, 257, 4, 2, 32, causal), true});
    cases.push_back({spec(DType::bf16, 1, 1000, 130, 6, 2, 72, causal), true});
    cases.push_back({spec(DType::bf16, 2, 257, 700, 4, 1, 96, causal), true});
    cases.push_back({spec(DType::bf16, 1, 300, 257, 4, 2, 136, causal), true});
    cases.push_back({spec(DType::bf16, 2, 500, 333, 4, 2, 192, causal), true});
  }
  check_padded_buckets(cases, 4800);
}

// Dropout: the GPU's returned mask equals the CPU backend's bit for bit (same Philox key: seed,
// offset, batch, head, row, column), over masked and unmasked elements alike, and keeps a fraction
// within 4 sigma of 1 - p, p quantised to 1/256 (common/philox.h's 8-bit draws). The outputs and
// gradients against the fp64 reference (which draws the same bits) are checked by
// AttentionGpuVariants and the tests below.
TEST(AttentionGpuDropout, MaskBitsEqualCpuAndKeptFraction) {
  for (float p : {0.1f, 0.5f}) {
    AttentionSpec s = spec(DType::bf16, 2, 300, 517, 3, 3, 64, true);
    s.dropout_p = p;
    AttentionCase c(s, 4000 + int(p * 10));
    HostTensor mask_gpu(DType::u8, {2, 3, 300, 517}), mask_cpu(DType::u8, {2, 3, 300, 517});
    {  // CPU backend
      HostTensor out(s.dtype, c.q_shape()), lse(DType::f32, c.lse_shape());
      AttentionOptions o = c.opts;
      o.dropout_mask_out = mask_cpu.view();
      attention_forward(c.q, c.k, c.v, out, lse, o);
    }
    {
      DeviceTensor q(c.q), k(c.k), v(c.v), out(HostTensor(s.dtype, c.q_shape()));
      DeviceTensor lse(HostTensor(DType::f32, c.lse_shape())), mask(mask_gpu);
      mask.poison();
      AttentionOptions o = c.opts;
      o.dropout_mask_out = mask.view();
      attention_forward(q, k, v, out, lse, o);
      FK_CUDA_CHECK(cudaDeviceSynchronize());
      mask.download(mask_gpu);
    }
    EXPECT_TRUE(mask_gpu.same_bytes(mask_cpu)) << "p " << p;
    int64_t kept = 0;
    for (int64_t i = 0; i < mask_gpu.numel(); ++i) kept += mask_gpu.ptr<uint8_t>()[i];
    const double pq = dropout_threshold(p) / 256.0;
    const double n = double(mask_gpu.numel()), sigma = std::sqrt(pq * (1 - pq) / n);
    EXPECT_NEAR(kept / n, 1 - pq, 4 * sigma) << "p " << p;
  }
}

// Dropout with GQA, varlen, strided views and hdim 128; a second offset changes the outputs.
TEST(AttentionGpuDropout, ForwardBackwardShapes) {
  AttentionSpec s = spec(DType::bf16, 2, 200, 300, 6, 2, 128, false);
  s.dropout_p = 0.25f;
  check_case(s, 4100);
  check_case(s, 4101, /*strided=*/true);
  AttentionSpec vl = spec(DType::bf16, 0, 0, 0, 4, 2, 64, true);
  vl.lens_q = {1, 130, 257, 64};
  vl.lens_k = {65, 17, 300, 64};
  vl.dropout_p = 0.4f;
  check_case(vl, 4102);
}

// Dropout on persistent CTAs that run several tiles each: causal ones drawn from the tile counter
// (the Hopper forward's producer warps that draw the keep bits read the same mailbox as the
// consumers) and a fixed order, hdim 64 and 128, partial blocks, GQA.
TEST(AttentionGpuDropout, ManyTilesPerCta) {
  AttentionSpec a = spec(DType::bf16, 1, 700, 700, 24, 8, 64, true);
  AttentionSpec b = spec(DType::bf16, 1, 520, 530, 36, 12, 128, true);
  AttentionSpec c = spec(DType::bf16, 1, 700, 300, 40, 8, 64, false);
  a.dropout_p = b.dropout_p = c.dropout_p = 0.3f;
  check_case(a, 4110);
  check_case(b, 4111);
  check_case(c, 4112);
}

// Block mask broadcast over batch and heads ([1, 1, nq, nk]), a row of query blocks that keeps no
// key block (out 0, lse -inf, dQ 0) and a key block no query keeps (dK = dV = 0), both passes.
// The block mask [1, heads, nq, nk] (blocks of 128 x 128) given by `grid`, row-major, for case c.
void set_block_mask(AttentionCase& c, const uint8_t* grid, int nq, int nk, int heads = 1) {
  c.block_mask.reset(DType::u8, {1, heads, nq, nk});
  std::memcpy(c.block_mask.data(), grid, size_t(heads) * nq * nk);
  c.opts.block_mask = c.block_mask.view();
  c.opts.block_mask_block_q = c.opts.block_mask_block_k = 128;
}
// n random mask bytes from `seed`, each kept (1) with probability keep / mod.
std::vector<uint8_t> random_grid(size_t n, uint64_t seed, unsigned mod, unsigned keep) {
  std::vector<uint8_t> grid(n);
  uint64_t x = seed * 0x9e3779b97f4a7c15ull;
  for (uint8_t& g : grid) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    g = (x >> 33) % mod < keep;
  }
  return grid;
}

TEST(AttentionGpuBlockSparse, BroadcastAndEmptyRowsAndColumns) {
  for (int d : {64, 128}) {
    AttentionCase c(spec(DType::bf16, 2, 300, 400, 4, 2, d, false), 4200 + d);
    const uint8_t grid[12] = {1, 0, 1, 0,  0, 0, 0, 0,  1, 1, 0, 0};
    set_block_mask(c, grid, 3, 4);
    GpuRun g = run_gpu(c, false, false);
    expect_forward_close(c, g);
    expect_grads_close(c, g);
  }
}

// Deterministic dQ with a block mask: a key block's turn counts only the kept blocks before it.
TEST(AttentionGpuBlockSparse, DeterministicBitwiseEqual) {
  VariantCase v{"blocksparse", true, -1, -1, 0.f, 0, 0.f, 128, 128};
  check_deterministic(variant_spec(DType::bf16, 128, v, 700, 900), 4300, 2);
}

// Walks longer than one ballot of 32 mask bytes (the walks keep their last ballot: LiveCursor):
// rows of 34 and 67 key blocks (the forward's walks) and columns of 18, 34 and 67 query blocks
// (the backward's walks step 64 / 128 rows: up to 134 steps), random blocks (~30% kept) with a
// row and a column whose two kept blocks have 32 or 65 dropped blocks (or query steps) between
// them, both paths.
TEST(AttentionGpuBlockSparse, WalksPastOneBallot) {
  struct Shape {
    int d, sq, sk;
  };
  std::vector<const char*> paths{"sm80"};
  if (hopper_device()) paths.insert(paths.begin(), "sm90");
  uint64_t seed = 4400;
  for (const char* path : paths) {
    SCOPED_TRACE(path);
    ScopedPath scoped(path);
    for (const Shape& sh : {Shape{128, 300, 4300}, Shape{64, 300, 4300}, Shape{128, 2200, 300},
                            Shape{64, 4300, 300}, Shape{128, 200, 8500}, Shape{64, 8500, 200}}) {
      SCOPED_TRACE(::testing::Message() << "hdim " << sh.d << " sq " << sh.sq << " sk " << sh.sk);
      AttentionCase c(spec(DType::bf16, 1, sh.sq, sh.sk, 2, 1, sh.d, false), ++seed);
      const int nq = (sh.sq + 127) / 128, nk = (sh.sk + 127) / 128;
      std::vector<uint8_t> grid = random_grid(size_t(nq) * nk, seed, 10, 3);
      if (nk > 33)  // row 1 keeps its first and last key blocks
        for (int j = 0; j < nk; ++j) grid[size_t(nk) + j] = j == 0 || j == nk - 1;
      if (nq > 17)  // column 1 keeps its first and last query blocks
        for (int i = 0; i < nq; ++i) grid[size_t(i) * nk + 1] = i == 0 || i == nq - 1;
      set_block_mask(c, grid.data(), nq, nk);
      GpuRun g = run_gpu(c, false, false);
      expect_forward_close(c, g);
      expect_grads_close(c, g);
    }
  }
}

// A mask of its own for each head ([1, h, nq, nk]) on persistent CTAs that run two or three tiles
// each in the Hopper forward's fixed order (each tile's walks read its own head's row), GQA,
// partial blocks, hdim 64 and 128, ~25% of the blocks kept and every row keeping at least one;
// both passes.
TEST(AttentionGpuBlockSparse, PerHeadMasksManyTilesPerCta) {
  struct Shape {
    int d, sq, sk, h, hk;
  };
  uint64_t seed = 4500;
  for (const Shape& sh : {Shape{64, 700, 900, 24, 8}, Shape{128, 520, 1300, 36, 12}}) {
    SCOPED_TRACE(::testing::Message() << "hdim " << sh.d);
    AttentionCase c(spec(DType::bf16, 1, sh.sq, sh.sk, sh.h, sh.hk, sh.d, false), ++seed);
    const int nq = (sh.sq + 127) / 128, nk = (sh.sk + 127) / 128;
    std::vector<uint8_t> grid = random_grid(size_t(sh.h) * nq * nk, seed, 4, 1);
    for (int r = 0; r < sh.h * nq; ++r) grid[size_t(r) * nk + (r * 7) % nk] = 1;
    set_block_mask(c, grid.data(), nq, nk, sh.h);
    GpuRun g = run_gpu(c, false, false);
    expect_forward_close(c, g);
    expect_grads_close(c, g);
  }
}

// Small shapes for compute-sanitizer (memcheck, racecheck): partial tiles, causal, GQA, varlen,
// both dQ modes.
TEST(AttentionGpuSmall, DenseCausalGqa) {
  check_case(spec(DType::bf16, 2, 17, 33, 4, 2, 64, true), 61);
  check_case(spec(DType::bf16, 1, 70, 9, 2, 1, 128, false), 62);
}

// Both forward paths under the sanitizer: partial tiles, causal with sq > sk (query blocks that
// see no key), GQA, and 140 tiles on a 132-SM grid (CTAs that run a second tile). The 300 x 200
// GQA case runs the Hopper backward over 6 query blocks per key block across 2 heads (a stage
// released one block late) with a last key block only one of whose 64-key halves is masked.
// hdim 256 (O staged in Q's buffer): 144 tiles, the ones run second having no live key block;
// its backward (64-key blocks shared by both warpgroups, P^T through shared memory, dQ staged in
// the block's own Q/dO stage) on partial blocks, GQA 3:1 and varlen.
TEST(AttentionGpuSmall, Sm90AndSm80Paths) {
  check_both_paths({{spec(DType::bf16, 2, 17, 33, 4, 2, 64, true), true},
                    {spec(DType::bf16, 1, 300, 200, 4, 2, 64, false), true},
                    {spec(DType::bf16, 1, 200, 70, 2, 1, 128, true), true},
                    {spec(DType::bf16, 1, 16, 40, 140, 70, 64, false), false},
                    {varlen_spec(64, {3, 70, 0, 33}, {90, 5, 20, 1}, true), true},
                    {varlen_spec(128, {130, 1, 64}, {17, 129, 200}, false), true},
                    {spec(DType::bf16, 1, 200, 170, 2, 1, 256, true), true},
                    {spec(DType::bf16, 1, 300, 40, 48, 16, 256, true), true},
                    {varlen_spec(256, {3, 130, 0}, {90, 5, 20}, false), true}}, 4300);
}

// The score variants on both paths, forward and backward, under the sanitizer: window edges,
// softcap, ALiBi, dropout (the backward redraws its mask) and a random block mask (about 1/3 of
// blocks dropped); hdim 64 runs 128-row query blocks in the sm90 backward, hdim 128 64-row ones;
// hdim 256 window, ALiBi and softcap on the Hopper forward's 64-key tiles and the Hopper backward
// (64-key column blocks, the dQ pass); hdim 64's window alone takes
// plain's three warpgroups on 192-row tiles, and so does softcap alone.
TEST(AttentionGpuSmall, Sm90AndSm80PathsVariants) {
  const VariantCase window{"window", true, 30, -1, 0.f, 0};
  const VariantCase softcap{"softcap", false, -1, -1, 1.5f, 0};
  const VariantCase alibi{"alibi", false, -1, -1, 0.f, 2};
  const VariantCase dropout{"dropout", false, -1, -1, 0.f, 0, 0.3f};
  const VariantCase sparse{"blocksparse", true, -1, -1, 0.f, 0, 0.f, 128, 128};
  check_both_paths({{variant_spec(DType::bf16, 128, window, 75, 140), true},
                    {variant_spec(DType::bf16, 64, window, 200, 260), true},  // 192-row tiles
                    {variant_spec(DType::bf16, 64, softcap, 200, 75), true},  // 192-row tiles
                    {variant_spec(DType::bf16, 128, softcap, 75, 140), true},
                    {variant_spec(DType::bf16, 128, alibi, 70, 9), true},
                    {variant_spec(DType::bf16, 64, alibi, 200, 90), true},  // 192-row tiles
                    {variant_spec(DType::bf16, 64, dropout, 70, 140), true},
                    {variant_spec(DType::bf16, 128, dropout, 40, 75), true},
                    {variant_spec(DType::bf16, 64, sparse, 150, 300), true},
                    {variant_spec(DType::bf16, 256, window, 150, 100), true},   // hdim 256: the
                    {variant_spec(DType::bf16, 256, alibi, 70, 140), true},     // Hopper kernels
                    {variant_spec(DType::bf16, 256, softcap, 90, 200), true}},  // alone in minimal
                   4500);
}

// The sm80-class backward's dQ by bulk reduces of a shared-memory stage (FLASHKIT_SM80_BWD_BULK=1,
// off by default since session 34; atomics otherwise) under the sanitizer: partial tiles, causal,
// GQA, hdim 128 and hdim 64 causal (hdim <= 64 without a mask compiles no stage: atomics there).
TEST(AttentionGpuSmall, Sm80BackwardBulkReduce) {
  if (!hopper_device()) GTEST_SKIP() << "bulk reduces are sm_90";
  ScopedPath scoped("sm80");
  ScopedEnv bulk("FLASHKIT_SM80_BWD_BULK", "1");
  check_case(spec(DType::bf16, 2, 17, 33, 4, 2, 64, true), 4950);
  check_case(spec(DType::bf16, 1, 200, 140, 4, 2, 128, false), 4951);
  check_case(spec(DType::bf16, 1, 150, 90, 2, 1, 128, true), 4952);
}

// Zero-ahead on a shape small enough for compute-sanitizer: six one-pair groups, two query
// blocks each.
TEST(AttentionGpuSmall, Sm90BackwardZeroAhead) {
  check_poisoned_workspace({spec(DType::bf16, 3, 200, 200, 2, 2, 64)}, 1, 4665);
}

// The padded Hopper buckets under the sanitizer: hdim 32 and 96 forward and backward (causal,
// sq > sk), hdim 160 forward and backward (the 256 bucket).
TEST(AttentionGpuSmall, Sm90PaddedBuckets) {
  check_padded_buckets({{spec(DType::bf16, 1, 90, 70, 4, 2, 32, true), true},
                        {spec(DType::bf16, 2, 70, 130, 2, 1, 96, false), true},
                        {spec(DType::bf16, 1, 150, 60, 2, 2, 160, true), true}}, 4900);
}

// Both backward kernels in deterministic mode under the sanitizer (the dQ turns), partial tiles.
TEST(AttentionGpuSmall, Sm90AndSm80BackwardDeterministic) {
  if (!hopper_device()) GTEST_SKIP() << "no sm_90 device";
  for (const char* path : {"sm90", "sm80"}) {
    SCOPED_TRACE(path);
    ScopedPath scoped(path);
    check_deterministic(spec(DType::bf16, 1, 70, 200, 2, 1, 128, true), 4800, 2);
    check_deterministic(spec(DType::bf16, 1, 130, 129, 4, 2, 64, false), 4801, 2);
    if (compiled(DType::bf16, 256, std::string(path) == "sm90"))
      check_deterministic(spec(DType::bf16, 1, 150, 70, 2, 1, 256, true), 4802, 2);
  }
}

// The variants' dQ turns on both backward kernels under the sanitizer: a block mask (turns
// count kept tiles only) and a window with dropout.
TEST(AttentionGpuSmall, Sm90AndSm80VariantsDeterministic) {
  if (!hopper_device()) GTEST_SKIP() << "no sm_90 device";
  for (const char* path : {"sm90", "sm80"}) {
    SCOPED_TRACE(path);
    ScopedPath scoped(path);
    check_deterministic(
        variant_spec(DType::bf16, 64, {"blocksparse", false, -1, -1, 0.f, 0, 0.f, 128, 128}, 150, 300),
        4850, 2);
    check_deterministic(
        variant_spec(DType::bf16, 128, {"window_dropout", false, 60, 10, 0.f, 0, 0.25f}, 100, 270),
        4851, 2);
  }
}

TEST(AttentionGpuSmall, VarlenDeterministic) {
  AttentionSpec s = spec(DType::bf16, 0, 0, 0, 2, 1, 64, true);
  s.lens_q = {3, 70};
  s.lens_k = {90, 5};
  AttentionCase c(s, 71);
  expect_grads_close(c, run_gpu(c, false, true));
}

// Varlen on both backward kernels under the sanitizer: a window with softcap, dropout (dQ in
// deterministic turns too), key tiles reading into the next sequence and past the last token.
TEST(AttentionGpuSmall, Sm90AndSm80VarlenVariants) {
  if (!hopper_device()) GTEST_SKIP() << "no sm_90 device";
  AttentionSpec s = varlen_spec(128, {3, 70, 0, 140}, {150, 5, 20, 130}, true);
  s.window_left = 30, s.softcap = 1.5f;
  AttentionSpec dr = varlen_spec(64, {3, 200, 33}, {90, 140, 0}, false);
  dr.dropout_p = 0.25f;
  check_both_paths({{s, true}, {dr, true}}, 5100);
  for (const char* path : {"sm90", "sm80"}) {
    SCOPED_TRACE(path);
    ScopedPath scoped(path);
    check_deterministic(dr, 5110, 2);
  }
}

// Every variant at once on small varlen GQA shapes, dropout and a block mask alone, and a window
// in deterministic mode.
TEST(AttentionGpuSmall, VariantsVarlenDeterministic) {
  AttentionSpec s = spec(DType::bf16, 0, 0, 0, 4, 2, 64, true);
  s.lens_q = {3, 70, 33};
  s.lens_k = {90, 5, 140};
  s.window_left = 20, s.softcap = 2.f, s.alibi_dims = 2;
  check_case(s, 91);
  s.dropout_p = 0.2f, s.block_q = 128, s.block_k = 128;
  check_case(s, 93);
  check_case(variant_spec(DType::bf16, 128, {"dropout", false, -1, -1, 0.f, 0, 0.3f}, 40, 75), 94);
  check_case(variant_spec(DType::bf16, 64, {"blocksparse", false, -1, -1, 0.f, 0, 0.f, 128, 128}, 150, 300), 95);
  AttentionSpec w = variant_spec(DType::bf16, 128, {"window", false, 30, 4, 1.5f, 1}, 75, 140);
  AttentionCase c(w, 92);
  expect_grads_close(c, run_gpu(c, false, true));
}

// Bad input: a clear Error naming the argument, and the (poisoned) outputs untouched.
TEST(AttentionGpuSmall, BadInputThrowsAndWritesNothing) {
  AttentionCase c(spec(DType::bf16, 1, 16, 16, 2, 2, 64), 81);
  DeviceTensor q(c.q), k(c.k), v(c.v);
  HostTensor out_h(DType::bf16, c.q_shape()), lse_h(DType::f32, c.lse_shape());
  DeviceTensor out(out_h), lse(lse_h);
  auto untouched = [&] {
    HostTensor o2(DType::bf16, c.q_shape()), l2(DType::f32, c.lse_shape());
    out.download(o2);
    lse.download(l2);
    for (int64_t i = 0; i < o2.numel(); ++i)
      if (o2.ptr<uint16_t>()[i] != 0xffff) return false;
    for (int64_t i = 0; i < l2.numel(); ++i)
      if (reinterpret_cast<const uint32_t*>(l2.data())[i] != 0xffffffffu) return false;
    return true;
  };
  auto expect_error = [&](const char* prefix, const std::function<void()>& f) {
    out.poison();
    lse.poison();
    try {
      f();
      ADD_FAILURE() << "no error for " << prefix;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(prefix, 0), 0u) << e.what();
    }
    EXPECT_TRUE(untouched()) << prefix;
  };
  // hdim > 256
  HostTensor big(DType::bf16, {1, 16, 2, 264});
  DeviceTensor bq(big), bk(big), bv(big), bo(big);
  expect_error("q", [&] { attention_forward(bq, bk, bv, bo, lse, {}); });
  // A q view one element past an aligned pointer (2 bytes: breaks 16-byte rows).
  TensorView qv = q.view();
  qv.data = static_cast<char*>(qv.data) + 2;
  qv.shape[1] = 15;
  TensorView ov = out.view(), kv = k.view(), vv = v.view(), lv = lse.view();
  ov.shape[1] = 15, lv.shape[2] = 15;
  expect_error("q", [&] { attention_forward(qv, kv, vv, ov, lv, {}); });
  // k on the CPU while q is on the GPU.
  expect_error("k", [&] { attention_forward(q, c.k, v, out, lse, {}); });
  // dropout_p out of [0, 1), and a block mask left on the host.
  AttentionOptions o;
  o.dropout_p = 1.f;
  expect_error("dropout_p", [&] { attention_forward(q, k, v, out, lse, o); });
  {
    HostTensor bm(DType::u8, {1, 1, 1, 1});
    bm.fill(1.f);
    AttentionOptions bo;
    bo.block_mask = bm.view();
    expect_error("block_mask", [&] { attention_forward(q, k, v, out, lse, bo); });
    // On the device, but with blocks that are no multiple of 128 (the CPU takes any).
    HostTensor bm16(DType::u8, {1, 1, 1, 1});
    bm16.fill(1.f);
    DeviceTensor dbm(bm16);
    bo.block_mask = dbm.view();
    bo.block_mask_block_q = 16;
    expect_error("block_mask_block_q", [&] { attention_forward(q, k, v, out, lse, bo); });
  }
  // ALiBi slopes left on the host while q is on the GPU.
  {
    HostTensor slopes(DType::f32, {2});
    slopes.fill(0.1f);
    AttentionOptions ao;
    ao.alibi_slopes = slopes.view();
    expect_error("alibi_slopes", [&] { attention_forward(q, k, v, out, lse, ao); });
  }
  // Varlen on cuda: the kernels never read cu_seqlens on the host, so the maxima must be given,
  // and cu_seqlens must be int32.
  {
    AttentionSpec vs = spec(DType::bf16, 0, 0, 0, 2, 2, 64);
    vs.lens_q = {5, 11};
    vs.lens_k = {7, 9};
    AttentionCase cv(vs, 83);
    DeviceTensor vq(cv.q), vk(cv.k), vv(cv.v), vo(cv.q), vl(HostTensor(DType::f32, cv.lse_shape()));
    DeviceTensor cu_q(cv.cu_q), cu_k(cv.cu_k);
    HostTensor cu64(DType::i64, {3});
    DeviceTensor cu_q64(cu64);
    AttentionOptions vo_opts;
    vo_opts.cu_seqlens_q = cu_q.view();
    vo_opts.cu_seqlens_k = cu_k.view();
    auto varlen_untouched = [&](const char* prefix, const AttentionOptions& o) {
      vo.poison();
      try {
        attention_forward(vq, vk, vv, vo, vl, o);
        ADD_FAILURE() << "no error for " << prefix;
      } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()).rfind(prefix, 0), 0u) << e.what();
      }
      HostTensor o2(DType::bf16, cv.q_shape());
      vo.download(o2);
      for (int64_t i = 0; i < o2.numel(); ++i)
        if (o2.ptr<uint16_t>()[i] != 0xffff) return ADD_FAILURE() << prefix << ": out was written";
    };
    varlen_untouched("max_seqlen_q", vo_opts);
    vo_opts.max_seqlen_q = 11;
    vo_opts.max_seqlen_k = 9;
    AttentionOptions bad_cu = vo_opts;
    bad_cu.cu_seqlens_q = cu_q64.view();
    varlen_untouched("cu_seqlens_q", bad_cu);
  }
  // fp32 on cuda.
  AttentionCase c32([] { AttentionSpec s; s.dtype = DType::f32; s.batch = 1; s.seqlen_q = s.seqlen_k = 16; return s; }(), 82);
  DeviceTensor q32(c32.q), k32(c32.k), v32(c32.v), o32(c32.q);
  expect_error("q", [&] { attention_forward(q32, k32, v32, o32, lse, {}); });
}

// ---- FP8 (e4m3) forward (Hopper): q, k, v quantized per tensor with descales, bf16 out ----

namespace {

// Runs the fp8 forward of `s` (dtype ignored: the case is drawn in fp32, then quantized) on
// poisoned outputs and checks out and lse against the fp64 reference of the dequantized inputs,
// with DESIGN.md's rule against the naive fp8 baseline (P rounded to e4m3, out to bf16).
void check_fp8(AttentionSpec s, uint64_t seed, bool per_head = false) {
  s.dtype = DType::f32;
  AttentionCase c(s, seed);
  SCOPED_TRACE("fp8 " + c.spec.str() + (per_head ? " per-head descales" : ""));
  Fp8Inputs f = quantize_e4m3(c, per_head);
  HostTensor ref_out, ref_lse, lp_out, lp_lse;
  c.reference_forward(ref_out, ref_lse, DType::f64);
  fp8_naive_forward(c, lp_out, lp_lse);
  DeviceTensor q(f.q8), k(f.k8), v(f.v8), qd(f.q_descale), kd(f.k_descale), vd(f.v_descale);
  HostTensor out_h(DType::bf16, c.q_shape()), lse_h(DType::f32, c.lse_shape());
  DeviceTensor out(out_h), lse(lse_h);
  out.poison();
  lse.poison();
  AttentionOptions o = c.opts;
  o.q_descale = qd.view(), o.k_descale = kd.view(), o.v_descale = vd.view();
  DeviceTensor cu_q, cu_k;
  if (s.varlen()) {
    cu_q.upload(c.cu_q);
    cu_k.upload(c.cu_k);
    o.cu_seqlens_q = cu_q.view(), o.cu_seqlens_k = cu_k.view();
    o.max_seqlen_q = c.spec.seqlen_q, o.max_seqlen_k = c.spec.seqlen_k;
  }
  attention_forward(q, k, v, out, lse, o);
  FK_CUDA_CHECK(cudaDeviceSynchronize());
  out.download(out_h);
  lse.download(lse_h);
  expect_close("out", out_h, lp_out, ref_out);
  expect_close("lse", lse_h, lp_lse, ref_lse, 1e-4);
}

}  // namespace

TEST(AttentionGpuFp8, ForwardMatchesReference) {
  if (!hopper_device()) GTEST_SKIP() << "the fp8 forward runs on sm_90";
  uint64_t seed = 1200;
  for (int d : {64, 128, 256, 80, 176}) {  // the three buckets and two padded head dims
    for (bool causal : {false, true}) {
      check_fp8(spec(DType::f32, 2, 300, 300, 4, 4, d, causal), seed++);
      check_fp8(spec(DType::f32, 1, 129, 700, 4, 2, d, causal), seed++);  // GQA, sq < sk
      check_fp8(spec(DType::f32, 1, 450, 130, 3, 1, d, causal), seed++);  // MQA, sq > sk
    }
  }
  check_fp8(spec(DType::f32, 3, 1, 513, 2, 2, 128), seed++);  // one query row (decode-like)
  check_fp8(spec(DType::f32, 1, 1000, 1000, 2, 2, 128, true), seed++);
  // descales per (batch, KV head), GQA: every bucket, causal and not
  for (int d : {64, 128, 256})
    for (bool causal : {false, true})
      check_fp8(spec(DType::f32, 3, 257, 300, 6, 2, d, causal), seed++, true);
  // varlen (V^T per sequence, tiles that read past a sequence's end; a key-less sequence)
  for (int d : {64, 128, 256})
    for (bool causal : {false, true}) {
      check_fp8(varlen_spec(d, {1, 130, 257, 64, 300}, {65, 17, 300, 64, 129}, causal), seed++);
      check_fp8(varlen_spec(d, {500, 129, 7, 40}, {128, 640, 1, 0}, causal), seed++);
    }
}

// Small shapes for compute-sanitizer (tests/gpu/run): every bucket, causal, GQA, ragged tiles.
TEST(AttentionGpuSmall, Fp8Forward) {
  if (!hopper_device()) GTEST_SKIP() << "the fp8 forward runs on sm_90";
  uint64_t seed = 1300;
  for (int d : {64, 128, 256}) {
    check_fp8(spec(DType::f32, 1, 77, 200, 2, 1, d, true), seed++);
    check_fp8(spec(DType::f32, 1, 200, 77, 2, 2, d, false), seed++);
    check_fp8(spec(DType::f32, 2, 70, 90, 4, 2, d, true), seed++, true);  // per-head descales
    check_fp8(varlen_spec(d, {1, 70, 33}, {90, 17, 0}, true), seed++);       // varlen
  }
}

// Varlen fp8 with k / v holding rows past cu_seqlens_k[batch], filled with NaN codes: never
// read into a result (the same bits as without them).
TEST(AttentionGpuSmall, Fp8VarlenRowsPastTheEnd) {
  if (!hopper_device()) GTEST_SKIP() << "the fp8 forward runs on sm_90";
  AttentionSpec s = varlen_spec(128, {40, 100}, {70, 129}, true);
  s.dtype = DType::f32;
  AttentionCase c(s, 1500);
  Fp8Inputs f = quantize_e4m3(c);
  const int64_t extra = 300, rows = c.total_k, row_bytes = int64_t(s.kv_heads) * s.hdim;
  HostTensor kx(DType::e4m3, {rows + extra, s.kv_heads, s.hdim}), vx = kx;
  for (HostTensor* t : {&kx, &vx}) std::fill_n(t->ptr<uint8_t>(), t->numel(), uint8_t{0x7f});
  std::copy_n(f.k8.ptr<uint8_t>(), rows * row_bytes, kx.ptr<uint8_t>());
  std::copy_n(f.v8.ptr<uint8_t>(), rows * row_bytes, vx.ptr<uint8_t>());
  DeviceTensor q(f.q8), k(f.k8), v(f.v8), k2(kx), v2(vx), cu_q, cu_k;
  cu_q.upload(c.cu_q);
  cu_k.upload(c.cu_k);
  AttentionOptions o = c.opts;
  o.cu_seqlens_q = cu_q.view(), o.cu_seqlens_k = cu_k.view();
  o.max_seqlen_q = c.spec.seqlen_q, o.max_seqlen_k = c.spec.seqlen_k;
  HostTensor out_a(DType::bf16, c.q_shape()), out_b = out_a, lse_a(DType::f32, c.lse_shape()),
      lse_b = lse_a;
  for (auto [kk, vv, oh, lh] : {std::tuple{&k, &v, &out_a, &lse_a}, {&k2, &v2, &out_b, &lse_b}}) {
    DeviceTensor out(*oh), lse(*lh);
    out.poison();
    lse.poison();
    attention_forward(q, *kk, *vv, out, lse, o);
    FK_CUDA_CHECK(cudaDeviceSynchronize());
    out.download(*oh);
    lse.download(*lh);
  }
  EXPECT_TRUE(out_a.same_bytes(out_b));
  EXPECT_TRUE(lse_a.same_bytes(lse_b));
  for (int64_t i = 0; i < out_a.numel(); ++i) ASSERT_TRUE(std::isfinite(out_a.get(i))) << i;
}

// What the fp8 kernel does not take is an Error naming the option, with nothing written.
TEST(AttentionGpuSmall, Fp8UnsupportedOptions) {
  if (!hopper_device()) GTEST_SKIP() << "the fp8 forward runs on sm_90";
  AttentionCase c(spec(DType::f32, 1, 64, 64, 2, 2, 64), 1400);
  Fp8Inputs f = quantize_e4m3(c);
  DeviceTensor q(f.q8), k(f.k8), v(f.v8);
  HostTensor out_h(DType::bf16, c.q_shape()), lse_h(DType::f32, c.lse_shape());
  DeviceTensor out(out_h), lse(lse_h);
  auto expect_error = [&](const char* prefix, const AttentionOptions& o) {
    out.poison();
    lse.poison();
    try {
      attention_forward(q, k, v, out, lse, o);
      ADD_FAILURE() << "no error for " << prefix;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(prefix, 0), 0u) << e.what();
    }
    HostTensor o2(DType::bf16, c.q_shape());
    out.download(o2);
    for (int64_t i = 0; i < o2.numel(); ++i) ASSERT_EQ(o2.ptr<uint16_t>()[i], 0xffff) << prefix;
  };
  AttentionOptions o;
  o.window_left = 8;
  expect_error("window_left:", o);
  o = {};
  o.softcap = 30.f;
  expect_error("softcap:", o);
  o = {};
  o.dropout_p = 0.1f;
  expect_error("dropout_p:", o);
  o = {};
  ScopedPath path("sm80");
  expect_error("FLASHKIT_ATTENTION_PATH:", o);
}
