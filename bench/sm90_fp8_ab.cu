// Standalone harness for the Hopper FP8 (e4m3) forward (hdim 128 or the -DAB_HDIM given): checks O
// (bf16) and LSE of small problems against a naive fp32 kernel on the dequantized inputs (O
// poisoned first; descales != 1), then times the FA2 protocol's shapes for the fp8 forward (its V
// transpose included), the transpose alone and the bf16 forward on the same values. One line per
// shape: <variant> d<hdim> <full|causal> s<seqlen> <fp8 ms> <fp8 TFLOP/s> <bf16 TFLOP/s> <ratio>
// <transpose us>.
// usage: sm90_fp8_ab <variant-name> [seqlen ...]   (seqlen 0: the checks only)
#include "ab_common.cuh"

// (inside ab_common.cuh's anonymous namespace)

using E4m3 = cutlass::float_e4m3_t;
// Descales (real = fp8 * d): powers of two, so the bf16 copies the reference reads are exact.
constexpr float kQd = 1.f / 32, kKd = 1.f / 16, kVd = 1.f / 64;

__global__ void fill_fp8(E4m3* x, const Bf16* src, int64_t n, float inv_descale) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    x[i] = E4m3(float(src[i]) * inv_descale);
}
__global__ void dequant(Bf16* y, const E4m3* x, int64_t n, float d) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = Bf16(float(x[i]) * d);  // exact: 4-bit significands times a power-of-two-ish scale
}

// The bf16 problem p's values quantized to fp8 (q8 = q / kQd ...), and p's q/k/v replaced by the
// dequantized fp8 values, so the reference and the bf16 timing see the same numbers.
struct Fp8 {
  E4m3 *q, *k, *v;
  void* vt;
  float* d;  // q, k, v descales on the device
};
Fp8 quantize(Problem& p) {
  Fp8 f;
  const int64_t nq = int64_t(p.b) * p.sq * p.h * kD, nk = int64_t(p.b) * p.sk * p.h * kD;
  AB_CHECK(cudaMalloc(&f.q, nq));
  AB_CHECK(cudaMalloc(&f.k, nk));
  AB_CHECK(cudaMalloc(&f.v, nk));
  AB_CHECK(cudaMalloc(&f.vt, flashkit::cuda::attn::fp8_vt_bytes(false, p.b, p.h, kD, p.sk, 0)));
  AB_CHECK(cudaMalloc(&f.d, 12));
  const float d[3] = {kQd, kKd, kVd};
  AB_CHECK(cudaMemcpy(f.d, d, 12, cudaMemcpyHostToDevice));
  fill_fp8<<<1024, 256>>>(f.q, p.q, nq, 1.f / kQd);
  fill_fp8<<<1024, 256>>>(f.k, p.k, nk, 1.f / kKd);
  fill_fp8<<<1024, 256>>>(f.v, p.v, nk, 1.f / kVd);
  dequant<<<1024, 256>>>(p.q, f.q, nq, kQd);
  dequant<<<1024, 256>>>(p.k, f.k, nk, kKd);
  dequant<<<1024, 256>>>(p.v, f.v, nk, kVd);
  AB_CHECK(cudaGetLastError());
  return f;
}
void release(Fp8& f) { cudaFree(f.q), cudaFree(f.k), cudaFree(f.v), cudaFree(f.vt), cudaFree(f.d); }

void run_fp8(const Problem& p, const Fp8& f) {
  AttnArguments a = p.args();
  a.q = f.q, a.k = f.k, a.v = f.v, a.vt = f.vt;
  a.q_descale.p = f.d, a.k_descale.p = f.d + 1, a.v_descale.p = f.d + 2;
  if (p.causal)
    flashkit::cuda::attn::run_fwd_sm90<E4m3, kD, PlainScores<true>>(a, nullptr);
  else
    flashkit::cuda::attn::run_fwd_sm90<E4m3, kD, PlainScores<false>>(a, nullptr);
}

