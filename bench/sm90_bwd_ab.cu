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
        release(g);
        release(p);
        return std::pair<float, double>(ms, 2.5 * 4.0 * b * h * double(s) * s * kD / (causal ? 2 : 1));
      });
}
