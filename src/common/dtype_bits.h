// one_bits(t): the bytes of the value 1 in dtype t, as the low bytes of a little-endian word.
// Writers of 0/1 outputs (the MAS path on the CPU and the GPU) store it with dtype_size(t) bytes.
// Kept apart from half.h so CUDA translation units can include it (no _Float16 here).
#pragma once
#include <cstdint>

#include "flashkit/tensor.h"

namespace flashkit {

constexpr uint32_t one_bits(DType t) {
  switch (t) {
    case DType::f32: return 0x3F800000u;
    case DType::f16: return 0x3C00u;
    case DType::bf16: return 0x3F80u;
    default: return 1u;  // int32, uint8, bool: the path dtypes MAS validation allows
  }
}

}  // namespace flashkit
