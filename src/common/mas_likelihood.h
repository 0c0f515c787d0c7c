// The Glow-TTS / VITS log-likelihood of text token x generating mel frame y, computed on the fly
// by the fused MAS (src/cpu/mas.cpp, src/cuda/mas/mas.cu):
//   value[x, y] = sum_c  -1/2 log 2pi - logs[c,x] - 1/2 e^{-2 logs[c,x]} (z[c,y] - m[c,x])^2
// Host and device evaluate it with the same correctly rounded fp32 operations in the same order
// (own exp, explicit fma, no flush of denormals), so the CPU and GPU fused paths see bit-equal
// likelihoods and therefore equal paths.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "common/hd.h"

namespace flashkit::mas {

#if defined(__CUDA_ARCH__)
__device__ __forceinline__ float fma_rn(float a, float b, float c) {
  float r;
  asm("fma.rn.f32 %0, %1, %2, %3;" : "=f"(r) : "f"(a), "f"(b), "f"(c));
  return r;
}
__device__ __forceinline__ float mul_rn(float a, float b) {
  float r;
  asm("mul.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ float add_rn(float a, float b) {
  float r;
  asm("add.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ float rint_rn(float a) { return rintf(a); }
__device__ __forceinline__ float from_bits(uint32_t u) { return __uint_as_float(u); }
#else
inline float fma_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float mul_rn(float a, float b) { return a * b; }  // the library builds -ffp-contract=off
inline float add_rn(float a, float b) { return a + b; }
inline float rint_rn(float a) { return std::nearbyint(a); }
inline float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
#endif

// e^x with a Cody-Waite reduction and a degree-7 polynomial, all fma: about 1 ulp, and the
// same bits on both sides (libm's expf and CUDA's differ in the last place).
FK_HD float exp_fp32(float x) {
  x = x < -87.f ? -87.f : (x > 88.f ? 88.f : x);
  const float k = rint_rn(mul_rn(x, 1.44269504088896341f));
  float r = fma_rn(k, -0.693145751953125f, x);
  r = fma_rn(k, -1.428606765330187045e-06f, r);
  float p = 1.f / 5040.f;
  p = fma_rn(p, r, 1.f / 720.f);
  p = fma_rn(p, r, 1.f / 120.f);
  p = fma_rn(p, r, 1.f / 24.f);
  p = fma_rn(p, r, 1.f / 6.f);
  p = fma_rn(p, r, 0.5f);
  p = fma_rn(p, r, 1.f);
  p = fma_rn(p, r, 1.f);
  return mul_rn(p, from_bits(static_cast<uint32_t>(static_cast<int>(k) + 127) << 23));
}

// Per (channel, text token): value's term is  c0 + z*c1 + z^2*c2.
struct Coeffs {
  float c0, c1, c2;
};

FK_HD Coeffs coeffs(float m, float logs) {
  const float s = exp_fp32(mul_rn(-2.f, logs));  // e^{-2 logs}
  const float half_log_2pi = 0.918938533204672742f;
  Coeffs k;
  k.c2 = mul_rn(-0.5f, s);
  k.c1 = mul_rn(m, s);  // m e^{-2 logs}
  k.c0 = fma_rn(mul_rn(-0.5f, m), k.c1,
                add_rn(-half_log_2pi, -logs));  // -1/2 log 2pi - logs - m^2 s/2
  return k;
}

// One channel's term for frame value z; the caller sums terms over channels c = 0, 1, ...
// with add_rn, starting from 0.
FK_HD float term(const Coeffs& k, float z) {
  return fma_rn(k.c2, mul_rn(z, z), fma_rn(k.c1, z, k.c0));
}

}  // namespace flashkit::mas