bool check(int b, int h, int sq, int sk, bool causal, uint32_t seed) {
  Problem p = make(b, h, sq, sk, causal, seed);
  Fp8 f = quantize(p);
  const int64_t no = int64_t(b) * sq * h * kD, nl = int64_t(b) * h * sq;
  float *o_ref, *l_ref;
  AB_CHECK(cudaMalloc(&o_ref, no * 4));
  AB_CHECK(cudaMalloc(&l_ref, nl * 4));
  AB_CHECK(cudaMemset(p.o, 0xff, no * 2));  // NaN
  AB_CHECK(cudaMemset(p.lse, 0xff, nl * 4));
  AB_CHECK(cudaMemset(f.vt, 0xff, flashkit::cuda::attn::fp8_vt_bytes(false, b, h, kD, sk, 0)));
  run_fp8(p, f);
  reference<<<dim3(sq, h, b), 128, sk * 4>>>(p.q, p.k, p.v, o_ref, l_ref, h, sq, sk,
                                           1.f / std::sqrt(float(kD)), causal);
  AB_CHECK(cudaDeviceSynchronize());
  std::vector<Bf16> o(no);
  std::vector<float> or_(no), l(nl), lr(nl);
  AB_CHECK(cudaMemcpy(o.data(), p.o, no * 2, cudaMemcpyDeviceToHost));
  AB_CHECK(cudaMemcpy(or_.data(), o_ref, no * 4, cudaMemcpyDeviceToHost));
  AB_CHECK(cudaMemcpy(l.data(), p.lse, nl * 4, cudaMemcpyDeviceToHost));
  AB_CHECK(cudaMemcpy(lr.data(), l_ref, nl * 4, cudaMemcpyDeviceToHost));
  double eo = 0, el = 0, mo = 0, se = 0;
  bool ok = true;
  for (int64_t i = 0; i < no; ++i) {
    const double e = std::fabs(double(float(o[i])) - or_[i]);
    if (!(e <= 1e9)) ok = false;  // NaN left over
    eo = std::max(eo, e);
    se += e * e;
    mo = std::max(mo, double(std::fabs(or_[i])));
  }
  for (int64_t i = 0; i < nl; ++i) {
    if (std::isinf(lr[i])) {
      ok = ok && std::isinf(l[i]) && l[i] < 0;
      continue;
    }
    el = std::max(el, std::fabs(double(l[i]) - lr[i]));
  }
  // P in e4m3 (3 mantissa bits): up to 6% per element, averaging over many keys but not in the
  // causal rows that see a handful (O there is a few V rows: |O| up to ~2).
  ok = ok && eo < 1e-1 && el < 1e-3;
  std::printf("check fp8 b%d h%d sq%d sk%d %s: max|dO| %.2e (rms %.2e, max|O| %.2f) max|dLSE| %.2e %s\n",
              b, h, sq, sk, causal ? "causal" : "full", eo, std::sqrt(se / no), mo, el,
              ok ? "ok" : "FAILED");
  cudaFree(o_ref), cudaFree(l_ref);
  release(f);
  release(p);
  return ok;
}

}  // namespace (opened in ab_common.cuh)

int main(int argc, char** argv) {
  const std::string name = argc > 1 ? argv[1] : "fp8";
  std::vector<int> seqlens;
  for (int i = 2; i < argc; ++i) seqlens.push_back(std::atoi(argv[i]));
  if (seqlens.empty()) seqlens = {2048, 4096, 8192, 16384};
  bool ok = true;
  for (bool causal : {false, true})
    for (auto [b, h, sq, sk, seed] : {std::tuple{2, 3, 1300, 1300, 11u}, {1, 2, 333, 1029, 12u},
                                      {1, 2, 700, 129, 13u}, {1, 1, 1, 77, 14u}})
      ok &= check(b, h, sq, sk, causal, seed);
  if (!ok) {
    std::printf("%s: reference check FAILED\n", name.c_str());
    return 1;
  }
  for (bool causal : {false, true}) {
    for (int s : seqlens) {
      if (s <= 0) continue;
      const int b = std::max(1, 16384 / s), h = 2048 / kD;
      Problem p = make(b, h, s, s, causal, 7);
      Fp8 f = quantize(p);
      const float ms8 = median_ms([&] { run_fp8(p, f); });
      const float ms16 = median_ms([&] { run_forward(p); });
      AttnArguments ta = p.args();
      ta.v = f.v, ta.vt = f.vt;
      const float mst =
          median_ms([&] { flashkit::cuda::attn::sm90::transpose_v_fp8_launch<kD>(ta, nullptr); });
      const double flops = 4.0 * b * h * double(s) * s * kD / (causal ? 2 : 1);
      const double t8 = flops / (ms8 * 1e-3) / 1e12, t16 = flops / (ms16 * 1e-3) / 1e12;
      std::printf("%s d%d %s s%d %.4f %.1f %.1f %.2f %.1f\n", name.c_str(), kD,
                  causal ? "causal" : "full", s, ms8, t8, t16, t8 / t16, mst * 1e3);
      release(f);
      release(p);
    }
  }
  AB_CHECK(cudaDeviceSynchronize());
  return 0;
}
