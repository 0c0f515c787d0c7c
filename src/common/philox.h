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

// Attention dropout: 8-bit draws, as FlashAttention-2's. One Philox call serves the 16
// consecutive columns 16*col16 .. 16*col16+15 of one row: column c (c = col & 15) takes byte c & 3
// of word c >> 2. Element (row, col) is kept iff its byte >= threshold = round(p * 256), clamped
// to [0, 255]: the drop probability is p quantised to 1/256 (exactly threshold / 256), and the
// kept values are scaled by the inverse of the quantised keep probability, 256 / (256 -
// threshold), so the dropped output stays unbiased. p == 0 keeps everything. The Philox calls
// are most of dropout's cost on the GPU (integer multiplies): 8 bits a column instead of 16 halve
// them (bench/NOTES-attention.md, "Dropout v7c").
FK_HD uint32_t dropout_threshold(float p) {
  const double t = static_cast<double>(p) * 256.0 + 0.5;  // round half up; p in [0, 1)
  if (!(t >= 1.0)) return 0u;                             // also p <= 0 (and NaN)
  return t >= 255.0 ? 255u : static_cast<uint32_t>(t);
}

// The kept values' scale: 1 / (1 - threshold / 256).
FK_HD double dropout_keep_scale(uint32_t threshold) {
  return 256.0 / static_cast<double>(256u - threshold);
}

// The draws for columns 16*col16 .. 16*col16+15 of row `row` (rows/cols local to the sequence).
// Counter = (col16, row, batch * heads + head, low 32 bits of offset); key = seed with the high
// 32 bits of offset folded into its upper word.
FK_HD Philox4 dropout_draws(uint64_t seed, uint64_t offset, int batch, int head, int heads, int row,
                            int col16) {
  return philox4x32<kDropoutPhiloxRounds>(
      static_cast<uint32_t>(col16), static_cast<uint32_t>(row),
      static_cast<uint32_t>(batch) * static_cast<uint32_t>(heads) + static_cast<uint32_t>(head),
      static_cast<uint32_t>(offset), static_cast<uint32_t>(seed),
      static_cast<uint32_t>(seed >> 32) ^ static_cast<uint32_t>(offset >> 32));
}

// The 8-bit draw of column c (0..15) of a dropout_draws result.
FK_HD uint32_t dropout_byte(const Philox4& d, int c) {
  return (d.x[c >> 2] >> (8 * (c & 3))) & 0xFFu;
}

// Bit b (0..3) set iff byte b of x >= t (t < 256), with 32-bit operations: (x | 0x80) - (t &
// 0x7F) per byte never borrows and its top bit says low7(x) >= low7(t); the top bits decide the
// rest. The four top bits are then gathered by one multiply (their products land on bits 21-24
// and nowhere else overlapping).
FK_HD uint32_t dropout_bytes_ge(uint32_t x, uint32_t t) {
  const uint32_t h = 0x80808080u, y = t * 0x01010101u;
  const uint32_t d = (x | h) - (y & ~h);
  const uint32_t top = ((x & ~y) | (~(x ^ y) & d)) & h;
  return (((top >> 7) * 0x00204081u) >> 21) & 0xFu;
}

// __byte_perm on either side: byte i of the result is byte (sel >> 4i) & 7 of (hi:lo).
FK_HD uint32_t dropout_byte_perm(uint32_t lo, uint32_t hi, uint32_t sel) {
#ifdef __CUDA_ARCH__
  return __byte_perm(lo, hi, sel);
#else
  const uint64_t v = (static_cast<uint64_t>(hi) << 32) | lo;
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i)
    r |= static_cast<uint32_t>((v >> (8 * ((sel >> (4 * i)) & 7))) & 0xFFu) << (8 * i);
  return r;
#endif
}

// Keep bits of all 16 columns of one call, bit c for column c.
FK_HD uint32_t dropout_keep16(const Philox4& d, uint32_t threshold) {
  uint32_t bits = 0;
  for (int w = 0; w < 4; ++w) bits |= dropout_bytes_ge(d.x[w], threshold) << (4 * w);
  return bits;
}

// The same 16 bits in the orders the GPU tiles gather them (score_policy.h), straight from the
// draws (a byte permutation before each compare): kPairs, nibble f = columns (2f, 2f + 1, 8 + 2f,
// 9 + 2f), what lane f of a quad holds of an m16n8 tile's two 8-column atoms; kInterleaved, bits
// (2f, 2f + 1) = columns (f, 8 + f), what lane f of 8 holds of a transposed tile's 16 keys.
enum class KeepOrder { kPairs, kInterleaved };
template <KeepOrder kOrder>
FK_HD uint32_t dropout_keep16_as(const Philox4& d, uint32_t threshold) {
  constexpr uint32_t kLow = kOrder == KeepOrder::kPairs ? 0x5410u : 0x5140u;
  constexpr uint32_t kHigh = kOrder == KeepOrder::kPairs ? 0x7632u : 0x7362u;
  return dropout_bytes_ge(dropout_byte_perm(d.x[0], d.x[2], kLow), threshold) |
         dropout_bytes_ge(dropout_byte_perm(d.x[0], d.x[2], kHigh), threshold) << 4 |
         dropout_bytes_ge(dropout_byte_perm(d.x[1], d.x[3], kLow), threshold) << 8 |
         dropout_bytes_ge(dropout_byte_perm(d.x[1], d.x[3], kHigh), threshold) << 12;
}

// One element's keep bit (the reference and tests; the kernels take 16 at once).
FK_HD bool dropout_keep(uint64_t seed, uint64_t offset, int batch, int head, int heads, int row,
                        int col, uint32_t threshold) {
  return (dropout_keep16(dropout_draws(seed, offset, batch, head, heads, row, col >> 4),
                         threshold) >>
          (col & 15)) &
         1u;
}

}  // namespace flashkit
