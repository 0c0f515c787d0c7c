// GPU MAS (src/cuda/mas/) against the CPU backend, which tests/cpp/test_mas.cpp holds equal to
// the Cython transcription: byte-equal paths and durations on random, tie-heavy, random-length,
// -inf-holding, fp16/bf16 and strided inputs for each NEG, every path dtype; fused vs CPU fused
// and vs unfused; bad lengths reported through the status word; GPU-only limits.
// Tests named *Small* also run under compute-sanitizer (tests/gpu/run).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "common/host_tensor.h"
#include "mas_case.h"
#include "common/mas_likelihood.h"
#include "device_tensor.h"
#include "flashkit/errors.h"
#include "flashkit/mas.h"

using namespace flashkit;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

void random_lengths(std::mt19937_64& rng, int64_t B, int64_t T, int64_t S, std::vector<int32_t>& tx,
                    std::vector<int32_t>& ty) {
  tx.resize(B);
  ty.resize(B);
  for (int64_t b = 0; b < B; ++b) {
    int x = std::uniform_int_distribution<int>(1, static_cast<int>(T))(rng);
    int y = std::uniform_int_distribution<int>(x, static_cast<int>(S))(rng);
    if (b % 5 == 1) y = x;
    if (b % 5 == 2) x = 1;
    if (b % 5 == 3) x = static_cast<int>(T), y = static_cast<int>(S);
    tx[b] = x;
    ty[b] = y;
  }
}

// Runs CPU and GPU on the same value view (host view + the same strides on the device) and
// expects byte-equal path (dtype pd, optionally through a transposed view) and durations.
void expect_gpu_equals_cpu(const HostTensor& storage, const TensorView& host_value,
                           const std::vector<int32_t>& tx, const std::vector<int32_t>& ty,
                           float neg, DType pd = DType::u8, bool transposed_path = false,
                           const char* what = "") {
  const int64_t B = host_value.shape[0], T = host_value.shape[1], S = host_value.shape[2];
  std::vector<int64_t> pshape =
      transposed_path ? std::vector<int64_t>{B, S, T} : std::vector<int64_t>{B, T, S};
  HostTensor p_cpu(pd, pshape), d_cpu(DType::i32, {B, T}), p_gpu(pd, pshape),
      d_gpu(DType::i32, {B, T}), status(DType::i32, {1});
  auto path_view = [&](void* data, Device dev, int id) {
    return transposed_path ? TensorView::strided(data, pd, {B, T, S}, {S * T, 1, T}, dev, id)
                           : TensorView::strided(data, pd, {B, T, S}, {T * S, S, 1}, dev, id);
  };
  HostTensor txt = lengths_tensor(tx), mel = lengths_tensor(ty);
  MasOptions opts;
  opts.neg = neg;
  monotonic_alignment_search(host_value, txt, mel, path_view(p_cpu.data(), Device::cpu, 0), d_cpu,
                             opts);

  DeviceTensor dv(storage), dtx(txt), dty(mel), dp(p_gpu), dd(d_gpu), ds(status);
  dp.poison();
  dd.poison();
  ds.poison();
  TensorView v = host_value;
  v.data = static_cast<char*>(dv.view().data) +
           (static_cast<const char*>(host_value.data) - static_cast<const char*>(storage.data()));
  v.device = Device::cuda;
  v.device_id = dv.view().device_id;
  opts.status = ds.view();
  monotonic_alignment_search(
      v, dtx, dty, path_view(dp.view().data, Device::cuda, dv.view().device_id), dd, opts);
  FK_CUDA_CHECK(cudaDeviceSynchronize());
  dp.download(p_gpu);
  dd.download(d_gpu);
  ds.download(status);
  EXPECT_EQ(status.ptr<int32_t>()[0], -1) << what;
  int64_t bad = 0;
  const auto a = bytes_of(p_cpu), b = bytes_of(p_gpu);
  for (size_t i = 0; i < a.size(); ++i) bad += a[i] != b[i];
  EXPECT_EQ(bad, 0) << what << ": path bytes differ (neg " << neg << ", " << dtype_name(pd) << ")";
  EXPECT_EQ(bytes_of(d_cpu), bytes_of(d_gpu)) << what << ": durations differ";
}

