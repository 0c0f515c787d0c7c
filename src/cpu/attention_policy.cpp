// Element-wise parts of ScorePolicy (attention_policy.h): the score modifiers and masks applied
// to one tile, and the dropout keep-scales drawn from the shared Philox stream.
#include "cpu/attention_policy.h"

#include <algorithm>
#include <cmath>

#include "cpu/tile_math.h"

namespace flashkit::cpu {

void ScorePolicy::apply(float* S, int ld, int r0, int nr, int c0, int nc, TileKind kind,
                        float* tanh_out) const {
  for (int r = 0; r < nr; ++r) {
    float* s = S + static_cast<int64_t>(r) * ld;
    const int64_t i = r0 + r;
    if (softcap > 0.f) {
      float* t = tanh_out + static_cast<int64_t>(r) * ld;
      const float inv = 1.f / softcap;
      for (int j = 0; j < nc; ++j) {
        t[j] = vtanh(s[j] * inv);
        s[j] = softcap * t[j];
      }
    }
    if (alibi_slope != 0.f) {
      const float d0 = static_cast<float>(i + diag - c0);  // distance to key c0; exact below 2^24
      for (int j = 0; j < nc; ++j) s[j] -= alibi_slope * std::fabs(d0 - static_cast<float>(j));
    }
    if (kind != TileKind::masked) continue;
    // Visible keys of row i as tile columns [lo, hi], clamped so the compare stays in int range.
    const int64_t lo64 = first_key(i) - c0, hi64 = last_key(i) - c0;
    const int lo = static_cast<int>(lo64 < 0 ? 0 : (lo64 > nc ? nc : lo64));
    const int hi = static_cast<int>(hi64 < -1 ? -1 : (hi64 >= nc ? nc - 1 : hi64));
    for (int j = 0; j < nc; ++j) s[j] = (j < lo || j > hi) ? -INFINITY : s[j];
    if (block_mask) {
      const uint8_t* row = block_mask + (i / bq) * bm_row;
      for (int j = 0; j < nc; ++j)
        if (!row[((c0 + j) / bk) * bm_col]) s[j] = -INFINITY;
    }
  }
}

void ScorePolicy::dropout_scales(float* Z, int ld, int r0, int nr, int c0, int nc,
                                 uint8_t* mask_out, int64_t mask_ld) const {
  for (int r = 0; r < nr; ++r) {
    float* z = Z + static_cast<int64_t>(r) * ld;
    const int row = r0 + r;
    // One Philox call per 16 aligned columns (common/philox.h); the tile may start mid-group.
    for (int j = 0; j < nc;) {
      const int col = c0 + j, n = std::min(16 - (col & 15), nc - j);
      const uint32_t bits =
          dropout_keep16(dropout_draws(seed, offset, batch, head, heads, row, col >> 4),
                         drop_threshold) >>
          (col & 15);
      for (int e = 0; e < n; ++e) {
        const bool keep = (bits >> e) & 1u;
        z[j + e] = keep ? keep_scale : 0.f;
        if (mask_out) mask_out[static_cast<int64_t>(r) * mask_ld + j + e] = keep;
      }
      j += n;
    }
  }
}

}  // namespace flashkit::cpu
