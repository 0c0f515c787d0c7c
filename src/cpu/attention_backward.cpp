// FlashAttention-2 backward on the CPU (Algorithm 2 of the FA2 paper). P is recomputed from the
// saved logsumexp, D = rowsum(dO * O) is computed once up front, and the work is split in two
// race-free passes: dK/dV tasks own one key block of one (sequence, KV head) and loop over every
// query block of the heads sharing it (GQA sums there); dQ tasks own one query block and loop
// over the key blocks. Both passes build dS with the same tile routine, so the second pass costs
// a recomputation of S and dP instead of atomics or per-thread dQ copies, and is deterministic.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/attention.h"
#include "cpu/attention_policy.h"
#include "cpu/attention_tiles.h"
#include "cpu/tile_math.h"

namespace flashkit::cpu {
namespace {

constexpr int kBr = 64, kBc = 64;

int round8(int n) { return (n + 7) & ~7; }

struct BackwardTiles {
  std::vector<float> q, dout, kt, k, vt, p, pd, ds, t, z, acc, acc2, lse, dsum;
  BackwardTiles(int d)
      : q(kBr * d),
        dout(kBr * d),
        kt(d * kBc),
        k(kBc * d),
        vt(d * kBc),
        p(kBr * kBc),
        pd(kBr * kBc),
        ds(kBr * kBc),
        t(kBr * kBc),
        z(kBr * kBc),
        acc(kBc * d),
        acc2(kBc * d),
        lse(kBr),
        dsum(kBr) {}
};

template <class E>
struct Backward {
  using T = typename E::T;
  const AttentionShape& sh;
  const AttentionOptions& opts;
  const T *q, *k, *v, *out, *dout;
  const float* lse;
  T *dq, *dk, *dv;
  TokenStrides qs, ks, vs, os, dos, ls, dqs, dks, dvs;
  std::vector<float> dsum;  // D = rowsum(dO * O), [heads][total_q rows] (dense: b * sq + i)

  int64_t row_id(const SeqSpan& seq, int b, int i) const {
    return sh.varlen ? seq.q0 + i : static_cast<int64_t>(b) * sh.seqlen_q + i;
  }

  void compute_dsum() {
    dsum.assign(
        static_cast<size_t>(sh.heads) * (sh.varlen ? sh.total_q : sh.batch * int64_t{sh.seqlen_q}),
        0.f);
    const int64_t tasks = static_cast<int64_t>(sh.batch) * sh.heads;
    const int64_t per_head = static_cast<int64_t>(dsum.size()) / sh.heads;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t i = 0; i < tasks; ++i) {
      const int b = static_cast<int>(i / sh.heads), h = static_cast<int>(i % sh.heads);
      const SeqSpan seq = seq_span(sh, opts, b);
      for (int r = 0; r < seq.sq; ++r) {
        const T* o = out + b * os.batch + (seq.q0 + r) * os.token + h * os.head;
        const T* g = dout + b * dos.batch + (seq.q0 + r) * dos.token + h * dos.head;
        float acc = 0.f;
        for (int c = 0; c < sh.hdim; ++c) acc += E::load(o[c]) * E::load(g[c]);
        dsum[h * per_head + row_id(seq, b, r)] = acc;
      }
    }
  }

  // Loads the query-side tiles of rows [r0, r0+nr) of head h: scale*Q, dO, lse, D.
  void load_query_side(const SeqSpan& seq, int b, int h, int r0, int nr, BackwardTiles& t) const {
    const int d = sh.hdim;
    load_rows<E>(t.q.data(), d, q + b * qs.batch + (seq.q0 + r0) * qs.token + h * qs.head, qs.token,
                 nr, d, sh.softmax_scale);
    load_rows<E>(t.dout.data(), d, dout + b * dos.batch + (seq.q0 + r0) * dos.token + h * dos.head,
                 dos.token, nr, d);
    const int64_t per_head = static_cast<int64_t>(dsum.size()) / sh.heads;
    for (int r = 0; r < nr; ++r) {
      const float l = lse[b * ls.batch + h * ls.head + (seq.q0 + r0 + r) * ls.token];
      t.lse[r] = l == -INFINITY ? INFINITY : l;  // a row that saw no key: P = exp(s - inf) = 0
      t.dsum[r] = dsum[h * per_head + row_id(seq, b, r0 + r)];
    }
  }

