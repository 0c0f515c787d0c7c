// The naive attention references (reference_attention.h): per (batch, head) the whole score
// matrix in double, softmax by its definition, gradients by the chain rule. The mask and modifier
// rules are spelled out here again on purpose, so the tiled policy is checked against them.
#include "cpu/reference_attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "api/attention_shape.h"
#include "common/half.h"
#include "common/philox.h"
#include "flashkit/errors.h"

namespace flashkit::cpu {
namespace {

double load_d(const TensorView& t, int64_t i) {
  return t.dtype == DType::f64 ? t.ptr<double>()[i] : load_as_float(t.data, t.dtype, i);
}
void store_d(const TensorView& t, int64_t i, double x) {
  if (t.dtype == DType::f64)
    t.ptr<double>()[i] = x;
  else
    store_from_float(t.data, t.dtype, i, static_cast<float>(x));
}

// Rounds to the emulated precision (identity for f64).
struct Round {
  DType p;
  double operator()(double x) const {
    switch (p) {
      case DType::f32:
        return static_cast<float>(x);
      case DType::f16:
        return fp16_to_float(float_to_fp16(static_cast<float>(x)));
      case DType::bf16:
        return bf16_to_float(float_to_bf16(static_cast<float>(x)));
      default:
        return x;
    }
  }
};

struct Problem {
  bool varlen;
  int batch, heads, kv_heads, d;
  int64_t maxq, maxk;
  double scale;
  TokenStrides qs, ks, vs;

  Problem(const TensorView& q, const TensorView& k, const TensorView& v,
          const AttentionOptions& o) {
    varlen = o.cu_seqlens_q.defined();
    if (q.ndim != (varlen ? 3 : 4) || k.ndim != q.ndim || v.ndim != q.ndim)
      throw Error("reference_attention: q, k, v must be 4-D (or 3-D with cu_seqlens)");
    batch = varlen ? static_cast<int>(o.cu_seqlens_q.shape[0] - 1) : static_cast<int>(q.shape[0]);
    heads = static_cast<int>(q.size(-2));
    kv_heads = static_cast<int>(k.size(-2));
    d = static_cast<int>(q.size(-1));
    scale = o.softmax_scale != 0.f ? o.softmax_scale : 1.0 / std::sqrt(static_cast<double>(d));
    qs = token_strides(q, varlen);
    ks = token_strides(k, varlen);
    vs = token_strides(v, varlen);
    maxq = varlen ? 0 : q.shape[1];
    maxk = varlen ? 0 : k.shape[1];
    if (varlen)
      for (int b = 0; b < batch; ++b) {
        maxq = std::max<int64_t>(maxq, span(o, b).sq);
        maxk = std::max<int64_t>(maxk, span(o, b).sk);
      }
  }

  struct Span {
    int64_t q0, k0;
    int sq, sk;
  };
  Span span(const AttentionOptions& o, int b) const {
    if (!varlen) return {0, 0, static_cast<int>(maxq), static_cast<int>(maxk)};
    const int32_t* cq = o.cu_seqlens_q.ptr<int32_t>();
    const int32_t* ck = o.cu_seqlens_k.ptr<int32_t>();
    return {cq[b], ck[b], cq[b + 1] - cq[b], ck[b + 1] - ck[b]};
  }
};

// Everything about one (batch, head) that the forward and backward share: the inputs in double,
// the scores S (after softcap and ALiBi, -inf where masked), tanh for softcap, P, dropout scales.
struct HeadState {
  int sq = 0, sk = 0, d = 0;
  std::vector<double> q, k, v;      // [sq|sk][d]
  std::vector<double> kt, vt;       // [d][sk]
  std::vector<double> s, th, p, z;  // [sq][sk]
  std::vector<double> lse;          // [sq]

