// Counter-based Philox4x32-R (Salmon et al., SC'11) and the attention dropout mask built on it.
// Keyed on (seed, offset, batch, head, row, col), so any backend that evaluates the same element
// draws the same bit, in any order: the CPU tile loop, the fp64 reference and the CUDA kernels.
#pragma once
#include <cstdint>

#include "common/hd.h"

namespace flashkit {

struct Philox4 {
  uint32_t x[4];
};

template <int kRounds>
FK_HD Philox4 philox4x32(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                         uint32_t k1) {
  constexpr uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u;  // multipliers
  constexpr uint32_t W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;  // Weyl key increments
  for (int r = 0; r < kRounds; ++r) {
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

// Dropout's rounds: 7, as FlashAttention-2's and PyTorch's fused attention dropout. Salmon et
// al. list Philox4x32-7 as passing TestU01's BigCrush (10 is their margin for general use); each
// round is two 32x32->64 multiplies, the dropout kernels' costliest instructions (bench/NOTES-
// attention.md, "Variants v3"). Known-answer tests check both 7 and 10 rounds.
inline constexpr int kDropoutPhiloxRounds = 7;

// Attention dropout: 16-bit draws. One Philox call serves the 8 consecutive columns 8*col8 ..
// 8*col8+7 of one row: its four output words split into eight 16-bit halves, column c (c = col & 7)
// takes half c = word c >> 1, the low 16 bits for even c and the high 16 bits for odd c.
// Element (row, col) is kept iff its half >= threshold16 = round(p * 65536), clamped to
// [0, 65535]: the drop probability is p quantised to 1/65536 (exactly threshold16 / 65536), and
// the kept values are scaled by the inverse of the quantised keep probability,
// 65536 / (65536 - threshold16), so the dropped output stays unbiased. p == 0 keeps everything.
// 16 bits instead of 32 halve the Philox calls per score.
FK_HD uint32_t dropout_threshold(float p) {
  const double t = static_cast<double>(p) * 65536.0 + 0.5;  // round half up; p in [0, 1)
  if (!(t >= 1.0)) return 0u;                               // also p <= 0 (and NaN)
  return t >= 65535.0 ? 65535u : static_cast<uint32_t>(t);
}

// The kept values' scale: 1 / (1 - threshold16 / 65536).
FK_HD double dropout_keep_scale(uint32_t threshold) {
  return 65536.0 / static_cast<double>(65536u - threshold);
}

// The draws for columns 8*col8 .. 8*col8+7 of row `row` (rows/cols local to the sequence).
// Counter = (col8, row, batch * heads + head, low 32 bits of offset); key = seed with the high
// 32 bits of offset folded into its upper word.
FK_HD Philox4 dropout_draws(uint64_t seed, uint64_t offset, int batch, int head, int heads, int row,
                            int col8) {
  return philox4x32<kDropoutPhiloxRounds>(
      static_cast<uint32_t>(col8), static_cast<uint32_t>(row),
      static_cast<uint32_t>(batch) * static_cast<uint32_t>(heads) + static_cast<uint32_t>(head),
      static_cast<uint32_t>(offset), static_cast<uint32_t>(seed),
      static_cast<uint32_t>(seed >> 32) ^ static_cast<uint32_t>(offset >> 32));
}

// The 16-bit draw of column c (0..7) of a dropout_draws result.
FK_HD uint32_t dropout_half(const Philox4& d, int c) {
  return (d.x[c >> 1] >> (16 * (c & 1))) & 0xFFFFu;
}

// Keep bits of all 8 columns of one call, bit c for column c. The high half is compared on the
// whole word (w >= t << 16 iff w >> 16 >= t), the low half shifted up the same way.
FK_HD uint32_t dropout_keep8(const Philox4& d, uint32_t threshold) {
  const uint32_t t = threshold << 16;
  uint32_t bits = 0;
  for (int w = 0; w < 4; ++w) {
    bits |= static_cast<uint32_t>((d.x[w] << 16) >= t) << (2 * w);
    bits |= static_cast<uint32_t>(d.x[w] >= t) << (2 * w + 1);
  }
  return bits;
}

// One element's keep bit (the reference and tests; the kernels take dropout_keep8's 8 at once).
FK_HD bool dropout_keep(uint64_t seed, uint64_t offset, int batch, int head, int heads, int row,
                        int col, uint32_t threshold) {
  return (dropout_keep8(dropout_draws(seed, offset, batch, head, heads, row, col >> 3), threshold) >>
          (col & 7)) & 1u;
}

}  // namespace flashkit
