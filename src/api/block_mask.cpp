// The block-mask pattern builders (include/flashkit/block_mask.h): plain loops on the CPU, the
// mask is small (one byte per 128x128 block).
#include "flashkit/block_mask.h"

#include <cstdint>
#include <cstdlib>

#include "api/validate.h"

namespace flashkit {

using detail::fail;

namespace {

void check_mask(const TensorView& m) {
  detail::check_defined(m, "mask");
  detail::check_dtype(m, "mask", {DType::u8, DType::bool8});
  if (m.device != Device::cpu) fail("mask: expected a CPU tensor, got a CUDA one");
  if (m.ndim < 2 || m.ndim > 4) fail("mask: expected 2 to 4 dims, got ", m.ndim, " ", m.shape_str());
  detail::check_nonnegative_strides(m, "mask");
}

// Calls f(i, j, cell) for every (query block, key block) cell of every leading index.
template <class F>
void visit(const TensorView& m, F f) {
  const int64_t rows = m.shape[m.ndim - 2], cols = m.shape[m.ndim - 1];
  int64_t lead = 1;
  for (int d = 0; d < m.ndim - 2; ++d) lead *= m.shape[d];
  auto* base = static_cast<uint8_t*>(m.data);
  for (int64_t l = 0; l < lead; ++l) {
    int64_t off = 0, rest = l;
    for (int d = m.ndim - 3; d >= 0; --d) {
      off += (rest % m.shape[d]) * m.stride[d];
      rest /= m.shape[d];
    }
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        f(i, j, base[off + i * m.stride[m.ndim - 2] + j * m.stride[m.ndim - 1]]);
  }
}

template <class Keep>
void fill(const TensorView& m, Keep keep) {
  visit(m, [&](int64_t i, int64_t j, uint8_t& cell) { cell = keep(i, j) ? 1 : 0; });
}

}  // namespace

void block_mask_local_global(const TensorView& mask, int local, int global, bool causal) {
  check_mask(mask);
  if (local < 0) fail("local: expected >= 0 blocks, got ", local);
  if (global < 0) fail("global: expected >= 0 blocks, got ", global);
  const int64_t shift = mask.shape[mask.ndim - 1] - mask.shape[mask.ndim - 2];
  fill(mask, [&](int64_t i, int64_t j) {
    const int64_t diag = i + shift;  // the key block on query block i's aligned diagonal
    if (causal && j > diag) return false;
    return std::llabs(j - diag) < local || j < global || i < global;
  });
}

void block_mask_butterfly(const TensorView& mask) {
  check_mask(mask);
  const int64_t rows = mask.shape[mask.ndim - 2], cols = mask.shape[mask.ndim - 1];
  if (rows != cols)
    fail("mask: expected a square block grid for a butterfly pattern, got ", rows, " x ", cols);
  fill(mask, [](int64_t i, int64_t j) {
    const uint64_t x = static_cast<uint64_t>(i ^ j);
    return x == 0 || (x & (x - 1)) == 0;
  });
}

double block_mask_density(const TensorView& mask) {
  check_mask(mask);
  int64_t kept = 0, total = 0;
  visit(mask, [&](int64_t, int64_t, uint8_t& cell) {
    kept += cell != 0;
    ++total;
  });
  return total ? static_cast<double>(kept) / static_cast<double>(total) : 0.0;
}

}  // namespace flashkit