  // Loads the key-side tiles of keys [c0, c0+nc) of KV head kvh: K^T, V^T and (for dQ) K.
  void load_key_side(const SeqSpan& seq, int b, int kvh, int c0, int nc, bool want_k,
                     BackwardTiles& t) const {
    const int d = sh.hdim;
    const T* kb = k + b * ks.batch + (seq.k0 + c0) * ks.token + kvh * ks.head;
    load_rows_t<E>(t.kt.data(), kBc, kb, ks.token, nc, d);
    load_rows_t<E>(t.vt.data(), kBc, v + b * vs.batch + (seq.k0 + c0) * vs.token + kvh * vs.head,
                   vs.token, nc, d);
    if (want_k) load_rows<E>(t.k.data(), d, kb, ks.token, nc, d);
  }

  // For a loaded (query block, key block) pair: P (recomputed from lse), Pd = P * dropout scales,
  // and dS = P * (dP - D) with dP = (dO V^T) * dropout scales, times softcap's tanh' when on.
  void tile_ds(const ScorePolicy& pol, int r0, int nr, int c0, int nc, TileKind kind,
               BackwardTiles& t) const {
    const int d = sh.hdim, nc8 = round8(nc);
    gemm<false, false>(nr, nc8, d, t.q.data(), d, t.kt.data(), kBc, t.p.data(), kBc);
    pol.apply(t.p.data(), kBc, r0, nr, c0, nc, kind, t.t.data());
    for (int r = 0; r < nr; ++r) {
      float* p = t.p.data() + r * kBc;
      const float l = t.lse[r];
      for (int j = 0; j < nc; ++j) p[j] = vexp(p[j] - l);
    }
    gemm<false, false>(nr, nc8, d, t.dout.data(), d, t.vt.data(), kBc, t.ds.data(), kBc);
    if (pol.dropout) {
      pol.dropout_scales(t.z.data(), kBc, r0, nr, c0, nc, nullptr, 0);
      for (int r = 0; r < nr; ++r)
        for (int j = 0; j < nc; ++j) {
          t.pd[r * kBc + j] = t.p[r * kBc + j] * t.z[r * kBc + j];
          t.ds[r * kBc + j] *= t.z[r * kBc + j];
        }
    }
    for (int r = 0; r < nr; ++r) {
      float* ds = t.ds.data() + r * kBc;
      const float* p = t.p.data() + r * kBc;
      const float D = t.dsum[r];
      for (int j = 0; j < nc; ++j) ds[j] = p[j] * (ds[j] - D);
      if (pol.softcap > 0.f) {
        const float* th = t.t.data() + r * kBc;
        for (int j = 0; j < nc; ++j) ds[j] *= 1.f - th[j] * th[j];
      }
    }
  }

  // dK, dV of keys [c0, c0+nc) of KV head kvh: sums over the query heads of its group.
  void key_block(int b, int kvh, int cb, BackwardTiles& t) const {
    const SeqSpan seq = seq_span(sh, opts, b);
    const int c0 = cb * kBc;
    if (c0 >= seq.sk) return;
    const int nc = std::min(kBc, seq.sk - c0), d = sh.hdim;
    load_key_side(seq, b, kvh, c0, nc, false, t);
    float* dK = t.acc.data();
    float* dV = t.acc2.data();
    std::fill(dK, dK + nc * d, 0.f);
    std::fill(dV, dV + nc * d, 0.f);
    for (int h = kvh * sh.group(); h < (kvh + 1) * sh.group(); ++h) {
      const ScorePolicy pol(sh, opts, seq, b, h);
      for (int r0 = 0; r0 < seq.sq; r0 += kBr) {
        const int nr = std::min(kBr, seq.sq - r0);
        const TileKind kind = pol.classify(r0, nr, c0, nc);
        if (kind == TileKind::skip) continue;
        load_query_side(seq, b, h, r0, nr, t);
        tile_ds(pol, r0, nr, c0, nc, kind, t);
        const float* pd = pol.dropout ? t.pd.data() : t.p.data();
        gemm<true, true>(nc, d, nr, pd, kBc, t.dout.data(), d, dV, d);  // dV += Pd^T dO
        gemm<true, true>(nc, d, nr, t.ds.data(), kBc, t.q.data(), d, dK,
                         d);  // dK += dS^T (scale Q)
      }
    }
    store_rows<E>(dk + b * dks.batch + (seq.k0 + c0) * dks.token + kvh * dks.head, dks.token, dK, d,
                  nc, d, 1.f);
    store_rows<E>(dv + b * dvs.batch + (seq.k0 + c0) * dvs.token + kvh * dvs.head, dvs.token, dV, d,
                  nc, d, 1.f);
  }

