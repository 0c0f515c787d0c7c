// The Cython MAS transcribed line by line (reference_mas.h). Kept deliberately naive: the value
// copy is updated in place exactly like glow-tts's monotonic_align/core.pyx does it.
#include "cpu/reference_mas.h"

#include <algorithm>

#include "common/half.h"

namespace flashkit::ref {

// Cython compiles `max(a, b)` on C floats to `(b > a) ? b : a`; the operand order decides which
// argument comes back on NaN, so it is kept.
static float cython_max(float a, float b) { return (b > a) ? b : a; }

// maximum_path_each(path, value, t_x, t_y, max_neg_val); `value` and `path` are [T, S] row-major.
static void maximum_path_each(int32_t* path, float* value, int64_t S, int t_x, int t_y,
                              float max_neg_val) {
  auto at = [&](int x, int y) -> float& { return value[x * S + y]; };
  int index = t_x - 1;
  for (int y = 0; y < t_y; ++y) {
    for (int x = std::max(0, t_x + y - t_y); x < std::min(t_x, y + 1); ++x) {
      float v_cur = (x == y) ? max_neg_val : at(x, y - 1);
      float v_prev;
      if (x == 0)
        v_prev = (y == 0) ? 0.f : max_neg_val;
      else
        v_prev = at(x - 1, y - 1);
      at(x, y) = cython_max(v_cur, v_prev) + at(x, y);
    }
  }
  // index <= y holds throughout (it starts at t_x - 1 <= t_y - 1 and is forced down at
  // index == y), so at y == 0 index is 0 and value[index, -1] is never read.
  for (int y = t_y - 1; y >= 0; --y) {
    path[index * S + y] = 1;
    if (index != 0 && (index == y || at(index, y - 1) < at(index - 1, y - 1))) index = index - 1;
  }
}

std::vector<int32_t> monotonic_alignment_search(const TensorView& value,
                                                const int32_t* text_lengths,
                                                const int32_t* mel_lengths, float neg) {
  const int64_t B = value.shape[0], T = value.shape[1], S = value.shape[2];
  std::vector<int32_t> paths(static_cast<size_t>(B * T * S), 0);
  std::vector<float> item(static_cast<size_t>(T * S));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t x = 0; x < T; ++x)
      for (int64_t y = 0; y < S; ++y)
        item[x * S + y] =
            load_as_float(value.data, value.dtype,
                          b * value.stride[0] + x * value.stride[1] + y * value.stride[2]);
    if (text_lengths[b] > 0)
      maximum_path_each(paths.data() + b * T * S, item.data(), S, text_lengths[b], mel_lengths[b],
                        neg);
  }
  return paths;
}

}  // namespace flashkit::ref
