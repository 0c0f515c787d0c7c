// reference_decode (reference_decode.h): one row at a time, scores in fp64, exact softmax.
#include "cpu/reference_decode.h"

#include <algorithm>
#include <cmath>

#include "common/half.h"
#include "cpu/kv_cache.h"

namespace flashkit::cpu {

DecodeReference reference_decode(const TensorView& q, const TensorView& k_cache,
                                 const TensorView& v_cache, const TensorView& cache_seqlens,
                                 const TensorView& block_table, float softmax_scale,
                                 bool round_like_inputs, double softcap, int window_left) {
  const int batch = static_cast<int>(q.shape[0]), q_len = static_cast<int>(q.shape[1]);
  const int hq = static_cast<int>(q.shape[2]), d = static_cast<int>(q.shape[3]);
  const int hkv = static_cast<int>(k_cache.shape[2]);
  const double scale = softmax_scale > 0 ? softmax_scale : 1.0 / std::sqrt(static_cast<double>(d));
  KvLayout kl(k_cache, block_table), vl(v_cache, block_table);
  // Rounding to the inputs' precision, for the naive low-precision yardstick.
  auto rnd = [&](double x) -> double {
    if (!round_like_inputs) return x;
    float f = static_cast<float>(x);
    if (q.dtype == DType::bf16) return bf16_to_float(float_to_bf16(f));
    if (q.dtype == DType::f16) return fp16_to_float(float_to_fp16(f));
    return f;
  };
  DecodeReference r;
  r.out.assign(static_cast<size_t>(batch) * q_len * hq * d, 0.0);
  r.lse.assign(static_cast<size_t>(batch) * hq * q_len, -INFINITY);
  std::vector<double> s, o(d);
  for (int b = 0; b < batch; ++b) {
    const int len = cache_seqlens.ptr<const int32_t>()[b * cache_seqlens.stride[0]];
    for (int i = 0; i < q_len; ++i)
      for (int h = 0; h < hq; ++h) {
        const int kvh = h / (hq / hkv);
        const int visible = std::max(0, len - q_len + i + 1);
        // The window's first key (keys before it get probability 0, as the causal tail does).
        const int first = window_left >= 0 ? std::clamp(visible - 1 - window_left, 0, visible) : 0;
        const int64_t qo = b * q.stride[0] + i * q.stride[1] + h * q.stride[2];
        s.assign(visible, -INFINITY);
        double mx = -INFINITY;
        for (int j = first; j < visible; ++j) {
          const int64_t ko = kl.offset(b, j, kvh);
          double acc = 0;
          for (int c = 0; c < d; ++c)
            acc += static_cast<double>(load_as_float(q.data, q.dtype, qo + c)) *
                   load_as_float(k_cache.data, k_cache.dtype, ko + c);
          s[j] = rnd(acc * scale);
          if (softcap > 0) s[j] = rnd(softcap * std::tanh(s[j] / softcap));
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (int j = first; j < visible; ++j) sum += std::exp(s[j] - mx);
        std::fill(o.begin(), o.end(), 0.0);
        for (int j = first; j < visible; ++j) {
          const double p = rnd(std::exp(s[j] - mx) / sum);
          const int64_t vo = vl.offset(b, j, kvh);
          for (int c = 0; c < d; ++c) o[c] += p * load_as_float(v_cache.data, v_cache.dtype, vo + c);
        }
        double* dst = &r.out[((static_cast<size_t>(b) * q_len + i) * hq + h) * d];
        for (int c = 0; c < d; ++c) dst[c] = rnd(o[c]);
        if (visible > 0) r.lse[(static_cast<size_t>(b) * hq + h) * q_len + i] = mx + std::log(sum);
      }
  }
  return r;
}

}  // namespace flashkit::cpu
