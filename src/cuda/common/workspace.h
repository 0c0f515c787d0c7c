// Scratch memory for GPU ops: the caller's Workspace if given (checked for size), else a buffer
// cached per device that only grows, so steady-state calls never allocate. Growing happens
// outside CUDA-graph capture; during capture a too-small cache is an Error, not an allocation.
#pragma once
#include <cstddef>

#include "flashkit/common.h"

namespace flashkit::cuda {

// Returns `bytes` of device scratch on the current device for work on `stream`.
void* workspace(const Workspace& given, size_t bytes, Stream stream, const char* op);

}  // namespace flashkit::cuda
