// Small helpers shared by the CPU and GPU MAS tests (tests/cpp/test_mas.cpp, tests/gpu/test_mas.cu).
#pragma once
#include <cstdint>
#include <vector>

#include "common/host_tensor.h"

namespace flashkit {

// A byte snapshot of a tensor, to check that an erroring call left it untouched.
inline std::vector<uint8_t> bytes_of(const HostTensor& t) {
  return std::vector<uint8_t>(t.bytes(), t.bytes() + t.numel() * dtype_size(t.dtype()));
}

// An int32 [B] lengths tensor.
inline HostTensor lengths_tensor(const std::vector<int32_t>& v) {
  HostTensor t(DType::i32, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.ptr<int32_t>()[i] = v[i];
  return t;
}

}  // namespace flashkit
