// Release stores and acquire loads of 32-bit words in global memory at GPU scope: the flags and
// counters by which CTAs hand work to each other (attention's deterministic dQ turns, decode's
// Lean partials, MAS's row handoff between CTAs). One definition for int, unsigned and int32_t.
#pragma once
#include <type_traits>

namespace flashkit::cuda {

template <class T>
__device__ __forceinline__ T load_acquire(const T* p) {
  static_assert(sizeof(T) == 4 && std::is_integral_v<T>, "32-bit integer words only");
  unsigned v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return static_cast<T>(v);
}

template <class T>
__device__ __forceinline__ void store_release(T* p, std::type_identity_t<T> v) {
  static_assert(sizeof(T) == 4 && std::is_integral_v<T>, "32-bit integer words only");
  asm volatile("st.release.gpu.global.b32 [%0], %1;" ::"l"(p), "r"(static_cast<unsigned>(v)) : "memory");
}

}  // namespace flashkit::cuda
