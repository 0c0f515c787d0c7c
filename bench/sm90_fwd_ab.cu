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
                                           1.f / std::sqrt(float(kD)), causal);
  AB_CHECK(cudaDeviceSynchronize());
  std::vector<Bf16> o(no);
  std::vector<float> or_(no), l(nl), lr(nl);
  AB_CHECK(cudaMemcpy(o.data(), p.o, no * 2, cudaMemcpyDeviceToHost));
  AB_CHECK(cudaMemcpy(or_.data(), o_ref, no * 4, cudaMemcpyDeviceToHost));
  AB_CHECK(cudaMemcpy(l.data(), p.lse, nl * 4, cudaMemcpyDeviceToHost));
  AB_CHECK(cudaMemcpy(lr.data(), l_ref, nl * 4, cudaMemcpyDeviceToHost));
  double eo = 0, el = 0;
  bool ok = true;
  for (int64_t i = 0; i < no; ++i) {
    const double e = std::fabs(double(float(o[i])) - or_[i]);
    if (!(e <= 1e9)) ok = false;  // NaN left over
    eo = std::max(eo, e);
  }
  for (int64_t i = 0; i < nl; ++i) {
    if (std::isinf(lr[i])) {
      ok = ok && std::isinf(l[i]) && l[i] < 0;
      continue;
    }
    el = std::max(el, std::fabs(double(l[i]) - lr[i]));
  }
  // bf16 O of values in [-1, 1]: 2^-8 relative rounding plus P's bf16 rounding.
  ok = ok && eo < 1e-2 && el < 1e-3;
  std::printf("check b%d h%d sq%d sk%d %s: max|dO| %.2e max|dLSE| %.2e %s\n", b, h, sq, sk,
              causal ? "causal" : "full", eo, el, ok ? "ok" : "FAILED");
  cudaFree(o_ref), cudaFree(l_ref);
  release(p);
  return ok;
}

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
        release(p);
        return std::pair<float, double>(ms, 4.0 * b * h * double(s) * s * kD / (causal ? 2 : 1));
      });
}