  void build(const Problem& pr, const TensorView& Q, const TensorView& K, const TensorView& V,
             const AttentionOptions& o, int b, int h, Round rnd) {
    const Problem::Span sp = pr.span(o, b);
    sq = sp.sq;
    sk = sp.sk;
    d = pr.d;
    const int kvh = h / (pr.heads / pr.kv_heads);
    q.assign(static_cast<size_t>(sq) * d, 0);
    k.assign(static_cast<size_t>(sk) * d, 0);
    v.assign(static_cast<size_t>(sk) * d, 0);
    for (int i = 0; i < sq; ++i)
      for (int c = 0; c < d; ++c)
        q[i * d + c] = load_d(Q, b * pr.qs.batch + (sp.q0 + i) * pr.qs.token + h * pr.qs.head + c);
    for (int j = 0; j < sk; ++j)
      for (int c = 0; c < d; ++c) {
        k[j * d + c] =
            load_d(K, b * pr.ks.batch + (sp.k0 + j) * pr.ks.token + kvh * pr.ks.head + c);
        v[j * d + c] =
            load_d(V, b * pr.vs.batch + (sp.k0 + j) * pr.vs.token + kvh * pr.vs.head + c);
      }
    kt.assign(static_cast<size_t>(sk) * d, 0);  // K^T and V^T: the row loops below run over keys
    vt.assign(static_cast<size_t>(sk) * d, 0);
    for (int j = 0; j < sk; ++j)
      for (int c = 0; c < d; ++c) {
        kt[static_cast<size_t>(c) * sk + j] = k[static_cast<size_t>(j) * d + c];
        vt[static_cast<size_t>(c) * sk + j] = v[static_cast<size_t>(j) * d + c];
      }
    const size_t n = static_cast<size_t>(sq) * sk;
    s.assign(n, 0);
    th.assign(n, 0);
    p.assign(n, 0);
    z.assign(n, 1);
    lse.assign(sq, -INFINITY);
    const int64_t diag = static_cast<int64_t>(sk) - sq;
    int64_t right = o.window_right;
    if (o.causal) right = right < 0 ? 0 : std::min<int64_t>(right, 0);
    double slope = 0;
    if (o.alibi_slopes.defined()) {
      const TensorView& a = o.alibi_slopes;
      slope = a.ndim == 1 ? a.ptr<float>()[h * a.stride[0]]
                          : a.ptr<float>()[b * a.stride[0] + h * a.stride[1]];
    }
    const uint32_t thr = dropout_threshold(o.dropout_p);
    for (int i = 0; i < sq; ++i) {
      double* srow = &s[static_cast<size_t>(i) * sk];
      for (int j = 0; j < sk; ++j) srow[j] = 0;
      for (int c = 0; c < d; ++c) {
        const double qc = q[i * d + c];
        const double* kc = &kt[static_cast<size_t>(c) * sk];
        for (int j = 0; j < sk; ++j) srow[j] += qc * kc[j];
      }
      double mx = -INFINITY;
      for (int j = 0; j < sk; ++j) {
        double x = pr.scale * srow[j];
        if (o.softcap > 0) {
          th[static_cast<size_t>(i) * sk + j] = std::tanh(x / o.softcap);
          x = o.softcap * th[static_cast<size_t>(i) * sk + j];
        }
        x -= slope * std::fabs(static_cast<double>(i + diag - j));
        bool visible = true;
        if (o.window_left >= 0 && j < i + diag - o.window_left) visible = false;
        if (right >= 0 && j > i + diag + right) visible = false;
        if (o.block_mask.defined()) {
          const TensorView& m = o.block_mask;
          const int64_t off =
              (m.shape[0] == 1 ? 0 : b * m.stride[0]) + (m.shape[1] == 1 ? 0 : h * m.stride[1]) +
              (i / o.block_mask_block_q) * m.stride[2] + (j / o.block_mask_block_k) * m.stride[3];
          if (m.ptr<uint8_t>()[off] == 0) visible = false;
        }
        srow[j] = visible ? rnd(x) : -INFINITY;
        mx = std::max(mx, srow[j]);
        if (o.dropout_p > 0)
          z[static_cast<size_t>(i) * sk + j] =
              dropout_keep(o.dropout_seed, o.dropout_offset, b, h, pr.heads, i, j, thr)
                  ? dropout_keep_scale(thr)  // 1 / (1 - p) of p quantised to 1/256
                  : 0.0;
      }
      if (mx == -INFINITY) continue;  // no visible key: P = 0, O = 0, lse = -inf
      double sum = 0;
      for (int j = 0; j < sk; ++j) sum += std::exp(srow[j] - mx);
      lse[i] = mx + std::log(sum);
      for (int j = 0; j < sk; ++j)
        p[static_cast<size_t>(i) * sk + j] = rnd(std::exp(srow[j] - mx) / sum);
    }
  }
};

template <class Fn>
void for_each_head(const Problem& pr, Fn&& fn) {
  const int64_t tasks = static_cast<int64_t>(pr.batch) * pr.heads;
#pragma omp parallel
  {
    HeadState st;
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < tasks; ++t)
      fn(static_cast<int>(t / pr.heads), static_cast<int>(t % pr.heads), st);
  }
}

}  // namespace

void reference_attention_forward(const TensorView& q, const TensorView& k, const TensorView& v,
                                 const TensorView& out, const TensorView& lse,
                                 const AttentionOptions& opts, DType precision) {
  const Problem pr(q, k, v, opts);
  const Round rnd{precision};
  const TokenStrides os = token_strides(out, pr.varlen), ls = lse_strides(lse, pr.varlen);
  for_each_head(pr, [&](int b, int h, HeadState& st) {
    st.build(pr, q, k, v, opts, b, h, rnd);
    const Problem::Span sp = pr.span(opts, b);
    std::vector<double> o(pr.d);
    for (int i = 0; i < st.sq; ++i) {
      std::fill(o.begin(), o.end(), 0.0);
      for (int j = 0; j < st.sk; ++j) {
        const double pz = rnd(st.p[static_cast<size_t>(i) * st.sk + j] *
                              st.z[static_cast<size_t>(i) * st.sk + j]);
        for (int c = 0; c < pr.d; ++c) o[c] += pz * st.v[static_cast<size_t>(j) * pr.d + c];
      }
      for (int c = 0; c < pr.d; ++c)
        store_d(out, b * os.batch + (sp.q0 + i) * os.token + h * os.head + c, rnd(o[c]));
      store_d(lse, b * ls.batch + (sp.q0 + i) * ls.token + h * ls.head, st.lse[i]);
    }
  });
}

