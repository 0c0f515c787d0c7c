// Release stores, acquire loads and acquire-release adds of 32-bit words in global memory at GPU
// scope: the flags and counters by which CTAs hand work to each other (attention's deterministic
// dQ turns, decode's Lean partials and split-KV arrivals, MAS's row handoff between CTAs). One
// definition for int, unsigned and int32_t.
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

// Adds v and returns the old value: a release of what this thread (and, after a __syncthreads,
// its CTA) wrote, and an acquire of what the earlier adders released, e.g. "last one to arrive".
template <class T>
__device__ __forceinline__ T fetch_add_acq_rel(T* p, std::type_identity_t<T> v) {
  static_assert(sizeof(T) == 4 && std::is_integral_v<T>, "32-bit integer words only");
  unsigned old;
  asm volatile("atom.add.acq_rel.gpu.global.u32 %0, [%1], %2;"
               : "=r"(old)
               : "l"(p), "r"(static_cast<unsigned>(v))
               : "memory");
  return static_cast<T>(old);
}

}  // namespace flashkit::cuda
