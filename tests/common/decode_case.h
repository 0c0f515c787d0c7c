// Random decode problems for the CPU and GPU decode tests and the CLI: fresh inputs (never
// zeros), a dense or paged cache with pages scattered by a random permutation, poisoned outputs,
// and the FA3-rule comparison against the fp64 reference.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "common/host_tensor.h"
#include "cpu/reference_decode.h"
#include "flashkit/plan.h"

namespace flashkit::testing {

struct DecodeCase {
  int batch = 2, q_len = 1, hq = 8, hkv = 2, d = 64;
  DType dtype = DType::f32;
  int page_size = 0;  // 0: dense cache
  std::vector<int> lens;
  uint64_t seed = 1;
  // Benchmarks: fill K/V by repeating 1M random values (fast for GiB caches; timing only).
  bool tiled_fill = false;
};

struct DecodeInputs {
  DecodeProblem problem;
  HostTensor q, k, v, seqlens, table, out, lse;
  TensorView table_view() const { return problem.paged ? table.view() : TensorView{}; }
};

inline DecodeInputs make_decode_inputs(const DecodeCase& c) {
  std::mt19937_64 rng(c.seed);
  DecodeInputs in;
  DecodeProblem& p = in.problem;
  p = DecodeProblem{c.batch, c.q_len, c.hq, c.hkv, c.d, c.dtype, c.page_size > 0, c.page_size};
  const int max_len = *std::max_element(c.lens.begin(), c.lens.end());
  in.q.reset(c.dtype, {c.batch, c.q_len, c.hq, c.d});
  in.q.fill_normal(rng);
  in.seqlens.reset(DType::i32, {c.batch});
  for (int b = 0; b < c.batch; ++b) in.seqlens.ptr<int32_t>()[b] = c.lens[b];
  if (p.paged) {
    const int ps = c.page_size, max_pages = (max_len + ps - 1) / ps + 1;
    int pages = 3;  // a few spare pages nobody owns
    for (int l : c.lens) pages += (l + ps - 1) / ps;
    std::vector<int> perm(pages);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    in.table.reset(DType::i32, {c.batch, max_pages});
    int next = 0;
    for (int b = 0; b < c.batch; ++b)
      for (int j = 0; j < max_pages; ++j)
        in.table.ptr<int32_t>()[b * max_pages + j] = j < (c.lens[b] + ps - 1) / ps ? perm[next++] : -1;
    in.k.reset(c.dtype, {pages, ps, c.hkv, c.d});
    in.v.reset(c.dtype, {pages, ps, c.hkv, c.d});
  } else {
    in.k.reset(c.dtype, {c.batch, max_len + 5, c.hkv, c.d});  // room past every length: masked
    in.v.reset(c.dtype, {c.batch, max_len + 5, c.hkv, c.d});
  }
  for (HostTensor* t : {&in.k, &in.v}) {
    if (!c.tiled_fill || t->numel() <= (1 << 20)) {
      t->fill_normal(rng);
      continue;
    }
    HostTensor block(c.dtype, {1 << 20});
    block.fill_normal(rng);
    const size_t bytes = block.numel() * dtype_size(c.dtype), total = t->numel() * dtype_size(c.dtype);
    for (size_t off = 0; off < total; off += bytes)
      std::memcpy(static_cast<uint8_t*>(t->data()) + off, block.data(), std::min(bytes, total - off));
  }
  in.out.reset(c.dtype, {c.batch, c.q_len, c.hq, c.d});
  in.lse.reset(DType::f32, {c.batch, c.hq, c.q_len});
  in.out.poison();
  in.lse.poison();
  return in;
}

// With a sliding window (window_left >= 0), the keys and values below the 64-token chunk that
// holds each sequence's lowest visible key set to NaN: the decode backends never read them (a
// test fails if one does). Dense or paged (through the block table).
inline void poison_below_window(DecodeInputs& in, const DecodeCase& c, int window_left) {
  if (window_left < 0) return;
  const DecodeProblem& p = in.problem;
  const int per_token = p.num_kv_heads * p.hdim;
  for (int b = 0; b < c.batch; ++b) {
    const int upto = std::max(c.lens[b] - c.q_len - window_left, 0) / 64 * 64;
    for (int t = 0; t < upto; ++t) {
      int64_t base;
      if (p.paged) {
        const int64_t pages = in.table.view().shape[1];
        const int page = in.table.ptr<int32_t>()[b * pages + t / p.page_size];
        base = (static_cast<int64_t>(page) * p.page_size + t % p.page_size) * per_token;
      } else {
        base = (static_cast<int64_t>(b) * in.k.view().shape[1] + t) * per_token;
      }
      for (int i = 0; i < per_token; ++i) in.k.set(base + i, NAN), in.v.set(base + i, NAN);
    }
  }
}

// max |got - ref|, NaN counted as infinite; matching infinities (empty rows' lse) count as 0.
inline double max_abs_err(const HostTensor& got, const std::vector<double>& ref) {
  double e = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = got.get(i);
    if (std::isinf(ref[i]) && g == ref[i]) continue;
    const double d = std::fabs(g - ref[i]);
    e = std::isnan(d) ? INFINITY : std::max(e, d);
  }
  return e;
}

// FA3's rule: twice the error of a naive implementation in the inputs' precision, plus 1e-5.
inline double decode_tolerance(const cpu::DecodeReference& exact, const cpu::DecodeReference& naive) {
  double e = 0;
  for (size_t i = 0; i < exact.out.size(); ++i) e = std::max(e, std::fabs(exact.out[i] - naive.out[i]));
  return 2 * e + 1e-5;
}

}  // namespace flashkit::testing
