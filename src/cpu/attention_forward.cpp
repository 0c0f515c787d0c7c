// FlashAttention-2 forward on the CPU (Algorithm 1 of the FA2 paper): each task owns a block of Br
// query rows of one (sequence, head), streams Bc-key tiles through the online softmax (the shared
// SoftmaxStat), keeps O un-scaled until one final 1/l, and writes O and the logsumexp. OpenMP
// threads take (batch x heads x row blocks) tasks dynamically, so causal imbalance evens out.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/half.h"
#include "common/softmax_state.h"
#include "cpu/attention.h"
#include "cpu/attention_policy.h"
#include "cpu/attention_tiles.h"
#include "cpu/tile_math.h"

namespace flashkit::cpu {
namespace {

// 64 x 64 tiles: with hdim 64 the Q, K^T, V, S and O tiles take 80 KiB, inside a core's L2, and
// the 4x16 GEMM blocks reuse each loaded K^T/V row across four query rows.
constexpr int kBr = 64, kBc = 64;

int round8(int n) { return (n + 7) & ~7; }

struct ForwardTiles {
  std::vector<float> q, kt, v, s, o, z, t;
  std::vector<SoftmaxStat> stat;
  explicit ForwardTiles(int d)
      : q(kBr * d),
        kt(d * kBc),
        v(kBc * d),
        s(kBr * kBc),
        o(kBr * d),
        z(kBr * kBc),
        t(kBr * kBc),
        stat(kBr) {}
};

template <class E>
struct Forward {
  using T = typename E::T;
  const AttentionShape& sh;
  const AttentionOptions& opts;
  const T *q, *k, *v;
  T* out;
  float* lse;
  TokenStrides qs, ks, vs, os, ls;

  // One task: rows [r0, r0 + nr) of head h of sequence b.
  void rows(int b, int h, int rb, ForwardTiles& t) const {
    const SeqSpan seq = seq_span(sh, opts, b);
    const int r0 = rb * kBr;
    if (r0 >= seq.sq) return;
    const int nr = std::min(kBr, seq.sq - r0), d = sh.hdim, kvh = h / sh.group();
    const ScorePolicy pol(sh, opts, seq, b, h);
    load_rows<E>(t.q.data(), d, q + b * qs.batch + (seq.q0 + r0) * qs.token + h * qs.head, qs.token,
                 nr, d, sh.softmax_scale);
    std::fill(t.o.begin(), t.o.begin() + nr * d, 0.f);
    std::fill(t.stat.begin(), t.stat.end(), SoftmaxStat{});
    const T* kb = k + b * ks.batch + seq.k0 * ks.token + kvh * ks.head;
    const T* vb = v + b * vs.batch + seq.k0 * vs.token + kvh * vs.head;
    for (int c0 = 0; c0 < seq.sk; c0 += kBc) {
      const int nc = std::min(kBc, seq.sk - c0), nc8 = round8(nc);
      const TileKind kind = pol.classify(r0, nr, c0, nc);
      if (kind == TileKind::skip) continue;
      load_rows_t<E>(t.kt.data(), kBc, kb + c0 * ks.token, ks.token, nc, d);
      load_rows<E>(t.v.data(), d, vb + c0 * vs.token, vs.token, nc, d);
      // S = (scale Q) K^T, then the modifiers and masks.
      gemm<false, false>(nr, nc8, d, t.q.data(), d, t.kt.data(), kBc, t.s.data(), kBc);
      pol.apply(t.s.data(), kBc, r0, nr, c0, nc, kind, t.t.data());
      for (int r = 0; r < nr; ++r) {
        float* s = t.s.data() + r * kBc;
        std::fill(s + nc, s + nc8, -INFINITY);
        SoftmaxStat& st = t.stat[r];
        const float alpha = online_update(st, row_max(s, nc8));
        if (st.m == -INFINITY) {  // nothing visible to this row yet: contributes nothing
          std::fill(s, s + nc8, 0.f);
          continue;
        }
        const float m = st.m;  // a local: stores through s could alias st.m and stop vectorisation
        for (int j = 0; j < nc8; ++j) s[j] = vexp(s[j] - m);
        st.l += row_sum(s, nc8);
        float* o = t.o.data() + r * d;
        for (int c = 0; c < d; ++c) o[c] *= alpha;
      }
      if (pol.dropout) {  // l sums the kept and dropped P alike; only P V sees the dropout
        pol.dropout_scales(t.z.data(), kBc, r0, nr, c0, nc, nullptr, 0);
        for (int r = 0; r < nr; ++r)
          for (int j = 0; j < nc; ++j) t.s[r * kBc + j] *= t.z[r * kBc + j];
      }
      gemm<false, true>(nr, d, nc, t.s.data(), kBc, t.v.data(), d, t.o.data(), d);
    }
    float inv_l[kBr];
    float* lrow = lse + b * ls.batch + h * ls.head + (seq.q0 + r0) * ls.token;
    for (int r = 0; r < nr; ++r) {
      inv_l[r] = t.stat[r].l > 0.f ? 1.f / t.stat[r].l : 0.f;  // rows that see no key output 0
      lrow[r * ls.token] = stat_lse(t.stat[r]);
    }
    store_rows<E>(out + b * os.batch + (seq.q0 + r0) * os.token + h * os.head, os.token, t.o.data(),
                  d, nr, d, 1.f, inv_l);
  }