void expect_gpu_equals_cpu(const HostTensor& v, const std::vector<int32_t>& tx,
                           const std::vector<int32_t>& ty, float neg, const char* what) {
  expect_gpu_equals_cpu(v, v.view(), tx, ty, neg, DType::u8, false, what);
}

}  // namespace

TEST(MasGpuSmall, RandomTieHeavyAndInfEachNeg) {
  std::mt19937_64 rng(101);
  // T spans one warp (K = 4), several warps, and the K = 8 kernel.
  for (auto [B, T, S] : {std::tuple{6, 37, 90}, std::tuple{5, 130, 300}, std::tuple{3, 600, 1300}})
    for (float neg : {-1e9f, -1e32f, -kInf}) {
      std::vector<int32_t> tx, ty;
      random_lengths(rng, B, T, S, tx, ty);
      HostTensor v(DType::f32, {B, T, S});
      v.fill_normal(rng, -2.f, 1.f);
      expect_gpu_equals_cpu(v, tx, ty, neg, "normal");
      v.fill_int(rng, -2, 0);
      expect_gpu_equals_cpu(v, tx, ty, neg, "ties");
      std::uniform_int_distribution<int64_t> cell(0, v.numel() - 1);
      for (int i = 0; i < v.numel() / 10; ++i) v.set(cell(rng), -kInf);
      expect_gpu_equals_cpu(v, tx, ty, neg, "-inf cells");
    }
}

// NaN and +-inf cells: the cell adds both candidates and selects by the compare's mask (v7), which
// must give Cython's value where an operand is NaN (the compare fails: v_cur + value) or the sum
// is inf - inf; sparse and dense specials, one warp, several warps and a split item (B = 3: odd).
TEST(MasGpuSmall, NanAndInfCells) {
  std::mt19937_64 rng(111);
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), kInf, -kInf};
  for (auto [B, T, S] : {std::tuple{4, 60, 140}, std::tuple{3, 600, 1300}})
    for (int per : {200, 9}) {  // one special cell in `per`
      HostTensor v(DType::f32, {B, T, S});
      v.fill_normal(rng, -2.f, 1.f);
      std::uniform_int_distribution<int64_t> cell(0, v.numel() - 1);
      for (int64_t i = 0; i < v.numel() / per; ++i) v.set(cell(rng), specials[i % 3]);
      std::vector<int32_t> tx, ty;
      random_lengths(rng, B, T, S, tx, ty);
      for (float neg : {-1e9f, -kInf}) expect_gpu_equals_cpu(v, tx, ty, neg, "nan/inf cells");
    }
}

TEST(MasGpuSmall, HalfAndBfloat16) {
  std::mt19937_64 rng(102);
  for (DType dt : {DType::f16, DType::bf16})
    for (auto [B, T, S] : {std::tuple{5, 45, 123}, std::tuple{3, 700, 1500}}) {
      std::vector<int32_t> tx, ty;
      random_lengths(rng, B, T, S, tx, ty);
      HostTensor v(dt, {B, T, S});
      v.fill_normal(rng, -2.f, 1.f);
      expect_gpu_equals_cpu(v, tx, ty, -1e9f, dtype_name(dt));
      v.fill_int(rng, -1, 0);
      expect_gpu_equals_cpu(v, tx, ty, -kInf, dtype_name(dt));
    }
}

// The shared-memory stage (v8) of contiguous, 16-byte aligned rows in each dtype: rows ending in
// half a chunk (the last 16 bytes zero-filled, not read), rows past T in the last warp, blocks
// with the diagonal mask and blocks without, one warp and three (the rings wrap past 8 stages),
// tie-heavy values and -inf cells.
TEST(MasGpuSmall, StagedRowsEachDtype) {
  std::mt19937_64 rng(113);
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    const int64_t half = dt == DType::f32 ? 4 : 8;  // elements in 16 bytes
    // One DP warp (32 staged chunks a warp), two (16: T = 200) and three (8: T = 300); S past
    // several turns of the slots (T = 100).
    for (auto [B, T, S] : {std::tuple<int64_t, int64_t, int64_t>{3, 37, 64 * half + half},
                           std::tuple<int64_t, int64_t, int64_t>{2, 100, 500 * half + half},
                           std::tuple<int64_t, int64_t, int64_t>{2, 200, 90 * half + half},
                           std::tuple<int64_t, int64_t, int64_t>{3, 300, 125 * half}}) {
      std::vector<int32_t> tx, ty;
      random_lengths(rng, B, T, S, tx, ty);
      tx[0] = static_cast<int32_t>(T), ty[0] = static_cast<int32_t>(S);
      HostTensor v(dt, {B, T, S});
      v.fill_normal(rng, -2.f, 1.f);
      expect_gpu_equals_cpu(v, tx, ty, -1e9f, dtype_name(dt));
      v.fill_int(rng, -2, 0);
      std::uniform_int_distribution<int64_t> cell(0, v.numel() - 1);
      for (int i = 0; i < v.numel() / 20; ++i) v.set(cell(rng), -kInf);
      expect_gpu_equals_cpu(v, tx, ty, -kInf, dtype_name(dt));
    }
  }
}