  // dQ of rows [r0, r0+nr) of head h: dQ = scale * sum over key blocks of dS K.
  void query_block(int b, int h, int rb, BackwardTiles& t) const {
    const SeqSpan seq = seq_span(sh, opts, b);
    const int r0 = rb * kBr;
    if (r0 >= seq.sq) return;
    const int nr = std::min(kBr, seq.sq - r0), d = sh.hdim, kvh = h / sh.group();
    const ScorePolicy pol(sh, opts, seq, b, h);
    load_query_side(seq, b, h, r0, nr, t);
    float* dQ = t.acc.data();
    std::fill(dQ, dQ + nr * d, 0.f);
    for (int c0 = 0; c0 < seq.sk; c0 += kBc) {
      const int nc = std::min(kBc, seq.sk - c0);
      const TileKind kind = pol.classify(r0, nr, c0, nc);
      if (kind == TileKind::skip) continue;
      load_key_side(seq, b, kvh, c0, nc, true, t);
      tile_ds(pol, r0, nr, c0, nc, kind, t);
      gemm<false, true>(nr, d, nc, t.ds.data(), kBc, t.k.data(), d, dQ, d);
    }
    store_rows<E>(dq + b * dqs.batch + (seq.q0 + r0) * dqs.token + h * dqs.head, dqs.token, dQ, d,
                  nr, d, sh.softmax_scale);
  }

  void run() {
    compute_dsum();
    const int nkb = (sh.seqlen_k + kBc - 1) / kBc, nqb = (sh.seqlen_q + kBr - 1) / kBr;
    const int64_t key_tasks = static_cast<int64_t>(sh.batch) * sh.kv_heads * nkb;
    const int64_t query_tasks = static_cast<int64_t>(sh.batch) * sh.heads * nqb;
#pragma omp parallel
    {
      BackwardTiles t(sh.hdim);
#pragma omp for schedule(dynamic, 1)
      for (int64_t i = 0; i < key_tasks; ++i)
        key_block(static_cast<int>(i / (static_cast<int64_t>(nkb) * sh.kv_heads)),
                  static_cast<int>((i / nkb) % sh.kv_heads), static_cast<int>(i % nkb), t);
#pragma omp for schedule(dynamic, 1)
      for (int64_t i = 0; i < query_tasks; ++i)
        query_block(static_cast<int>(i / (static_cast<int64_t>(nqb) * sh.heads)),
                    static_cast<int>((i / nqb) % sh.heads), static_cast<int>(i % nqb), t);
    }
  }
};

}  // namespace

void attention_backward(const AttentionShape& shape, const TensorView& q, const TensorView& k,
                        const TensorView& v, const TensorView& out, const TensorView& dout,
                        const TensorView& lse, const TensorView& dq, const TensorView& dk,
                        const TensorView& dv, const AttentionOptions& opts) {
  const bool vl = shape.varlen;
  with_elem(shape.dtype, [&](auto e) {
    using E = decltype(e);
    using T = typename E::T;
    Backward<E>{shape,
                opts,
                q.ptr<T>(),
                k.ptr<T>(),
                v.ptr<T>(),
                out.ptr<T>(),
                dout.ptr<T>(),
                lse.ptr<float>(),
                dq.ptr<T>(),
                dk.ptr<T>(),
                dv.ptr<T>(),
                token_strides(q, vl),
                token_strides(k, vl),
                token_strides(v, vl),
                token_strides(out, vl),
                token_strides(dout, vl),
                lse_strides(lse, vl),
                token_strides(dq, vl),
                token_strides(dk, vl),
                token_strides(dv, vl),
                {}}
        .run();
  });
}

}  // namespace flashkit::cpu
