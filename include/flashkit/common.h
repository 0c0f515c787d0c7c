// Types shared by every op: the CUDA stream handle (without pulling in CUDA headers), the
// caller-provided workspace, and what the library was built with.
#pragma once
#include <cstddef>
#include <string>

struct CUstream_st;  // cudaStream_t is CUstream_st*

namespace flashkit {

using Stream = CUstream_st*;

// Scratch memory on the op's device. GPU ops never allocate in the hot path: pass one of at least
// the size the op's *_workspace_bytes() says, or leave it empty and the library uses a buffer it
// caches per device (grown only when a larger one is needed, so steady-state calls do not allocate).
struct Workspace {
  void* data = nullptr;
  size_t bytes = 0;
};

struct BuildInfo {
  bool cuda = false;          // CUDA kernels compiled in
  std::string cuda_archs;     // e.g. "90a;80"
  std::string kernel_set;     // FLASHKIT_KERNELS: "all", "minimal", "noattention" or "check"
  bool cuda_attention = false;  // CUDA attention kernels callable (not noattention / check)
  std::string version;
  int cpu_threads = 1;        // OpenMP threads the CPU backend uses
};
BuildInfo build_info();

struct GpuInfo {
  int id = 0;
  std::string name;
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  size_t global_mem = 0;
  size_t l2_bytes = 0;
  size_t smem_per_sm = 0;
};
int cuda_device_count();            // 0 when built without CUDA or no GPU/driver
GpuInfo cuda_device_info(int device);

}  // namespace flashkit