// The band kernel (v18: texts of 1 to 256 rows, contiguous 16-byte aligned rows, sm_80 on): every
// rows-a-lane count (1, 2, 4) at both ends of its range on one DP warp and on two (129, 256: the
// ring between the warps), each dtype, rows whose last 16-byte
// piece is partial (a padded view: the tail copy), ragged lengths with tx == ty and tx == 1,
// -inf / NaN cells, both path layouts the kernel writes itself (rows, columns), and a mel too
// long for its shared memory (the staged kernel then). Durations only and non-dense paths:
// NonDensePathAndDurationsOnly (T = 90).
TEST(MasGpuSmall, BandKernelShapes) {
  std::mt19937_64 rng(115);
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), -kInf};
  int round = 0;
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (auto [B, T, S] : {std::tuple<int64_t, int64_t, int64_t>{3, 1, 37},
                           std::tuple<int64_t, int64_t, int64_t>{4, 32, 133},
                           std::tuple<int64_t, int64_t, int64_t>{3, 33, 70},
                           std::tuple<int64_t, int64_t, int64_t>{5, 64, 301},
                           std::tuple<int64_t, int64_t, int64_t>{3, 65, 66},
                           std::tuple<int64_t, int64_t, int64_t>{4, 128, 517},
                           std::tuple<int64_t, int64_t, int64_t>{3, 129, 390},
                           std::tuple<int64_t, int64_t, int64_t>{2, 256, 1031}}) {
      const int64_t es = dt == DType::f32 ? 4 : 2, Sp = (S * es + 15) / 16 * 16 / es + 8;
      std::vector<int32_t> tx, ty;
      random_lengths(rng, B, T, S, tx, ty);
      HostTensor storage(dt, {B, T, Sp});
      storage.fill_normal(rng, -2.f, 1.f);
      if (round++ % 2 == 1) storage.fill_int(rng, -2, 0);
      std::uniform_int_distribution<int64_t> cell(0, storage.numel() - 1);
      for (int64_t i = 0; i < storage.numel() / 50; ++i) storage.set(cell(rng), specials[i % 2]);
      const TensorView v = TensorView::strided(storage.data(), dt, {B, T, S}, {T * Sp, Sp, 1});
      expect_gpu_equals_cpu(storage, v, tx, ty, -1e9f, DType::f32, false, "band, rows path");
      expect_gpu_equals_cpu(storage, v, tx, ty, -kInf, DType::u8, true, "band, columns path");
    }
  // Whole rows (no tail), a long mel: 4 rows a lane with the rings wrapping many times (one warp,
  // two), and a mel whose decision words leave no room for the ring (the staged kernel).
  for (auto [B, T, S] : {std::tuple<int64_t, int64_t, int64_t>{2, 120, 2800},
                         std::tuple<int64_t, int64_t, int64_t>{2, 250, 1500},
                         std::tuple<int64_t, int64_t, int64_t>{2, 100, 13000}}) {
    HostTensor v(DType::f32, {B, T, S});
    v.fill_normal(rng, -2.f, 1.f);
    std::vector<int32_t> tx, ty;
    random_lengths(rng, B, T, S, tx, ty);
    tx[0] = static_cast<int32_t>(T), ty[0] = static_cast<int32_t>(S);
    expect_gpu_equals_cpu(v, tx, ty, -1e9f, "band, long mel");
  }
}

