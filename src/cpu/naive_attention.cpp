// naive_attention_forward_f32 (naive_attention.h): the materialised-scores baseline.
#include "cpu/naive_attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace flashkit::cpu {

void naive_attention_forward_f32(const TensorView& q, const TensorView& k, const TensorView& v,
                                 const TensorView& out, bool causal) {
  const int b_n = static_cast<int>(q.shape[0]), sq = static_cast<int>(q.shape[1]),
            h = static_cast<int>(q.shape[2]), d = static_cast<int>(q.shape[3]),
            sk = static_cast<int>(k.shape[1]), hk = static_cast<int>(k.shape[2]);
  const float scale = 1.f / std::sqrt(static_cast<float>(d));
  const float *Q = q.ptr<float>(), *K = k.ptr<float>(), *V = v.ptr<float>();
  float* O = out.ptr<float>();
#pragma omp parallel
  {
    std::vector<float> S(static_cast<size_t>(sq) * sk), kt(static_cast<size_t>(d) * sk);
#pragma omp for schedule(dynamic, 1)
    for (int bh = 0; bh < b_n * h; ++bh) {
      const int b = bh / h, hh = bh % h, kvh = hh / (h / hk);
      auto row = [&](int t, int len, int head, int heads) {
        return ((static_cast<size_t>(b) * len + t) * heads + head) * d;
      };
      for (int j = 0; j < sk; ++j)
        for (int c = 0; c < d; ++c)
          kt[static_cast<size_t>(c) * sk + j] = K[row(j, sk, kvh, hk) + c];
      // S = scale Q K^T, the whole matrix first (this is what FA2 avoids).
      for (int i = 0; i < sq; ++i) {
        float* s = &S[static_cast<size_t>(i) * sk];
        std::fill(s, s + sk, 0.f);
        for (int c = 0; c < d; ++c) {
          const float qc = scale * Q[row(i, sq, hh, h) + c];
          const float* kc = &kt[static_cast<size_t>(c) * sk];
          for (int j = 0; j < sk; ++j) s[j] += qc * kc[j];
        }
      }
      for (int i = 0; i < sq; ++i) {
        float* s = &S[static_cast<size_t>(i) * sk];
        const int last = causal ? std::clamp(i + sk - sq + 1, 0, sk) : sk;
        float mx = -INFINITY, sum = 0.f;
        for (int j = 0; j < last; ++j) mx = std::max(mx, s[j]);
        for (int j = 0; j < last; ++j) sum += (s[j] = std::exp(s[j] - mx));
        float* o = O + row(i, sq, hh, h);
        std::fill(o, o + d, 0.f);
        for (int j = 0; j < last; ++j) {
          const float p = s[j] / sum;
          const float* vj = V + row(j, sk, kvh, hk);
          for (int c = 0; c < d; ++c) o[c] += p * vj[c];
        }
      }
    }
  }
}

}  // namespace flashkit::cpu
