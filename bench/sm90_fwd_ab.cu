// Standalone A/B harness for the Hopper forward (bf16, hdim 128 or the -DAB_HDIM given, dense and
// causal): one binary per compile-time variant (the FLASHKIT_SM90_* knobs of
// src/cuda/attention/sm90/fwd_mainloop.h, passed with -D), built on the CPU machine by
// bench/sm90_fwd_ab.sh and run on the GPU by a bench/gpu-*.sh call, so a variant costs seconds
// of device time instead of a library build. Each run first checks O and LSE of small problems
// (lengths that are not tile multiples, seqlen_q != seqlen_k, causal and not) against a naive fp32
// reference kernel, with O poisoned (NaN) before the call; then times the FA2 protocol's shapes
// (batch * seqlen = 16k, hidden 2048) with CUDA events. One line per shape:
//   <variant> d<hdim> <full|causal> s<seqlen> <ms> <TFLOP/s>
// usage: sm90_fwd_ab <variant-name> [seqlen ...]   (default 2048 4096 8192 16384)
// AB_DIAG=1 in the environment: a failing check also lists the (batch, head, 128-row block) tiles
// whose O is off (host side only: the kernel is the same binary).
#include "ab_common.cuh"

// Max |O - O_ref| and |LSE - LSE_ref| (finite rows) on a small problem; O poisoned first.
bool check(int b, int h, int sq, int sk, bool causal, uint32_t seed) {
  Problem p = make(b, h, sq, sk, causal, seed);
  const int64_t no = int64_t(b) * sq * h * kD, nl = int64_t(b) * h * sq;
  float *o_ref, *l_ref;
  AB_CHECK(cudaMalloc(&o_ref, no * 4));
  AB_CHECK(cudaMalloc(&l_ref, nl * 4));
  AB_CHECK(cudaMemset(p.o, 0xff, no * 2));  // NaN
  AB_CHECK(cudaMemset(p.lse, 0xff, nl * 4));
  run_forward(p);
  reference<<<dim3(sq, h, b), 128, sk * 4>>>(p.q, p.k, p.v, o_ref, l_ref, h, sq, sk,
                                             1.f / std::sqrt(float(kD)), causal, p.bm);
  AB_CHECK(cudaDeviceSynchronize());
  std::vector<Bf16> o(no);
  std::vector<float> or_(no), l(nl), lr(nl);
  AB_CHECK(cudaMemcpy(o.data(), p.o, no * 2, cudaMemcpyDeviceToHost));
  AB_CHECK(cudaMemcpy(or_.data(), o_ref, no * 4, cudaMemcpyDeviceToHost));
  AB_CHECK(cudaMemcpy(l.data(), p.lse, nl * 4, cudaMemcpyDeviceToHost));
  AB_CHECK(cudaMemcpy(lr.data(), l_ref, nl * 4, cudaMemcpyDeviceToHost));
  // bf16 O of values in [-1, 1]: 2^-8 relative rounding plus P's bf16 rounding.
  constexpr double kTolO = 1e-2, kTolLse = 1e-3;
  double eo = 0, el = 0;
  bool ok = true;
  std::vector<double> row_err(no / kD, 0.0);  // max |dO| of each (batch, row, head), for AB_DIAG
  for (int64_t i = 0; i < no; ++i) {
    const double e = std::fabs(double(float(o[i])) - or_[i]);
    if (!(e <= 1e9)) ok = false;  // NaN left over
    eo = std::max(eo, e);
    row_err[i / kD] = std::max(row_err[i / kD], e);
  }
  for (int64_t i = 0; i < nl; ++i) {
    if (std::isinf(lr[i])) {
      ok = ok && std::isinf(l[i]) && l[i] < 0;
      continue;
    }
    el = std::max(el, std::fabs(double(l[i]) - lr[i]));
  }
  ok = ok && eo < kTolO && el < kTolLse;
  if (std::getenv("AB_DIAG") && !ok) {  // the tiles that are off (O is [b, s, h, d])
    int bad = 0, shown = 0;
    for (int bb = 0; bb < b; ++bb)
      for (int hh = 0; hh < h; ++hh)
        for (int m0 = 0; m0 < sq; m0 += 128) {
          double e = 0;
          int badrows = 0;
          for (int r = m0; r < std::min(sq, m0 + 128); ++r) {
            const double er = row_err[(int64_t(bb) * sq + r) * h + hh];
            badrows += er > kTolO;
            e = std::max(e, er);
          }
          if (e > kTolO) {
            ++bad;
            if (shown++ < 6)
              std::printf("  bad tile b%d h%d m%d: max %.2e rows %d\n", bb, hh, m0 / 128, e,
                          badrows);
          }
        }
    std::printf("  %d bad tiles of %d\n", bad, b * h * ((sq + 127) / 128));
  }
  std::printf("check b%d h%d sq%d sk%d %s: max|dO| %.2e max|dLSE| %.2e %s\n", b, h, sq, sk,
              causal ? "causal" : "full", eo, el, ok ? "ok" : "FAILED");
  cudaFree(o_ref), cudaFree(l_ref);
  release(p);
  return ok;
}