TEST(MasGpuSmall, StridedViewsAndPathDtypes) {
  std::mt19937_64 rng(103);
  const int64_t B = 4, T = 70, S = 150;
  std::vector<int32_t> tx, ty;
  random_lengths(rng, B, T, S, tx, ty);
  HostTensor vits(DType::f32, {B, S, T});  // VITS keeps [B, mel, text]
  vits.fill_int(rng, -2, 0);
  TensorView vt = TensorView::strided(vits.data(), DType::f32, {B, T, S}, {S * T, 1, T});
  expect_gpu_equals_cpu(vits, vt, tx, ty, -1e9f, DType::f32, true, "vits layout");
  HostTensor padded(DType::bf16, {B, T + 1, S + 3});
  padded.fill_normal(rng);
  TensorView vp =
      TensorView::strided(padded.data(), DType::bf16, {B, T, S}, {(T + 1) * (S + 3), S + 3, 1});
  expect_gpu_equals_cpu(padded, vp, tx, ty, -1e9f, DType::i32, false, "padded rows");
  HostTensor v(DType::f32, {B, T, S});
  v.fill_normal(rng);
  for (DType pd : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::u8, DType::bool8})
    expect_gpu_equals_cpu(v, v.view(), tx, ty, -1e9f, pd, false, dtype_name(pd));
}

// Lengths live on the device: an item without a path is reported in status, not thrown; its rows
// are zero and every other item is still right.
TEST(MasGpuSmall, BadLengthsReportedInStatus) {
  std::mt19937_64 rng(104);
  const int64_t B = 5, T = 20, S = 40;
  HostTensor v(DType::f32, {B, T, S});
  v.fill_normal(rng);
  std::vector<int32_t> tx = {10, 20, 15, 0, 12}, ty = {30, 40, 14, 9, 12};  // item 2: tx > ty
  HostTensor txt = lengths_tensor(tx), mel = lengths_tensor(ty), path(DType::f32, {B, T, S}),
             dur(DType::i32, {B, T}), status(DType::i32, {1});
  DeviceTensor dv(v), dtx(txt), dty(mel), dp(path), dd(dur), ds(status);
  dp.poison();
  dd.poison();
  MasOptions opts;
  opts.status = ds.view();
  monotonic_alignment_search(dv, dtx, dty, dp, dd, opts);
  FK_CUDA_CHECK(cudaDeviceSynchronize());
  ds.download(status);
  dp.download(path);
  dd.download(dur);
  EXPECT_EQ(status.ptr<int32_t>()[0], 2);
  for (int64_t i = 0; i < T * S; ++i) ASSERT_EQ(path.ptr<float>()[2 * T * S + i], 0.f) << i;
  for (int64_t x = 0; x < T; ++x) ASSERT_EQ(dur.ptr<int32_t>()[2 * T + x], 0);
  // The CPU on the other items (item 2 replaced by a valid one) agrees elsewhere.
  tx[2] = 1;
  HostTensor txt2 = lengths_tensor(tx), p_cpu(DType::f32, {B, T, S}), d_cpu(DType::i32, {B, T});
  monotonic_alignment_search(v, txt2, mel, p_cpu, d_cpu);
  for (int64_t b : {0, 1, 3, 4})
    for (int64_t i = 0; i < T * S; ++i)
      ASSERT_EQ(path.ptr<float>()[b * T * S + i], p_cpu.ptr<float>()[b * T * S + i])
          << b << "," << i;
  // A valid batch writes -1.
  DeviceTensor dtx2(txt2);
  monotonic_alignment_search(dv, dtx2, dty, dp, dd, opts);
  FK_CUDA_CHECK(cudaDeviceSynchronize());
  ds.download(status);
  EXPECT_EQ(status.ptr<int32_t>()[0], -1);
}

