// Softcap's tanh on the GPU, shared by the attention score policies and the decode kernel.
#pragma once

namespace flashkit::cuda {

// The MUFU's tanh.approx.f32 (one MUFU op a score, as FlashAttention-2/3's
// cutlass::fast_tanh), relative error <= 2^-10.99, so a capped score moves by at most
// 5e-4 * |softcap * t| (0.015 at Gemma's softcap 30 where |t| ~ 1), a quarter of the bf16
// rounding of that score in a framework's low-precision path (the tolerance rule's baseline).
__device__ __forceinline__ float tanh_fast(float x) {
  float t;
  asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(x));
  return t;
}

}  // namespace flashkit::cuda