#ifdef FLASHKIT_SM90_FWD_TRACE
// CTA 0's phases per tile (fwd_mainloop.h's stamps), cycles, each consumer warpgroup: Q wait
// (0-1), first S + softmax (1-2), the other key blocks (2-3, and per block), the last P V on its
// own turn (3-4), the epilogue (4-5), and the scheduler to the next tile's start (5-0').
void trace_summary(bool causal, int s) {
  long long t[3][flashkit::cuda::attn::sm90::kTraceTiles][flashkit::cuda::attn::sm90::kTraceStamps];
  AB_CHECK(cudaMemcpyFromSymbol(t, flashkit::cuda::attn::sm90::fwd_trace, sizeof(t)));
  for (int wg = 0; wg < 2; ++wg) {
    double sum[10] = {}, per_block = 0;
    int n = 0;
    for (int k = 0; k + 1 < flashkit::cuda::attn::sm90::kTraceTiles; ++k) {
      const long long* a = t[wg][k];
      const long long* nx = t[wg][k + 1];
      if (a[0] == 0 || nx[0] == 0 || nx[0] < a[5] || a[6] < 1) break;  // past the CTA's tiles
      const double d[6] = {double(a[1] - a[0]), double(a[2] - a[1]), double(a[3] - a[2]),
                           double(a[4] - a[3]), double(a[5] - a[4]), double(nx[0] - a[5])};
      for (int i = 0; i < 6; ++i) sum[i] += d[i];
      sum[6] += double(a[6]);
      sum[7] += double(a[7] - a[0]);
      sum[8] += double(a[8] - a[0]);
      sum[9] += double(a[9] - a[8]);
      per_block += a[6] > 1 ? d[2] / double(a[6] - 1) : 0;
      if (k < 3)
        std::printf(
            "trace %s s%d wg%d tile %d blocks %lld: q %.0f first %.0f loop %.0f last_pv %.0f "
            "epi %.0f next %.0f\n",
            causal ? "causal" : "full", s, wg, k, a[6], d[0], d[1], d[2], d[3], d[4], d[5]);
      ++n;
    }
    if (n)
      std::printf(
          "trace %s s%d wg%d mean of %d tiles (%.1f blocks): q %.0f (walk %.0f: to mma %.0f, "
          "policy %.0f) first %.0f loop %.0f (%.0f a block) last_pv %.0f epi %.0f next %.0f\n",
          causal ? "causal" : "full", s, wg, n, sum[6] / n, sum[0] / n, sum[7] / n, sum[8] / n,
          sum[9] / n, sum[1] / n, sum[2] / n, per_block / n, sum[3] / n, sum[4] / n, sum[5] / n);
  }
  long long ph[3][8];
  AB_CHECK(cudaMemcpyFromSymbol(ph, flashkit::cuda::attn::sm90::fwd_loop_phase, sizeof(ph)));
  for (int wg = 0; wg < 2; ++wg)
    std::printf(
        "loop %s s%d wg%d cycles (all calls): turn %lld K+S %lld V+PV %lld walk %lld S-wait %lld "
        "softmax %lld PV-wait %lld rescale %lld\n",
        causal ? "causal" : "full", s, wg, ph[wg][0], ph[wg][1], ph[wg][2], ph[wg][3], ph[wg][4],
        ph[wg][5], ph[wg][6], ph[wg][7]);
  void* pa = nullptr;
  AB_CHECK(cudaGetSymbolAddress(&pa, flashkit::cuda::attn::sm90::fwd_loop_phase));
  AB_CHECK(cudaMemset(pa, 0, sizeof(ph)));
  void* addr = nullptr;  // cleared for the next shape (CTA 0 may take fewer tiles there)
  AB_CHECK(cudaGetSymbolAddress(&addr, flashkit::cuda::attn::sm90::fwd_trace));
  AB_CHECK(cudaMemset(addr, 0, sizeof(t)));
}
#endif

}  // namespace (opened in ab_common.cuh)

int main(int argc, char** argv) {
  return harness_main(
      argc, argv,
      // odd block counts (11 at hdim 128, 7 at 64), sq < sk, sq > sk
      // more tiles than SMs (the persistent schedulers' later tiles: 8 x 4 x 7 or 11 query blocks)
      {{2, 3, 1300, 1300, 11}, {1, 2, 333, 1029, 12}, {1, 2, 700, 129, 13}, {8, 4, 1300, 1100, 14}},
      check,
      [](bool causal, int s, int b, int h) {
        Problem p = make(b, h, s, s, causal, 7);
        const float ms = median_ms([&] { run_forward(p); });
#ifdef FLASHKIT_SM90_FWD_TRACE
        trace_summary(causal, s);  // the last timed call's stamps
#endif
        release(p);
        return std::pair<float, double>(ms, 4.0 * b * h * double(s) * s * kD / (causal ? 2 : 1));
      });
}