// Fused on the GPU == fused on the CPU, and == unfused on the likelihood materialised with the
// same recipe, for one problem.
static void check_fused(std::mt19937_64& rng, DType dt, int B, int C, int T, int S) {
  HostTensor z(dt, {B, C, S}), m(dt, {B, C, T}), logs(dt, {B, C, T});
  z.fill_normal(rng);
  m.fill_normal(rng);
  logs.fill_uniform(rng, -1.f, 0.5f);
  std::vector<int32_t> tx, ty;
  random_lengths(rng, B, T, S, tx, ty);
  HostTensor txt = lengths_tensor(tx), mel = lengths_tensor(ty);
  HostTensor p_cpu(DType::u8, {B, T, S}), d_cpu(DType::i32, {B, T}),
      p_gpu(DType::u8, {B, T, S}), d_gpu(DType::i32, {B, T}), p_unf(DType::u8, {B, T, S});
  monotonic_alignment_search_fused(z, m, logs, txt, mel, p_cpu, d_cpu);
  DeviceTensor dz(z), dm(m), dl(logs), dtx(txt), dty(mel), dp(p_gpu), dd(d_gpu);
  dp.poison();
  dd.poison();
  monotonic_alignment_search_fused(dz, dm, dl, dtx, dty, dp, dd);
  FK_CUDA_CHECK(cudaDeviceSynchronize());
  dp.download(p_gpu);
  dd.download(d_gpu);
  EXPECT_EQ(bytes_of(p_cpu), bytes_of(p_gpu)) << dtype_name(dt) << " C " << C;
  EXPECT_EQ(bytes_of(d_cpu), bytes_of(d_gpu)) << dtype_name(dt) << " C " << C;
  // Unfused on the likelihood materialised with the same recipe: the same path.
  HostTensor v(DType::f32, {B, T, S});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t x = 0; x < T; ++x)
      for (int64_t y = 0; y < S; ++y) {
        float acc = 0.f;
        for (int64_t c = 0; c < C; ++c)
          acc = mas::add_rn(acc, mas::term(mas::coeffs(m.get((b * C + c) * T + x),
                                                       logs.get((b * C + c) * T + x)),
                                           z.get((b * C + c) * S + y)));
        v.ptr<float>()[(b * T + x) * S + y] = acc;
      }
  DeviceTensor dv(v), dpu(p_unf);
  monotonic_alignment_search(dv, dtx, dty, dpu, TensorView{});
  FK_CUDA_CHECK(cudaDeviceSynchronize());
  dpu.download(p_unf);
  EXPECT_EQ(bytes_of(p_unf), bytes_of(p_gpu)) << dtype_name(dt) << " C " << C;
}

TEST(MasGpuSmall, FusedEqualsCpuFusedAndUnfused) {
  std::mt19937_64 rng(105);
  // Frames a multiple of 8 (S = 80) take the vector z loads, the others the scalar ones; T = 600
  // at B = 2 splits each item over 4 CTAs.
  for (DType dt : {DType::f32, DType::f16, DType::bf16})
    for (auto [B, C, T, S] :
         {std::tuple{4, 5, 33, 80}, std::tuple{3, 80, 300, 700}, std::tuple{2, 8, 600, 900}})
      check_fused(rng, dt, B, C, T, S);
}

// A batch that splits each item over 2 CTAs at 2 rows a lane, vector z loads (not under the
// sanitizers: 34 items).
TEST(MasGpu, FusedTwoRowsALaneSplit) {
  std::mt19937_64 rng(106);
  for (DType dt : {DType::f32, DType::bf16}) check_fused(rng, dt, 34, 4, 600, 1200);
}

TEST(MasGpuSmall, GpuLimitsAreErrorsAndWriteNothing) {
  HostTensor v(DType::f32, {1, 2049, 4}), txt = lengths_tensor({1}), mel = lengths_tensor({4}),
                                          path(DType::u8, {1, 2049, 4});
  DeviceTensor dv(v), dtx(txt), dty(mel), dp(path);
  dp.poison();
  EXPECT_THROW(
      {
        try {
          monotonic_alignment_search(dv, dtx, dty, dp, TensorView{});
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("value: expected at most 2048"), std::string::npos)
              << e.what();
          throw;
        }
      },
      Error);
  FK_CUDA_CHECK(cudaDeviceSynchronize());
  HostTensor back(DType::u8, {1, 2049, 4});
  dp.download(back);
  for (int64_t i = 0; i < back.numel(); ++i) ASSERT_EQ(back.ptr<uint8_t>()[i], 0xff);
  HostTensor z(DType::f32, {1, 257, 4}), m(DType::f32, {1, 257, 2}), logs(DType::f32, {1, 257, 2}),
      dur(DType::i32, {1, 2});
  DeviceTensor dz(z), dm(m), dl(logs), dd(dur);
  try {
    monotonic_alignment_search_fused(dz, dm, dl, dtx, dty, TensorView{}, dd);
    ADD_FAILURE() << "no error for 257 channels";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("z: expected at most 256 channels"), std::string::npos)
        << e.what();
  }
}

