// The decode kernels (single, split-KV, Lean) for fp16, hdim 64: one instantiation per file so
// they compile in parallel. Decode kernels are cheap to build, so every set keeps them all.
#include "cuda/decode/kernel.h"

namespace flashkit::cuda::decoding {
template struct KernelSet<__half, 64>;
}  // namespace flashkit::cuda::decoding
