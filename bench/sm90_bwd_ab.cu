// Standalone A/B harness for the Hopper backward (bf16, hdim 128 or the -DAB_HDIM given, 64 or
// 128; dense and causal), the backward's twin of bench/sm90_fwd_ab.cu: one binary per
// compile-time variant, built on the CPU machine (bench/sm90_fwd_ab.sh SRC=bench/sm90_bwd_ab.cu)
// and run on the GPU in seconds. It first checks dQ, dK and dV of small problems (non-multiple
// lengths, seqlen_q != seqlen_k, causal and not; outputs poisoned) against naive fp32 reference
// kernels fed with the same inputs, then times the backward alone (O and LSE from one forward)
// on the FA2 protocol's shapes. One line per shape, TFLOP/s counted as 2.5 forwards:
//   <variant> d<hdim> <full|causal> s<seqlen> <ms> <TFLOP/s>
// usage: sm90_bwd_ab <variant-name> [seqlen ...]   (default 2048 4096 8192 16384; 0: checks only)
#include "../src/cuda/attention/workspace_layout.cu"
#include "cuda/attention/sm90/bwd_launch.h"
// Last: it opens the harness's anonymous namespace.
#include "ab_common.cuh"

struct Grads {
  Bf16 *dout, *dq, *dk, *dv;
  void* ws;
};

Grads make_grads(const Problem& p, uint32_t seed) {
  Grads g{};
  const int64_t nq = int64_t(p.b) * p.sq * p.h * kD, nk = int64_t(p.b) * p.sk * p.h * kD;
  AB_CHECK(cudaMalloc(&g.dout, nq * 2));
  AB_CHECK(cudaMalloc(&g.dq, nq * 2));
  AB_CHECK(cudaMalloc(&g.dk, nk * 2));
  AB_CHECK(cudaMalloc(&g.dv, nk * 2));
  const size_t ws = flashkit::cuda::attn::bwd_workspace_layout(p.b, p.h, int64_t(p.b) * p.sq, p.sq, kD).bytes;
  AB_CHECK(cudaMalloc(&g.ws, ws));
  fill<<<1024, 256>>>(g.dout, nq, seed);
  AB_CHECK(cudaGetLastError());
  return g;
}
void release(Grads& g) { cudaFree(g.dout), cudaFree(g.dq), cudaFree(g.dk), cudaFree(g.dv), cudaFree(g.ws); }

void run_backward(const Problem& p, const Grads& g) {
  AttnArguments a = p.args();
  a.dout = g.dout, a.dq = g.dq, a.dk = g.dk, a.dv = g.dv;
  a.do_stride = a.dq_stride = a.q_stride;
  a.dk_stride = a.dv_stride = a.k_stride;
  a.workspace = g.ws;
  if (p.causal)
    flashkit::cuda::attn::run_bwd_sm90<Bf16, kD, PlainScores<true>>(a, nullptr);
  else
    flashkit::cuda::attn::run_bwd_sm90<Bf16, kD, PlainScores<false>>(a, nullptr);
}

__device__ __forceinline__ int64_t at(int b, int i, int h, int hh, int s) {
  return ((int64_t(b) * s + i) * h + hh) * kD;
}

