// Moving q/k/v-like rows between the user's tensors (f32/f16/bf16, strided) and the fp32 tiles of
// the CPU attention loop: each tile is converted once, row-major or transposed (d x keys) as the
// GEMM that reads it wants. Used by attention_forward.cpp and attention_backward.cpp.
#pragma once
#include <cstdint>
#include <cstring>

#include "common/half.h"
#include "flashkit/errors.h"
#include "flashkit/tensor.h"

namespace flashkit::cpu {

// Element types as (storage, to-float, from-float) so the tile loops are templates, not switches.
struct F32 {
  using T = float;
  static float load(float x) { return x; }
  static float store(float x) { return x; }
};
struct F16 {
  using T = uint16_t;
  static float load(uint16_t x) { return fp16_to_float(x); }
  static uint16_t store(float x) { return float_to_fp16(x); }
};
struct BF16 {
  using T = uint16_t;
  static float load(uint16_t x) { return bf16_to_float(x); }
  static uint16_t store(float x) { return float_to_bf16(x); }
};

// Calls f(E{}) with E the element type of dtype t (f32, f16 or bf16; validated upstream).
template <class Fn>
void with_elem(DType t, Fn&& f) {
  switch (t) {
    case DType::f32:
      return f(F32{});
    case DType::f16:
      return f(F16{});
    case DType::bf16:
      return f(BF16{});
    default:
      throw Error("attention (cpu): unsupported dtype");
  }
}

// dst[r * ld + c] = scale * src[r * row_stride + c] for r < nr, c < d.
template <class E>
void load_rows(float* dst, int ld, const typename E::T* src, int64_t row_stride, int nr, int d,
               float scale = 1.f) {
  for (int r = 0; r < nr; ++r) {
    const typename E::T* s = src + r * row_stride;
    float* o = dst + static_cast<int64_t>(r) * ld;
    for (int c = 0; c < d; ++c) o[c] = scale * E::load(s[c]);
  }
}

// Transposed: dst[c * ld + r] = src[r * row_stride + c] (keys become columns for q.k^T).
template <class E>
void load_rows_t(float* dst, int ld, const typename E::T* src, int64_t row_stride, int nr, int d) {
  for (int r = 0; r < nr; ++r) {
    const typename E::T* s = src + r * row_stride;
    for (int c = 0; c < d; ++c) dst[static_cast<int64_t>(c) * ld + r] = E::load(s[c]);
  }
}

// dst[r * row_stride + c] = scale_r * src[r * ld + c], scale_r = row_scale ? row_scale[r] : scale.
template <class E>
void store_rows(typename E::T* dst, int64_t row_stride, const float* src, int ld, int nr, int d,
                float scale, const float* row_scale = nullptr) {
  for (int r = 0; r < nr; ++r) {
    const float f = row_scale ? row_scale[r] : scale;
    const float* s = src + static_cast<int64_t>(r) * ld;
    typename E::T* o = dst + r * row_stride;
    for (int c = 0; c < d; ++c) o[c] = E::store(f * s[c]);
  }
}

}  // namespace flashkit::cpu
