// KernelSet<T, hdim>: the decode kernels of one (dtype, hdim), explicitly instantiated in
// src/cuda/instantiations/decode_*.cu (kernel.h holds the definitions), called by dispatch.cu.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda/decode/params.h"

namespace flashkit::cuda::decoding {

template <class T, int D>
struct KernelSet {
  // Launches p.grid CTAs of the schedule's kernel on `stream`.
  static void launch(const DecodeParams& p, DecodeSchedule s, cudaStream_t stream);
  // Co-resident CTAs per SM of the Lean kernel (its spin-waits need them all resident).
  static int ctas_per_sm();
  // Tokens per TMA box for this cache on the current device (tensor_maps.h), 0: cp.async loads.
  static int tma_box(bool paged, int page_size, int lean_tile);
};

}  // namespace flashkit::cuda::decoding