// Per query row (block): P_i (exact softmax), D_i = dO_i . O_i with O_i = P_i V, dS_i = P_i (dP_i - D_i)
// into p / ds [b, h, sq, sk], and dQ_i = scale sum_j dS_ij k_j.
__global__ void reference_dq(const Bf16* q, const Bf16* k, const Bf16* v, const Bf16* dout,
                             float* p, float* ds, float* dq, int h, int sq, int sk, float scale,
                             bool causal) {
  __shared__ float o_row[kD], do_row[kD];
  const int i = blockIdx.x, hh = blockIdx.y, b = blockIdx.z;
  const int64_t rbase = ((int64_t(b) * h + hh) * sq + i) * sk;
  for (int d = threadIdx.x; d < kD; d += blockDim.x) do_row[d] = float(dout[at(b, i, h, hh, sq) + d]);
  float mx, l;
  softmax_row(q, k, p + rbase, b, i, h, hh, sq, sk, scale, causal, mx, l);
  __syncthreads();
  for (int j = threadIdx.x; j < sk; j += blockDim.x) p[rbase + j] = l > 0.f ? p[rbase + j] / l : 0.f;
  __syncthreads();
  for (int d = threadIdx.x; d < kD; d += blockDim.x) {
    float acc = 0.f;
    for (int j = 0; j < sk; ++j) acc += p[rbase + j] * float(v[at(b, j, h, hh, sk) + d]);
    o_row[d] = acc;
  }
  __syncthreads();
  float dsum = 0.f;
  for (int d = 0; d < kD; ++d) dsum += do_row[d] * o_row[d];
  for (int j = threadIdx.x; j < sk; j += blockDim.x) {
    float dp = 0.f;
    for (int d = 0; d < kD; ++d) dp += do_row[d] * float(v[at(b, j, h, hh, sk) + d]);
    ds[rbase + j] = p[rbase + j] * (dp - dsum);
  }
  __syncthreads();
  for (int d = threadIdx.x; d < kD; d += blockDim.x) {
    float acc = 0.f;
    for (int j = 0; j < sk; ++j) acc += ds[rbase + j] * float(k[at(b, j, h, hh, sk) + d]);
    dq[at(b, i, h, hh, sq) + d] = acc * scale;
  }
}

// Per key row (block): dK_j = scale sum_i dS_ij q_i, dV_j = sum_i P_ij dO_i.
__global__ void reference_dkv(const Bf16* q, const Bf16* dout, const float* p, const float* ds,
                              float* dk, float* dv, int h, int sq, int sk, float scale) {
  const int j = blockIdx.x, hh = blockIdx.y, b = blockIdx.z;
  const int64_t base = (int64_t(b) * h + hh) * sq * int64_t(sk);
  for (int d = threadIdx.x; d < kD; d += blockDim.x) {
    float ak = 0.f, av = 0.f;
    for (int i = 0; i < sq; ++i) {
      const int64_t e = base + int64_t(i) * sk + j;
      ak += ds[e] * float(q[at(b, i, h, hh, sq) + d]);
      av += p[e] * float(dout[at(b, i, h, hh, sq) + d]);
    }
    dk[at(b, j, h, hh, sk) + d] = ak * scale;
    dv[at(b, j, h, hh, sk) + d] = av;
  }
}

// max |x - ref| / max |ref| of a bf16 gradient (NaN anywhere: returns +inf).
double rel_err(const Bf16* x, const float* ref, int64_t n) {
  std::vector<Bf16> hx(n);
  std::vector<float> hr(n);
  AB_CHECK(cudaMemcpy(hx.data(), x, n * 2, cudaMemcpyDeviceToHost));
  AB_CHECK(cudaMemcpy(hr.data(), ref, n * 4, cudaMemcpyDeviceToHost));
  double e = 0, m = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = std::fabs(double(float(hx[i])) - hr[i]);
    if (!(d <= 1e30)) return INFINITY;
    e = std::max(e, d), m = std::max(m, std::fabs(double(hr[i])));
  }
  return m > 0 ? e / m : e;
}

bool check(int b, int h, int sq, int sk, bool causal, uint32_t seed) {
  Problem p = make(b, h, sq, sk, causal, seed);
  Grads g = make_grads(p, seed + 7);
  const int64_t nq = int64_t(b) * sq * h * kD, nk = int64_t(b) * sk * h * kD;
  float *pm, *dsm, *dq, *dk, *dv;
  AB_CHECK(cudaMalloc(&pm, int64_t(b) * h * sq * sk * 4));
  AB_CHECK(cudaMalloc(&dsm, int64_t(b) * h * sq * sk * 4));
  AB_CHECK(cudaMalloc(&dq, nq * 4));
  AB_CHECK(cudaMalloc(&dk, nk * 4));
  AB_CHECK(cudaMalloc(&dv, nk * 4));
  run_forward(p);
  AB_CHECK(cudaMemset(g.dq, 0xff, nq * 2));  // NaN
  AB_CHECK(cudaMemset(g.dk, 0xff, nk * 2));
  AB_CHECK(cudaMemset(g.dv, 0xff, nk * 2));
  run_backward(p, g);
  const float scale = 1.f / std::sqrt(float(kD));
  reference_dq<<<dim3(sq, h, b), 128>>>(p.q, p.k, p.v, g.dout, pm, dsm, dq, h, sq, sk, scale, causal);
  reference_dkv<<<dim3(sk, h, b), 128>>>(p.q, g.dout, pm, dsm, dk, dv, h, sq, sk, scale);
  AB_CHECK(cudaDeviceSynchronize());
  const double eq = rel_err(g.dq, dq, nq), ek = rel_err(g.dk, dk, nk), ev = rel_err(g.dv, dv, nk);
  // bf16 inputs and outputs, fp32 accumulation: ~1e-2 of the largest gradient.
  const bool ok = eq < 2e-2 && ek < 2e-2 && ev < 2e-2;
  std::printf("check b%d h%d sq%d sk%d %s: rel dQ %.2e dK %.2e dV %.2e %s\n", b, h, sq, sk,
              causal ? "causal" : "full", eq, ek, ev, ok ? "ok" : "FAILED");
  cudaFree(pm), cudaFree(dsm), cudaFree(dq), cudaFree(dk), cudaFree(dv);
  release(g);
  release(p);
  return ok;
}