void reference_attention_backward(const TensorView& q, const TensorView& k, const TensorView& v,
                                  const TensorView& dout, const TensorView& dq,
                                  const TensorView& dk, const TensorView& dv,
                                  const AttentionOptions& opts, DType precision) {
  const Problem pr(q, k, v, opts);
  const Round rnd{precision};
  const TokenStrides gs = token_strides(dout, pr.varlen), dqs = token_strides(dq, pr.varlen),
                     dks = token_strides(dk, pr.varlen), dvs = token_strides(dv, pr.varlen);
  const int group = pr.heads / pr.kv_heads;
  // dK/dV sum over the query heads of a group: accumulate per query head in double, then add up
  // the group in head order after the parallel loop (deterministic, no shared writes).
  std::vector<std::vector<double>> dk_h(static_cast<size_t>(pr.batch) * pr.heads),
      dv_h(static_cast<size_t>(pr.batch) * pr.heads);
  for_each_head(pr, [&](int b, int h, HeadState& st) {
    st.build(pr, q, k, v, opts, b, h, rnd);
    const Problem::Span sp = pr.span(opts, b);
    const int sq = st.sq, sk = st.sk, d = pr.d;
    std::vector<double> g(static_cast<size_t>(sq) * d);
    for (int i = 0; i < sq; ++i)
      for (int c = 0; c < d; ++c)
        g[i * d + c] = load_d(dout, b * gs.batch + (sp.q0 + i) * gs.token + h * gs.head + c);
    std::vector<double>& gk = dk_h[static_cast<size_t>(b) * pr.heads + h];
    std::vector<double>& gv = dv_h[static_cast<size_t>(b) * pr.heads + h];
    gk.assign(static_cast<size_t>(sk) * d, 0);
    gv.assign(static_cast<size_t>(sk) * d, 0);
    std::vector<double> dP(sk), dQ(d);
    for (int i = 0; i < sq; ++i) {
      const size_t row = static_cast<size_t>(i) * sk;
      std::fill(dP.begin(), dP.end(), 0.0);
      for (int c = 0; c < d; ++c) {
        const double gc = g[i * d + c];
        const double* vc = &st.vt[static_cast<size_t>(c) * sk];
        for (int j = 0; j < sk; ++j) dP[j] += gc * vc[j];
      }
      double D = 0;
      for (int j = 0; j < sk; ++j) {
        dP[j] = rnd(dP[j] * st.z[row + j]);
        D += st.p[row + j] * dP[j];
        const double pz = rnd(st.p[row + j] * st.z[row + j]);
        for (int c = 0; c < d; ++c) gv[static_cast<size_t>(j) * d + c] += pz * g[i * d + c];
      }
      std::fill(dQ.begin(), dQ.end(), 0.0);
      for (int j = 0; j < sk; ++j) {
        double ds = st.p[row + j] * (dP[j] - D);
        if (opts.softcap > 0) ds *= 1.0 - st.th[row + j] * st.th[row + j];
        ds = rnd(ds * pr.scale);
        for (int c = 0; c < d; ++c) {
          dQ[c] += ds * st.k[static_cast<size_t>(j) * d + c];
          gk[static_cast<size_t>(j) * d + c] += ds * st.q[i * d + c];
        }
      }
      for (int c = 0; c < d; ++c)
        store_d(dq, b * dqs.batch + (sp.q0 + i) * dqs.token + h * dqs.head + c, rnd(dQ[c]));
    }
  });
  for (int b = 0; b < pr.batch; ++b) {
    const Problem::Span sp = pr.span(opts, b);
    for (int kvh = 0; kvh < pr.kv_heads; ++kvh)
      for (int j = 0; j < sp.sk; ++j)
        for (int c = 0; c < pr.d; ++c) {
          double sk_ = 0, sv = 0;
          for (int h = kvh * group; h < (kvh + 1) * group; ++h) {
            sk_ += dk_h[static_cast<size_t>(b) * pr.heads + h][static_cast<size_t>(j) * pr.d + c];
            sv += dv_h[static_cast<size_t>(b) * pr.heads + h][static_cast<size_t>(j) * pr.d + c];
          }
          store_d(dk, b * dks.batch + (sp.k0 + j) * dks.token + kvh * dks.head + c, rnd(sk_));
          store_d(dv, b * dvs.batch + (sp.k0 + j) * dvs.token + kvh * dvs.head + c, rnd(sv));
        }
  }
}

}  // namespace flashkit::cpu
