// Block-sparse pattern builders (block_mask.h): the patterns' defining properties, broadcast over
// leading dims, strided masks, and their argument errors (attention's own block-mask handling is
// tested in test_attention.cpp).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "common/host_tensor.h"
#include "flashkit/block_mask.h"
#include "flashkit/errors.h"

using namespace flashkit;

TEST(BlockMask, LocalGlobalPattern) {
  HostTensor m(DType::u8, {2, 3, 6, 8});  // 6 query blocks, 8 key blocks: diagonal shifted by 2
  m.poison();
  block_mask_local_global(m, /*local=*/2, /*global=*/1);
  const uint8_t* p = m.ptr<uint8_t>();
  for (int l = 0; l < 6; ++l)
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j < 8; ++j) {
        const int diag = i + 2;
        const bool want = (j - diag < 2 && diag - j < 2) || j < 1 || i < 1;
        EXPECT_EQ(p[l * 48 + i * 8 + j], want ? 1 : 0) << "l" << l << " i" << i << " j" << j;
      }
  block_mask_local_global(m, 2, 0, /*causal=*/true);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 8; ++j) EXPECT_EQ(p[i * 8 + j], (j <= i + 2 && i + 2 - j < 2) ? 1 : 0);
}

TEST(BlockMask, ButterflyPatternAndDensity) {
  HostTensor m(DType::u8, {8, 8});
  m.poison();
  block_mask_butterfly(m);
  const uint8_t* p = m.ptr<uint8_t>();
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) {
      const int x = i ^ j;
      EXPECT_EQ(p[i * 8 + j], (x == 0 || x == 1 || x == 2 || x == 4) ? 1 : 0);
    }
  EXPECT_DOUBLE_EQ(block_mask_density(m), 4.0 / 8.0);  // diagonal + log2(8) partners per row
}

TEST(BlockMask, StridedViewWritesOnlyItsCells) {
  HostTensor buf(DType::u8, {4, 10});
  buf.fill(7.f);
  TensorView v = TensorView::strided(buf.data(), DType::u8, {4, 4}, {10, 2});
  block_mask_local_global(v, 1, 0);
  const uint8_t* p = buf.ptr<uint8_t>();
  for (int i = 0; i < 4; ++i)
    for (int c = 0; c < 10; ++c) {
      if (c % 2 == 1 || c >= 8) EXPECT_EQ(p[i * 10 + c], 7) << "untouched cell " << i << "," << c;
      else EXPECT_EQ(p[i * 10 + c], c / 2 == i ? 1 : 0);
    }
}

TEST(BlockMask, ErrorsNameTheArgumentAndWriteNothing) {
  HostTensor m(DType::u8, {4, 6});
  m.fill(7.f);
  HostTensor f(DType::f32, {4, 4});
  auto expect = [&](auto fn, const std::string& prefix) {
    try {
      fn();
      FAIL() << "no error, expected one starting with " << prefix;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(prefix, 0), 0u) << e.what();
    }
  };
  expect([&] { block_mask_local_global(m, -1, 0); }, "local:");
  expect([&] { block_mask_local_global(m, 1, -2); }, "global:");
  expect([&] { block_mask_butterfly(m); }, "mask: expected a square");
  expect([&] { block_mask_butterfly(f); }, "mask: expected dtype");
  HostTensor one(DType::u8, {5});
  expect([&] { block_mask_density(one); }, "mask: expected 2 to 4 dims");
  for (int64_t i = 0; i < m.numel(); ++i) EXPECT_EQ(m.ptr<uint8_t>()[i], 7);
}
