// Vectorisable fp32 building blocks of the CPU attention tile loop: a register-blocked GEMM on
// small row-major tiles and exp/tanh written as straight-line polynomials (libm's scalar calls
// would dominate the tile loop). Used by attention_forward.cpp and attention_backward.cpp.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>

namespace flashkit::cpu {

// exp(x) with ~1 ulp error for x in [-87, 88.7]; exactly 0 below (so masked -inf scores give 0).
inline float vexp(float x) {
  float xc = x < -87.5f ? -87.5f : x;  // ternaries, not fmin/fmax: those block vectorisation
  xc = xc > 88.7f ? 88.7f : xc;
  const float n = std::floor(std::fma(xc, 1.44269504f, 0.5f));
  float r = std::fma(n, -0.693359375f, xc);  // ln2 split in two so r stays exact
  r = std::fma(n, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = std::fma(p, r, 1.3981999507e-3f);
  p = std::fma(p, r, 8.3334519073e-3f);
  p = std::fma(p, r, 4.1665795894e-2f);
  p = std::fma(p, r, 1.6666665459e-1f);
  p = std::fma(p, r, 5.0000001201e-1f);
  const float y = std::fma(p * r, r, r) + 1.f;
  const float two_n = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  return x < -87.f ? 0.f : y * two_n;
}

// tanh through vexp: sign(x) * (1 - 2 / (exp(2|x|) + 1)); absolute error ~1e-7.
inline float vtanh(float x) {
  const float ax2 = 2.f * std::fabs(x);
  const float e = vexp(ax2 > 80.f ? 80.f : ax2);
  const float t = 1.f - 2.f / (e + 1.f);
  return std::copysign(t, x);
}

namespace detail {

// 8 floats in one AVX register; aligned(4) lets tiles with any offset be loaded through it.
typedef float v8f __attribute__((vector_size(32), aligned(4)));

// One MR x (8*NV) block of C, accumulators held in registers across the whole K loop. Written
// with vector extensions because GCC's SLP pass splits the plain-loop form into 128-bit halves.
template <int MR, int NV, bool TransA, bool Accumulate>
inline void gemm_block(int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc) {
  v8f acc[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < NV; ++c)
      acc[r][c] = Accumulate
                      ? *reinterpret_cast<const v8f*>(C + static_cast<int64_t>(r) * ldc + 8 * c)
                      : v8f{};
  for (int k = 0; k < K; ++k) {
    const float* b = B + static_cast<int64_t>(k) * ldb;
    v8f bv[NV];
    for (int c = 0; c < NV; ++c) bv[c] = *reinterpret_cast<const v8f*>(b + 8 * c);
    for (int r = 0; r < MR; ++r) {
      const float a =
          TransA ? A[static_cast<int64_t>(k) * lda + r] : A[static_cast<int64_t>(r) * lda + k];
      for (int c = 0; c < NV; ++c)
        acc[r][c] += a * bv[c];  // contracted to FMA (-ffp-contract=fast)
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < NV; ++c)
      *reinterpret_cast<v8f*>(C + static_cast<int64_t>(r) * ldc + 8 * c) = acc[r][c];
}

}  // namespace detail

// Max and sum of a row of n floats, n a multiple of 8 (padding holds -inf / 0): eight lanes kept
// apart so the loops vectorise without reassociating across lanes.
inline float row_max(const float* x, int n) {
  detail::v8f m = detail::v8f{} - INFINITY;
  for (int j = 0; j < n; j += 8) {
    const detail::v8f v = *reinterpret_cast<const detail::v8f*>(x + j);
    m = m > v ? m : v;
  }
  float r = m[0];
  for (int e = 1; e < 8; ++e) r = r > m[e] ? r : m[e];
  return r;
}

inline float row_sum(const float* x, int n) {
  detail::v8f acc{};
  for (int j = 0; j < n; j += 8) acc += *reinterpret_cast<const detail::v8f*>(x + j);
  float r = 0.f;
  for (int e = 0; e < 8; ++e) r += acc[e];
  return r;
}

// C[M][N] (+)= A * B with A(m, k) = TransA ? A[k*lda + m] : A[m*lda + k] and B[K][N] row-major.
// N must be a multiple of 8 (tiles are padded); M and K are free.
template <bool TransA, bool Accumulate>
void gemm(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C,
          int ldc) {
  auto a_row = [&](int m) { return TransA ? A + m : A + static_cast<int64_t>(m) * lda; };
  int m = 0;
  for (; m + 4 <= M; m += 4) {
    int n = 0;
    for (; n + 16 <= N; n += 16)
      detail::gemm_block<4, 2, TransA, Accumulate>(K, a_row(m), lda, B + n, ldb,
                                                   C + static_cast<int64_t>(m) * ldc + n, ldc);
    for (; n < N; n += 8)
      detail::gemm_block<4, 1, TransA, Accumulate>(K, a_row(m), lda, B + n, ldb,
                                                   C + static_cast<int64_t>(m) * ldc + n, ldc);
  }
  for (; m < M; ++m) {
    int n = 0;
    for (; n + 16 <= N; n += 16)
      detail::gemm_block<1, 2, TransA, Accumulate>(K, a_row(m), lda, B + n, ldb,
                                                   C + static_cast<int64_t>(m) * ldc + n, ldc);
    for (; n < N; n += 8)
      detail::gemm_block<1, 1, TransA, Accumulate>(K, a_row(m), lda, B + n, ldb,
                                                   C + static_cast<int64_t>(m) * ldc + n, ldc);
  }
}

}  // namespace flashkit::cpu
