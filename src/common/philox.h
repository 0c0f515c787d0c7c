// Counter-based Philox4x32-10 (Salmon et al., SC'11) and the attention dropout mask built on it.
// Keyed on (seed, offset, batch, head, row, col), so any backend that evaluates the same element
// draws the same bit, in any order: the CPU tile loop, the fp64 reference and the CUDA kernels.
#pragma once
#include <cstdint>

#include "common/hd.h"

namespace flashkit {

struct Philox4 {
  uint32_t x[4];
};

FK_HD Philox4 philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                            uint32_t k1) {
  constexpr uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u;  // multipliers
  constexpr uint32_t W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;  // Weyl key increments
  for (int r = 0; r < 10; ++r) {
    uint64_t p0 = static_cast<uint64_t>(M0) * c0;
    uint64_t p1 = static_cast<uint64_t>(M1) * c2;
    uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += W0;
    k1 += W1;
  }
  return {{c0, c1, c2, c3}};
}

// Element (row, col) of attention head (batch, head) is kept iff its 32-bit draw is >= this.
// p < 1, so the threshold is below 2^32; p == 0 keeps everything.
FK_HD uint32_t dropout_threshold(float p) {
  return static_cast<uint32_t>(static_cast<double>(p) * 4294967296.0);
}

// The draws for columns 4*col4 .. 4*col4+3 of row `row` (rows/cols local to the sequence).
// Counter = (col4, row, batch * heads + head, low 32 bits of offset); key = seed with the high
// 32 bits of offset folded into its upper word.
FK_HD Philox4 dropout_draws(uint64_t seed, uint64_t offset, int batch, int head, int heads, int row,
                            int col4) {
  return philox4x32_10(
      static_cast<uint32_t>(col4), static_cast<uint32_t>(row),
      static_cast<uint32_t>(batch) * static_cast<uint32_t>(heads) + static_cast<uint32_t>(head),
      static_cast<uint32_t>(offset), static_cast<uint32_t>(seed),
      static_cast<uint32_t>(seed >> 32) ^ static_cast<uint32_t>(offset >> 32));
}

FK_HD bool dropout_keep(uint64_t seed, uint64_t offset, int batch, int head, int heads, int row,
                        int col, uint32_t threshold) {
  return dropout_draws(seed, offset, batch, head, heads, row, col >> 2).x[col & 3] >= threshold;
}

}  // namespace flashkit
