// fp16 / bf16 / fp8 e4m3 <-> fp32 conversions on the host (round to nearest even), used by the CPU backend,
// the tests and the CLI. The CUDA side uses cuda_fp16.h / cuda_bf16.h types instead.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "flashkit/tensor.h"

namespace flashkit {

inline float bf16_to_float(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// _Float16 (GCC >= 12 on x86-64) converts with round-to-nearest-even, in hardware with F16C.
inline float fp16_to_float(uint16_t h) {
  _Float16 x;
  std::memcpy(&x, &h, 2);
  return static_cast<float>(x);
}

inline uint16_t float_to_fp16(float f) {
  _Float16 x = static_cast<_Float16>(f);
  uint16_t h;
  std::memcpy(&h, &x, 2);
  return h;
}

// OCP float8 e4m3 ("e4m3fn": bias 7, no infinities, 0x7f / 0xff NaN, largest finite 448).
inline float e4m3_to_float(uint8_t b) {
  const int e = (b >> 3) & 0xf, m = b & 7;
  float v;
  if (e == 15 && m == 7) v = std::numeric_limits<float>::quiet_NaN();
  else if (e == 0) v = std::ldexp(static_cast<float>(m), -9);
  else v = std::ldexp(static_cast<float>(8 + m), e - 10);
  return (b & 0x80) ? -v : v;
}

// Round to nearest even, saturating to +-448 like the GPU's cvt.rn.satfinite (NaN stays NaN).
inline uint8_t float_to_e4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  const float a = std::fabs(f);
  if (a >= 448.f) return sign | 0x7e;
  if (a == 0.f) return sign;
  int e = 0;
  std::frexp(a, &e);  // a = frac * 2^e, frac in [0.5, 1): the leading bit is 2^(e-1)
  const int lead = e - 1;
  if (lead < -6) {  // subnormal: multiples of 2^-9 (8 of them reach the smallest normal)
    return sign | static_cast<uint8_t>(std::nearbyint(std::ldexp(a, 9)));
  }
  int q = static_cast<int>(std::nearbyint(std::ldexp(a, 3 - lead)));  // 8 .. 16
  int be = lead + 7;
  if (q == 16) q = 8, ++be;
  const int code = (be << 3) | (q - 8);
  return sign | static_cast<uint8_t>(code > 0x7e ? 0x7e : code);
}

// Read / write element `i` (an element offset, strides already applied) of a float-like tensor.
inline float load_as_float(const void* base, DType t, int64_t i) {
  switch (t) {
    case DType::f32: return static_cast<const float*>(base)[i];
    case DType::f16: return fp16_to_float(static_cast<const uint16_t*>(base)[i]);
    case DType::bf16: return bf16_to_float(static_cast<const uint16_t*>(base)[i]);
    case DType::f64: return static_cast<float>(static_cast<const double*>(base)[i]);
    case DType::i32: return static_cast<float>(static_cast<const int32_t*>(base)[i]);
    case DType::i64: return static_cast<float>(static_cast<const int64_t*>(base)[i]);
    case DType::u8:
    case DType::bool8: return static_cast<float>(static_cast<const uint8_t*>(base)[i]);
    case DType::e4m3: return e4m3_to_float(static_cast<const uint8_t*>(base)[i]);
  }
  return 0.f;
}

inline void store_from_float(void* base, DType t, int64_t i, float v) {
  switch (t) {
    case DType::f32: static_cast<float*>(base)[i] = v; break;
    case DType::f16: static_cast<uint16_t*>(base)[i] = float_to_fp16(v); break;
    case DType::bf16: static_cast<uint16_t*>(base)[i] = float_to_bf16(v); break;
    case DType::f64: static_cast<double*>(base)[i] = v; break;
    case DType::i32: static_cast<int32_t*>(base)[i] = static_cast<int32_t>(v); break;
    case DType::i64: static_cast<int64_t*>(base)[i] = static_cast<int64_t>(v); break;
    case DType::u8:
    case DType::bool8: static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(v); break;
    case DType::e4m3: static_cast<uint8_t*>(base)[i] = float_to_e4m3(v); break;
  }
}

}  // namespace flashkit
