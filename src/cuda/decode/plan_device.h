// The device copy of a DecodePlan: its arrays and the sync words (Lean's flags/epoch, split-KV's
// per-tile arrival counters), uploaded once per plan (and device) on first use and freed with the
// plan's last copy. Used by dispatch.cu.
#pragma once
#include <cuda_runtime.h>

#include "flashkit/plan.h"

namespace flashkit::cuda::decoding {

struct PlanOnDevice {
  const DecodeTile* tiles = nullptr;
  const LeanCta* ctas = nullptr;
  const KvSplit* splits = nullptr;
  const int* kv_lengths = nullptr;
  unsigned* flags = nullptr;  // [grid] (split-KV: grid >= tiles), zero at upload
  unsigned* epoch = nullptr;
  unsigned* arrived = nullptr;
};

// Returns the plan's copy on `device`, uploading it first if needed (a synchronous copy: never
// during CUDA-graph capture, where it is an Error asking for one run before capture).
PlanOnDevice plan_on_device(const DecodePlan& plan, int device, cudaStream_t stream);

}  // namespace flashkit::cuda::decoding