// The kernel writes dense paths itself; any other path view goes through the separate path
// kernels, and durations alone need no path at all.
TEST(MasGpuSmall, NonDensePathAndDurationsOnly) {
  std::mt19937_64 rng(108);
  const int64_t B = 5, T = 90, S = 260;
  std::vector<int32_t> tx, ty;
  random_lengths(rng, B, T, S, tx, ty);
  HostTensor v(DType::f32, {B, T, S});
  v.fill_int(rng, -2, 0);
  HostTensor txt = lengths_tensor(tx), mel = lengths_tensor(ty), want(DType::f16, {B, T, S}),
             d_want(DType::i32, {B, T}), padded(DType::f16, {B, T, S + 5}),
             back(DType::f16, {B, T, S + 5}), d_got(DType::i32, {B, T});
  monotonic_alignment_search(v, txt, mel, want, d_want);
  DeviceTensor dv(v), dtx(txt), dty(mel), dp(padded), dd(d_got);
  dp.poison();
  dd.poison();
  TensorView pv = TensorView::strided(dp.view().data, DType::f16, {B, T, S},
                                      {T * (S + 5), S + 5, 1}, Device::cuda, dp.view().device_id);
  monotonic_alignment_search(dv, dtx, dty, pv, TensorView{});
  monotonic_alignment_search(dv, dtx, dty, TensorView{}, dd);
  FK_CUDA_CHECK(cudaDeviceSynchronize());
  dp.download(back);
  dd.download(d_got);
  int64_t bad = 0;
  for (int64_t r = 0; r < B * T; ++r) {
    for (int64_t y = 0; y < S; ++y)
      bad += back.ptr<uint16_t>()[r * (S + 5) + y] != want.ptr<uint16_t>()[r * S + y];
    for (int64_t y = S; y < S + 5; ++y) bad += back.ptr<uint16_t>()[r * (S + 5) + y] != 0xffff;
  }
  EXPECT_EQ(bad, 0) << "padded path (pad must stay poisoned)";
  EXPECT_EQ(bytes_of(d_got), bytes_of(d_want));
}

// One CTA per item with the decision bits in global memory (too many frames for shared memory):
// the other side of the shared-memory bits of the small shapes.
TEST(MasGpuSmall, LongMelBitsInGlobalMemory) {
  std::mt19937_64 rng(109);
  const int64_t B = 2, T = 40, S = 12000;  // 375 words x 128 rows x 4 B > 160 KiB
  HostTensor v(DType::f32, {B, T, S});
  v.fill_normal(rng);
  expect_gpu_equals_cpu(v, {40, 17}, {12000, 11999}, -1e9f, "long mel");
}

// Full-size items (T up to 2048, the K = 8 kernel's limit) and a long random-length batch.
TEST(MasGpu, LargeItemsMatchCpu) {
  std::mt19937_64 rng(106);
  for (auto [B, T, S] : {std::tuple{2, 2048, 8192}, std::tuple{6, 512, 2048}}) {
    HostTensor v(DType::f32, {B, T, S});
    v.fill_normal(rng, -2.f, 1.f);
    std::vector<int32_t> tx(B, T), ty(B, S);
    tx[B - 1] = T / 2 + 3;
    ty[B - 1] = S - 5;
    expect_gpu_equals_cpu(v, tx, ty, -1e9f, "large");
  }
}

// Batches too large to split items over clusters run one CTA per item: K = 8 rows a lane past 512
// rows (3 DP warps + the path warp here; 8 DP warps and the separate path kernel at T = 1800).
TEST(MasGpu, ManyItemsEightRowsALane) {
  std::mt19937_64 rng(110);
  for (auto [B, T, S] : {std::tuple{67, 520, 600}, std::tuple{67, 1800, 1850}}) {
    HostTensor v(DType::f16, {B, T, S});
    v.fill_normal(rng, -2.f, 1.f);
    std::vector<int32_t> tx, ty;
    random_lengths(rng, B, T, S, tx, ty);
    expect_gpu_equals_cpu(v, tx, ty, -1e9f, "many items");
  }
}

