// Counters for the Hopper forward's dynamic tile scheduler (sm90/fwd_scheduler.h): each launch
// takes the next of kTileCounterSlots 4-byte counters in device memory, round robin, cleared on
// the launch's stream just before it. Two launches share a counter only if they are
// kTileCounterSlots launches apart and yet run at the same time (on different streams, or two
// CUDA graphs replayed side by side whose captured launches drew the same slot).
#pragma once
#include <cuda_runtime.h>

namespace flashkit::cuda::attn {

constexpr int kTileCounterSlots = 4096;

// A cleared counter on the current device (`device`), ready for a launch on `stream`; null (the
// caller's fixed order) for a first use inside a stream capture or a device index past 63.
unsigned* next_tile_counter(int device, cudaStream_t stream);

}  // namespace flashkit::cuda::attn
