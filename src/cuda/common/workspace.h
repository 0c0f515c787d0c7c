// Scratch memory for GPU ops: the caller's Workspace if given (checked for size), else a buffer
// cached per device that only grows, so steady-state calls never allocate. Growing happens
// outside CUDA-graph capture; during capture a too-small cache is an Error, not an allocation.
#pragma once
#include <cstddef>

#include "flashkit/common.h"

namespace flashkit::cuda {

// Returns `bytes` of device scratch on the current device for work on `stream`.
void* workspace(const Workspace& given, size_t bytes, Stream stream, const char* op);

// Scratch an op may go without (it then runs another way): cached per (`slot`, device, stream)
// apart from workspace()'s buffer, so launches on different streams never share it; null while
// `stream` is being captured into a CUDA graph (a graph must not hold a buffer that a later call
// may free to grow it) and when the allocation fails. Slot 0: the Hopper forward's split tail.
void* optional_scratch(int slot, size_t bytes, Stream stream);

}  // namespace flashkit::cuda