// Split items with the path written by the kernel (T = 512: 2 CTAs an item): the path warp zeroes
// its share in slices paced by warp 0's progress (v7); an odd batch with ragged lengths, items
// whose last CTAs have no rows (they zero at once), tx == ty, and 4- and 2-byte path elements
// (zero slices end mid-vector). T = 1100 (4 CTAs an item): the same through the separate path
// kernel, which writes dense paths past 512 text rows (v9).
TEST(MasGpuSmall, SplitItemsPacedPathRagged) {
  std::mt19937_64 rng(112);
  const int64_t B = 3;
  for (auto [T, S, tx, ty] :
       {std::tuple<int64_t, int64_t, std::vector<int32_t>, std::vector<int32_t>>{
            512, 1301, {512, 200, 400}, {1301, 999, 400}},
        std::tuple<int64_t, int64_t, std::vector<int32_t>, std::vector<int32_t>>{
            1100, 2301, {1100, 300, 777}, {2301, 1999, 777}}}) {
    HostTensor v(DType::f32, {B, T, S});
    v.fill_normal(rng, -2.f, 1.f);
    for (DType pd : {DType::f32, DType::bf16})
      expect_gpu_equals_cpu(v, v.view(), tx, ty, -1e9f, pd, false, "split items, path");
  }
}

// The path kernel that zeroes beside the DP (v17, sm_90: dense rows-contiguous paths whose rows are
// whole 16-byte pieces, texts over 256 rows; elsewhere the same test runs the older kernels):
// ragged lengths with tx == ty, tx == 1 and full items, every path dtype whose rows stay 16-byte
// pieces, through the staged kernel (T = 300) and the split register path (T = 1100).
TEST(MasGpuSmall, EarlyZerosPathKernel) {
  std::mt19937_64 rng(114);
  for (auto [B, T, S] : {std::tuple<int64_t, int64_t, int64_t>{5, 300, 640},
                         std::tuple<int64_t, int64_t, int64_t>{3, 1100, 2304}}) {
    std::vector<int32_t> tx, ty;
    random_lengths(rng, B, T, S, tx, ty);
    tx[0] = static_cast<int32_t>(T), ty[0] = static_cast<int32_t>(S);
    HostTensor v(DType::f32, {B, T, S});
    v.fill_normal(rng, -2.f, 1.f);
    for (DType pd : {DType::f32, DType::bf16, DType::u8})
      expect_gpu_equals_cpu(v, v.view(), tx, ty, -1e9f, pd, false, "early zeros");
  }
}

// Mask lines as lengths (what maximum_path passes: mask[:, :, 0], mask[:, 0, :]) on a batch long
// enough to be split over a cluster of CTAs per item.
TEST(MasGpuSmall, MaskLineLengthsAndSplitItems) {
  std::mt19937_64 rng(107);
  const int64_t B = 4, T = 1100, S = 2300;
  HostTensor v(DType::f32, {B, T, S});
  v.fill_int(rng, -2, 0);
  std::vector<int32_t> tx, ty;
  random_lengths(rng, B, T, S, tx, ty);
  tx[0] = 700, ty[0] = 2000;  // the last CTAs of the cluster have no rows in the item
  HostTensor txt = lengths_tensor(tx), mel = lengths_tensor(ty), want(DType::u8, {B, T, S}),
             got(DType::u8, {B, T, S}), tline(DType::f32, {B, T}), sline(DType::u8, {B, S});
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t x = 0; x < T; ++x) tline.set(b * T + x, x < tx[b]);
    for (int64_t y = 0; y < S; ++y) sline.set(b * S + y, y < ty[b]);
  }
  monotonic_alignment_search(v, txt, mel, want, TensorView{});
  DeviceTensor dv(v), dt(tline), ds(sline), dp(got);
  dp.poison();
  monotonic_alignment_search(dv, dt, ds, dp, TensorView{});
  FK_CUDA_CHECK(cudaDeviceSynchronize());
  dp.download(got);
  EXPECT_EQ(bytes_of(got), bytes_of(want));
}