  void run() const {
    const int nrb = (sh.seqlen_q + kBr - 1) / kBr;
    const int64_t tasks = static_cast<int64_t>(sh.batch) * sh.heads * nrb;
#pragma omp parallel
    {
      ForwardTiles t(sh.hdim);
#pragma omp for schedule(dynamic, 1)
      for (int64_t i = 0; i < tasks; ++i) {
        const int rb = static_cast<int>(i % nrb);
        const int h = static_cast<int>((i / nrb) % sh.heads);
        const int b = static_cast<int>(i / (static_cast<int64_t>(nrb) * sh.heads));
        rows(b, h, rb, t);
      }
    }
  }
};

// The optional dropout_mask_out: every element's keep bit, masked or not, from the same draws.
void write_dropout_mask(const AttentionShape& sh, const AttentionOptions& opts) {
  const TensorView& m = opts.dropout_mask_out;
  const int64_t tasks = static_cast<int64_t>(sh.batch) * sh.heads;
#pragma omp parallel
  {
    std::vector<float> z(round8(std::max(sh.seqlen_k, 1)) + 8);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < tasks; ++i) {
      const int b = static_cast<int>(i / sh.heads), h = static_cast<int>(i % sh.heads);
      const ScorePolicy pol(sh, opts, seq_span(sh, opts, b), b, h);
      uint8_t* base = m.ptr<uint8_t>() + b * m.stride[0] + h * m.stride[1];
      for (int r = 0; r < sh.seqlen_q; ++r)
        for (int c0 = 0; c0 < sh.seqlen_k; c0 += kBc) {
          const int nc = std::min(kBc, sh.seqlen_k - c0);
          if (m.stride[3] == 1) {
            pol.dropout_scales(z.data(), 0, r, 1, c0, nc, base + r * m.stride[2] + c0, 0);
          } else {
            uint8_t bits[kBc];
            pol.dropout_scales(z.data(), 0, r, 1, c0, nc, bits, 0);
            for (int j = 0; j < nc; ++j) base[r * m.stride[2] + (c0 + j) * m.stride[3]] = bits[j];
          }
        }
    }
  }
}

// Calls f(src offset, dst offset) for every element of src's index space, src and dst with their
// own element strides.
template <class F>
void for_each_element(const TensorView& src, const TensorView& dst, F f) {
  int64_t idx[kMaxDims] = {};
  const int64_t n = src.numel();
  for (int64_t i = 0; i < n; ++i) {
    int64_t so = 0, d = 0;
    for (int a = 0; a < src.ndim; ++a) so += idx[a] * src.stride[a], d += idx[a] * dst.stride[a];
    f(so, d);
    for (int a = src.ndim - 1; a >= 0 && ++idx[a] == src.shape[a]; --a) idx[a] = 0;
  }
}

// A contiguous fp32 tensor shaped like t, backed by `buf`.
TensorView f32_like(const TensorView& t, std::vector<float>& buf) {
  buf.assign(static_cast<size_t>(t.numel()), 0.f);
  TensorView r = t;
  r.data = buf.data();
  r.dtype = DType::f32;
  int64_t st = 1;
  for (int a = t.ndim - 1; a >= 0; --a) r.stride[a] = st, st *= t.shape[a];
  return r;
}

// The fp8 forward on the CPU: q, k, v dequantized (times their descales: one per tensor, or one
// per (batch, KV head) on dense batches) into fp32 copies, the fp32 forward with every option,
// out rounded to bf16.
void fp8_forward(AttentionShape shape, const TensorView& q, const TensorView& k, const TensorView& v,
                 const TensorView& out, const TensorView& lse, const AttentionOptions& opts) {
  std::vector<float> qb, kb, vb, ob;
  // `group`: heads of t per KV head (q: shape.group(), k / v: 1).
  auto dequant = [](const TensorView& t, const TensorView& d, int group, std::vector<float>& buf) {
    TensorView r = f32_like(t, buf);
    const uint8_t* src = t.ptr<uint8_t>();
    if (!d.defined() || d.numel() == 1) {
      const float f = d.defined() ? d.ptr<float>()[0] : 1.f;
      for_each_element(t, r,
                       [&](int64_t so, int64_t d_off) { buf[d_off] = e4m3_to_float(src[so]) * f; });
      return r;
    }
    // dense [batch, seqlen, heads, hdim], d [batch, kv_heads]
    for (int64_t b = 0; b < t.shape[0]; ++b)
      for (int64_t i = 0; i < t.shape[1]; ++i)
        for (int64_t h = 0; h < t.shape[2]; ++h) {
          const float f = d.ptr<float>()[b * d.stride[0] + (h / group) * d.stride[1]];
          const int64_t so = b * t.stride[0] + i * t.stride[1] + h * t.stride[2];
          const int64_t ro = b * r.stride[0] + i * r.stride[1] + h * r.stride[2];
          for (int64_t x = 0; x < t.shape[3]; ++x)
            buf[ro + x] = e4m3_to_float(src[so + x * t.stride[3]]) * f;
        }
    return r;
  };
  const TensorView q32 = dequant(q, opts.q_descale, shape.group(), qb);
  const TensorView k32 = dequant(k, opts.k_descale, 1, kb);
  const TensorView v32 = dequant(v, opts.v_descale, 1, vb);
  const TensorView o32 = f32_like(out, ob);
  shape.dtype = DType::f32;
  attention_forward(shape, q32, k32, v32, o32, lse, opts);
  for_each_element(o32, out, [&](int64_t so, int64_t d_off) {
    out.ptr<uint16_t>()[d_off] = float_to_bf16(ob[so]);
  });
}

}  // namespace

void attention_forward(const AttentionShape& shape, const TensorView& q, const TensorView& k,
                       const TensorView& v, const TensorView& out, const TensorView& lse,
                       const AttentionOptions& opts) {
  if (shape.dtype == DType::e4m3) return fp8_forward(shape, q, k, v, out, lse, opts);
  with_elem(shape.dtype, [&](auto e) {
    using E = decltype(e);
    using T = typename E::T;
    Forward<E>{shape,
               opts,
               q.ptr<T>(),
               k.ptr<T>(),
               v.ptr<T>(),
               out.ptr<T>(),
               lse.ptr<float>(),
               token_strides(q, shape.varlen),
               token_strides(k, shape.varlen),
               token_strides(v, shape.varlen),
               token_strides(out, shape.varlen),
               lse_strides(lse, shape.varlen)}
        .run();
  });
  if (opts.dropout_mask_out.defined()) write_dropout_mask(shape, opts);
}

}  // namespace flashkit::cpu
