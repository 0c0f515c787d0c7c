// CPU decode (decode.h). The plan's schedule becomes a list of segments (tile, token range):
// single = one per tile, split-KV and FlashDecoding = their splits, Lean = each CTA's per-tile pieces. Segments run
// in parallel, each an online softmax over key chunks for all rows of its tile (the query heads
// of one KV head x the query tokens), so K/V are read once per KV head. Tiles then merge their
// segments with merge_stats in CTA order (the host's first), as the GPU's reductions do.
#include "cpu/decode.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/half.h"
#include "common/softmax_state.h"
#include "cpu/kv_cache.h"

namespace flashkit::cpu {

namespace {

constexpr int kChunk = 64;  // keys converted to fp32 and scored together

struct Segment {
  int tile;
  int begin, end;  // token range
};

std::vector<Segment> segments_of(const DecodePlan& plan, std::vector<int>& first_of_tile) {
  std::vector<Segment> segs;
  const int lt = plan.lean_tile;
  first_of_tile.assign(plan.tiles.size() + 1, 0);
  auto len_of = [&](int tile) { return plan.kv_lengths[plan.tiles[tile].seq]; };
  switch (plan.schedule) {
    case DecodeSchedule::lean:
      // CTAs in order; a tile's segments come out host first, then peers, contiguously.
      for (const LeanCta& cta : plan.ctas) {
        int it = cta.begin, t = cta.first_tile;
        while (it < cta.end) {
          const DecodeTile& tile = plan.tiles[t];
          int stop = std::min(cta.end, tile.first_iter + tile.num_iters);
          segs.push_back({t, (it - tile.first_iter) * lt,
                          std::min(len_of(t), (stop - tile.first_iter) * lt)});
          it = stop;
          ++t;
        }
      }
      break;
    case DecodeSchedule::split_kv:
    case DecodeSchedule::flash_decoding:
      for (size_t t = 0; t < plan.tiles.size(); ++t)
        for (int s = 0; s < plan.num_splits; ++s) {
          const KvSplit& sp = plan.splits[static_cast<size_t>(plan.tiles[t].seq) * plan.num_splits + s];
          segs.push_back({static_cast<int>(t), sp.begin, sp.end});
        }
      break;
    default:
      for (size_t t = 0; t < plan.tiles.size(); ++t)
        segs.push_back({static_cast<int>(t), 0, len_of(static_cast<int>(t))});
  }
  for (const Segment& s : segs) ++first_of_tile[s.tile + 1];
  for (size_t t = 0; t < plan.tiles.size(); ++t) first_of_tile[t + 1] += first_of_tile[t];
  return segs;
}

template <DType D>
float ld(const void* p, int64_t i) {
  if constexpr (D == DType::f32) return static_cast<const float*>(p)[i];
  else if constexpr (D == DType::bf16) return bf16_to_float(static_cast<const uint16_t*>(p)[i]);
  else return fp16_to_float(static_cast<const uint16_t*>(p)[i]);
}

struct Job {
  const TensorView &q, &k, &v, &out, &lse;
  const int32_t* seqlens;
  int64_t seqlens_stride;
  KvLayout kl, vl;
  const DecodePlan& plan;
  DecodeScores sc;
  int d, q_len, group, rows;
};

// Partial state of one segment: per row (m, l) and un-scaled O, written to `stat`/`acc`.
template <DType D>
void run_segment(const Job& J, const Segment& seg, SoftmaxStat* stat, float* acc) {
  const DecodeTile& tile = J.plan.tiles[seg.tile];
  const int d = J.d;
  const int row0 = tile.row_block * kDecodeRowsPerBlock;
  const int nrows = std::min(kDecodeRowsPerBlock, J.rows - row0);
  const int len = std::min(J.seqlens[tile.seq * J.seqlens_stride], J.plan.kv_lengths[tile.seq]);
  // Row r of a tile: query token r / group, query head kv_head * group + r % group.
  float qf[kDecodeRowsPerBlock][256];
  int limit[kDecodeRowsPerBlock], lower[kDecodeRowsPerBlock];
  int lowest = len;  // the lowest key any row sees: the segment starts there at the earliest
  for (int r = 0; r < nrows; ++r) {
    int token = (row0 + r) / J.group, head = tile.kv_head * J.group + (row0 + r) % J.group;
    int64_t qo = tile.seq * J.q.stride[0] + token * J.q.stride[1] + head * J.q.stride[2];
    for (int c = 0; c < d; ++c) qf[r][c] = ld<D>(J.q.data, qo + c) * J.sc.scale;
    limit[r] = len - J.q_len + token + 1;  // keys below this are visible (causal among q tokens)
    lower[r] = J.sc.window_left >= 0 ? limit[r] - 1 - J.sc.window_left : 0;  // and from this one
    lowest = std::min(lowest, std::max(lower[r], 0));
    stat[r] = SoftmaxStat{};
    std::fill(acc + r * d, acc + (r + 1) * d, 0.f);
  }
  // K is kept transposed ([dim][key]) so the score loop runs over keys with unit stride and
  // vectorises without reassociating the fp32 sums; V stays [key][dim] for the O update.
  std::vector<float> kt(static_cast<size_t>(d) * kChunk), vf(static_cast<size_t>(kChunk) * d);
  const int end = std::min(seg.end, len);
  // With a window, the chunks start at the one holding the lowest visible key.
  const int begin = std::max(seg.begin, seg.begin + (lowest - seg.begin) / kChunk * kChunk);
  for (int c0 = begin; c0 < end; c0 += kChunk) {
    const int n = std::min(kChunk, end - c0);
    for (int j = 0; j < n; ++j) {
      int64_t ko = J.kl.offset(tile.seq, c0 + j, tile.kv_head);
      int64_t vo = J.vl.offset(tile.seq, c0 + j, tile.kv_head);
      for (int c = 0; c < d; ++c) kt[c * kChunk + j] = ld<D>(J.k.data, ko + c);
      for (int c = 0; c < d; ++c) vf[j * d + c] = ld<D>(J.v.data, vo + c);
    }
    for (int r = 0; r < nrows; ++r) {
      const int nv = std::clamp(limit[r] - c0, 0, n);
      const int j0 = std::clamp(lower[r] - c0, 0, nv);  // keys j0 .. nv - 1 of the chunk
      if (j0 == nv) continue;
      float s[kChunk] = {}, mx = -INFINITY;
      for (int c = 0; c < d; ++c) {
        const float qc = qf[r][c];
        const float* krow = &kt[c * kChunk];
        for (int j = 0; j < kChunk; ++j) s[j] += qc * krow[j];
      }
      if (J.sc.softcap > 0.f)
        for (int j = j0; j < nv; ++j) s[j] = J.sc.softcap * std::tanh(s[j] / J.sc.softcap);
      for (int j = j0; j < nv; ++j) mx = std::max(mx, s[j]);
      const float alpha = online_update(stat[r], mx);
      float* o = acc + r * d;
      for (int c = 0; c < d; ++c) o[c] *= alpha;
      for (int j = j0; j < nv; ++j) {
        const float p = std::exp(s[j] - stat[r].m);
        stat[r].l += p;
        for (int c = 0; c < d; ++c) o[c] += p * vf[j * d + c];
      }
    }
  }
}

template <DType D>
void store(const TensorView& t, int64_t i, float v) {
  if constexpr (D == DType::f32) static_cast<float*>(t.data)[i] = v;
  else if constexpr (D == DType::bf16) static_cast<uint16_t*>(t.data)[i] = float_to_bf16(v);
  else static_cast<uint16_t*>(t.data)[i] = float_to_fp16(v);
}

template <DType D>
void run(const Job& J) {
  std::vector<int> first;
  const std::vector<Segment> segs = segments_of(J.plan, first);
  const int d = J.d, R = kDecodeRowsPerBlock;
  std::vector<SoftmaxStat> stats(segs.size() * R);
  std::vector<float> accs(segs.size() * R * d);
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t s = 0; s < static_cast<int64_t>(segs.size()); ++s)
    run_segment<D>(J, segs[s], &stats[s * R], &accs[s * R * d]);

#pragma omp parallel for schedule(dynamic, 4)
  for (int64_t t = 0; t < static_cast<int64_t>(J.plan.tiles.size()); ++t) {
    const DecodeTile& tile = J.plan.tiles[t];
    const int row0 = tile.row_block * R, nrows = std::min(R, J.rows - row0);
    for (int r = 0; r < nrows; ++r) {
      // Fold the later segments into the first (the host's) one.
      SoftmaxStat st = stats[first[t] * R + r];
      float* o = &accs[(static_cast<size_t>(first[t]) * R + r) * d];
      for (int s = first[t] + 1; s < first[t + 1]; ++s) {
        MergeScales m = merge_stats(st, stats[s * R + r]);
        const float* p = &accs[(static_cast<size_t>(s) * R + r) * d];
        for (int c = 0; c < d; ++c) o[c] = o[c] * m.scale_a + p[c] * m.scale_b;
        st = m.merged;
      }
      const int token = (row0 + r) / J.group, head = tile.kv_head * J.group + (row0 + r) % J.group;
      const float inv = st.l > 0.f ? 1.f / st.l : 0.f;
      const int64_t oo = tile.seq * J.out.stride[0] + token * J.out.stride[1] + head * J.out.stride[2];
      for (int c = 0; c < d; ++c) store<D>(J.out, oo + c, o[c] * inv);
      J.lse.ptr<float>()[tile.seq * J.lse.stride[0] + head * J.lse.stride[1] + token * J.lse.stride[2]] =
          stat_lse(st);
    }
  }
}

}  // namespace

void decode(const TensorView& q, const TensorView& k_cache, const TensorView& v_cache,
            const TensorView& cache_seqlens, const TensorView& block_table, const TensorView& out,
            const TensorView& lse, const DecodePlan& plan, const DecodeScores& scores) {
  const DecodeProblem& p = plan.problem;
  // clang-format off
  Job job{q, k_cache, v_cache, out, lse, cache_seqlens.ptr<const int32_t>(), cache_seqlens.stride[0],
          KvLayout(k_cache, block_table), KvLayout(v_cache, block_table), plan, scores,
          p.hdim, p.q_len, p.group(), p.rows()};
  // clang-format on
  switch (q.dtype) {
    case DType::f32: run<DType::f32>(job); break;
    case DType::f16: run<DType::f16>(job); break;
    default: run<DType::bf16>(job); break;
  }
}

}  // namespace flashkit::cpu
