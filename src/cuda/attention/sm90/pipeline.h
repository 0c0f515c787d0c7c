// The mbarrier ring between the TMA producer warp and the consumer warpgroups: per stage a
// "full" barrier (the producer's expected byte count, completed by the TMA engine) and an
// "empty" one (every consumer thread arrives once it no longer reads the stage). Both sides walk
// the stages in the same order with a (stage, phase) state that persists across work tiles.
#pragma once
#include <cutlass/arch/barrier.h>

namespace flashkit::cuda::attn::sm90 {

template <int kStages_>
struct RingState {
  static constexpr int kStages = kStages_;
  int stage = 0;
  uint32_t phase = 0;
  __device__ __forceinline__ void advance() {
    if (++stage == kStages) stage = 0, phase ^= 1;
  }
};

template <int kStages>
struct TmaRing {
  using Barrier = cutlass::arch::ClusterTransactionBarrier;
  struct Storage {
    uint64_t full[kStages];
    uint64_t empty[kStages];
  };
  using State = RingState<kStages>;

  // One thread, before the block-wide barrier that publishes the initialisation.
  __device__ static void init(Storage& s, int consumers) {
    for (int i = 0; i < kStages; ++i) {
      Barrier::init(&s.full[i], 1);
      Barrier::init(&s.empty[i], consumers);
    }
  }
  // Producer: wait until the stage is free (passes at once on the first lap: the wait is for
  // the phase before the current one), then announce `bytes` and return the barrier the TMA
  // copy completes.
  __device__ static uint64_t& producer_acquire(Storage& s, const State& st, uint32_t bytes) {
    Barrier::wait(&s.empty[st.stage], st.phase ^ 1);
    Barrier::arrive_and_expect_tx(&s.full[st.stage], bytes);
    return s.full[st.stage];
  }
  __device__ static void consumer_wait(Storage& s, const State& st) {
    Barrier::wait(&s.full[st.stage], st.phase);
  }
  __device__ static void consumer_release(Storage& s, const State& st) {
    consumer_release(s, st.stage);
  }
  __device__ static void consumer_release(Storage& s, int stage) {
    Barrier::arrive(&s.empty[stage]);
  }
  // consumer_release once `dep` is computed: the arrival is predicated on dep >= 0 or unordered
  // (setp.geu), so it always happens for a dep that is non-negative or NaN (a sum of
  // exponentials), yet the compilers must order it after dep's computation.
  __device__ static void consumer_release_after(Storage& s, const State& st, float dep) {
    const uint32_t addr = cute::cast_smem_ptr_to_uint(&s.empty[st.stage]);
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "setp.geu.f32 p, %1, 0f00000000;\n\t"
        "@p mbarrier.arrive.shared::cta.b64 _, [%0];\n\t}"
        :
        : "r"(addr), "f"(dep)
        : "memory");
  }
};

}  // namespace flashkit::cuda::attn::sm90
