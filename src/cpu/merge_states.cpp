// CPU merge_states (decode.h): each output row folds its P parts in order with merge_stats,
// reading each finished part (O_p, lse_p) as the state (m = lse_p, l = 1, O = O_p).
#include <cmath>
#include <vector>

#include "common/half.h"
#include "common/softmax_state.h"
#include "cpu/decode.h"

namespace flashkit::cpu {

void merge_states(const TensorView& o_parts, const TensorView& lse_parts, const TensorView& out,
                  const TensorView& lse) {
  const int lead = out.ndim - 1;  // leading dims of out (o_parts has P in front)
  const int64_t parts = o_parts.shape[0], d = out.shape[lead];
  int64_t n = 1;
  for (int i = 0; i < lead; ++i) n *= out.shape[i];
#pragma omp parallel
  {
    std::vector<float> acc(d);
#pragma omp for schedule(static)
    for (int64_t idx = 0; idx < n; ++idx) {
      // Unravel the flat row index into each tensor's strided offset.
      int64_t rem = idx, o_off = 0, l_off = 0, out_off = 0, lse_off = 0;
      for (int i = lead - 1; i >= 0; --i) {
        int64_t c = rem % out.shape[i];
        rem /= out.shape[i];
        o_off += c * o_parts.stride[i + 1];
        l_off += c * lse_parts.stride[i + 1];
        out_off += c * out.stride[i];
        if (lse.data) lse_off += c * lse.stride[i];
      }
      SoftmaxStat st;
      std::fill(acc.begin(), acc.end(), 0.f);
      for (int64_t p = 0; p < parts; ++p) {
        const float lp = lse_parts.ptr<const float>()[l_off + p * lse_parts.stride[0]];
        MergeScales m = merge_stats(st, stat_from_lse(lp));
        if (m.scale_b != 0.f) {
          const int64_t base = o_off + p * o_parts.stride[0];
          for (int64_t c = 0; c < d; ++c)
            acc[c] = acc[c] * m.scale_a + m.scale_b * load_as_float(o_parts.data, o_parts.dtype, base + c);
        } else {
          for (int64_t c = 0; c < d; ++c) acc[c] *= m.scale_a;
        }
        st = m.merged;
      }
      const float inv = st.l > 0.f ? 1.f / st.l : 0.f;
      for (int64_t c = 0; c < d; ++c) store_from_float(out.data, out.dtype, out_off + c, acc[c] * inv);
      if (lse.data) lse.ptr<float>()[lse_off] = stat_lse(st);
    }
  }
}

}  // namespace flashkit::cpu