#ifdef FK_BWD_TRACE
// Lines per traced kernel of the last backward (cta_trace.h): its span, the SMs' idle share of
// it, the drain (the first SM's last exit to the kernel's end), the mean gap between CTAs on one
// SM, a least-squares fit of each CTA's duration against its block count n (the tile's fixed
// cost a and per-block cost b, us), and the means of the phases its CTAs stamped.
void trace_summary(const Problem& p) {
  using namespace flashkit::cuda::attn;
  constexpr Sm90BwdTiles t = sm90_bwd_tiles(kD);
  static std::vector<unsigned long long> h(size_t(kBwdTraceKernels) * kBwdTraceCtas * kBwdTraceSlots);
  AB_CHECK(cudaDeviceSynchronize());
  AB_CHECK(cudaMemcpyFromSymbol(h.data(), fk_bwd_trace, h.size() * sizeof(h[0])));
  auto at = [&](int k, int c, int slot) {
    return h[(size_t(k) * kBwdTraceCtas + c) * kBwdTraceSlots + slot];
  };
  const int nq = (p.sq + t.block_m - 1) / t.block_m, nk = (p.sk + t.block_n - 1) / t.block_n;
  const int grids[2] = {nk * p.h * p.b, kD > 128 ? (p.sq + 63) / 64 * p.h * p.b : 0};
  // The blocks CTA c walks: the column kernel's query blocks, the dQ pass's key blocks.
  auto blocks = [&](int k, int c) {
    const int blk = int(at(k, c, kBwdTraceTile) & 0xFFFF);
    if (!p.causal) return k == 0 ? nq : nk;
    return k == 0 ? nq - blk * t.block_n / t.block_m : (blk * 64 + 63) / t.block_n + 1;
  };
  // Mean of slot b - slot a (us) over the n CTAs that stamped both; per_block: divided by their
  // blocks less `skip` instead of their count. Negative when no CTA stamped them.
  auto phase = [&](int k, int n, int a, int b, bool per_block = false, int skip = 0) {
    double sum = 0, den = 0;
    for (int c = 0; c < n; ++c) {
      const unsigned long long ta = at(k, c, a), tb = at(k, c, b);
      if (ta == 0 || tb == 0 || (per_block && blocks(k, c) <= skip)) continue;
      sum += (double(tb) - double(ta)) * 1e-3, den += per_block ? blocks(k, c) - skip : 1;
    }
    return den > 0 ? sum / den : -1.0;
  };
  unsigned long long t0 = ~0ull;
  for (int k = 0; k < 2; ++k)
    for (int c = 0; c < std::min(grids[k], kBwdTraceCtas); ++c) t0 = std::min(t0, at(k, c, kBwdTraceEntry));
  for (int k = 0; k < 2; ++k) {
    const int n = std::min(grids[k], kBwdTraceCtas);
    if (n == 0) continue;
    const char* name = k == 0 ? "column" : "dq-pass";
    const char* mask = p.causal ? "causal" : "full";
    double first = 1e30, last = 0, busy = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    std::vector<std::vector<std::pair<double, double>>> per_sm(256);
    for (int c = 0; c < n; ++c) {
      const double e = (at(k, c, kBwdTraceEntry) - t0) * 1e-3, x = (at(k, c, kBwdTraceExit) - t0) * 1e-3;
      const int nb = blocks(k, c);
      first = std::min(first, e), last = std::max(last, x), busy += x - e;
      sx += nb, sy += x - e, sxx += double(nb) * nb, sxy += double(nb) * (x - e);
      per_sm[at(k, c, kBwdTraceSm) & 255].push_back({e, x});
    }
    int sms = 0, ngaps = 0;
    double drain_from = 1e30, gaps = 0;
    for (auto& v : per_sm) {
      if (v.empty()) continue;
      ++sms;
      std::sort(v.begin(), v.end());
      drain_from = std::min(drain_from, v.back().second);
      for (size_t i = 1; i < v.size(); ++i) gaps += v[i].first - v[i - 1].second, ++ngaps;
    }
    if (phase(k, n, kBwdTraceLoopEnd, kBwdTraceEpiIssued) >= 0)  // the column kernel's exit steps
      std::printf(
          "epilogue %s s%d %s: to barrier %.2f, staged %.2f, stores issued %.2f, read and "
          "exit %.2f us\n",
          name, p.sq, mask, phase(k, n, kBwdTraceLoopEnd, kBwdTraceEpiSync),
          phase(k, n, kBwdTraceEpiSync, kBwdTraceEpiStaged),
          phase(k, n, kBwdTraceEpiStaged, kBwdTraceEpiIssued),
          phase(k, n, kBwdTraceEpiIssued, kBwdTraceExit));
    if (phase(k, n, kBwdTraceFirstData, kBwdTraceFirstBlock) >= 0)  // the column kernel's owners
      std::printf(
          "phases %s s%d %s: first stage %.2f us, first block %.2f us, later blocks %.3f us "
          "each, last GEMM to exit %.2f us\n",
          name, p.sq, mask, phase(k, n, kBwdTraceEntry, kBwdTraceFirstData),
          phase(k, n, kBwdTraceFirstData, kBwdTraceFirstBlock),
          phase(k, n, kBwdTraceFirstBlock, kBwdTraceLoopEnd, true, 1),
          phase(k, n, kBwdTraceLoopEnd, kBwdTraceExit));
    else if (phase(k, n, kBwdTraceFirstData, kBwdTraceLoopEnd) >= 0)  // the dQ pass
      std::printf(
          "phases %s s%d %s: Q / dO stage %.2f us, blocks %.3f us each, last GEMM to exit "
          "%.2f us\n",
          name, p.sq, mask, phase(k, n, kBwdTraceEntry, kBwdTraceFirstData),
          phase(k, n, kBwdTraceFirstData, kBwdTraceLoopEnd, true),
          phase(k, n, kBwdTraceLoopEnd, kBwdTraceExit));
    const double span = last - first, slope = (n * sxy - sx * sy) / std::max(1e-9, n * sxx - sx * sx);
    std::printf(
        "trace %s s%d %s: CTAs %d on %d SMs, span %.1f us (from %.1f), idle %.1f%%, "
        "drain %.1f us, gap %.2f us, fit a %.2f us + b %.3f us x n (mean n %.1f)\n",
        name, p.sq, mask, n, sms, span, first, 100.0 * (1.0 - busy / (sms * span)),
        last - drain_from, ngaps ? gaps / ngaps : 0.0, (sy - slope * sx) / n, slope, sx / n);
  }
}
#endif

}  // namespace (opened in ab_common.cuh)

int main(int argc, char** argv) {
  return harness_main(
      argc, argv,
      // the last: more tiles than SMs (a second wave of CTAs)
      {{1, 2, 500, 500, 21}, {1, 2, 333, 529, 22}, {2, 1, 300, 129, 23}, {1, 48, 400, 390, 24}},
      check,
      [](bool causal, int s, int b, int h) {
        Problem p = make(b, h, s, s, causal, 7);
        Grads g = make_grads(p, 9);
        run_forward(p);
        const float ms = median_ms([&] { run_backward(p, g); });
#ifdef FK_BWD_TRACE
        run_backward(p, g);
        trace_summary(p);
#endif
        release(g);
        release(p);
        return std::pair<float, double>(ms, 2.5 * 4.0 * b * h * double(s) * s * kD / (causal ? 2 : 1));
      });
}
