// DeviceTensor: an owning CUDA copy of a HostTensor for the GPU tests and the CLI's GPU path.
// Uploads keep the host tensor's contiguous layout; download() fills a HostTensor back.
#pragma once
#ifdef FLASHKIT_WITH_CUDA
#include <cuda_runtime.h>

#include "common/host_tensor.h"
#include "cuda/common/check.h"

namespace flashkit {

class DeviceTensor {
 public:
  DeviceTensor() = default;
  explicit DeviceTensor(const HostTensor& h) { upload(h); }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;
  DeviceTensor(DeviceTensor&& o) noexcept : view_(o.view_), bytes_(o.bytes_) { o.view_.data = nullptr; }
  ~DeviceTensor() {
    if (view_.data) cudaFree(view_.data);
  }

  void upload(const HostTensor& h) {
    size_t bytes = static_cast<size_t>(h.numel()) * dtype_size(h.dtype());
    if (!view_.data || bytes_ < bytes) {
      if (view_.data) FK_CUDA_CHECK(cudaFree(view_.data));
      view_.data = nullptr;
      FK_CUDA_CHECK(cudaMalloc(&view_.data, bytes > 0 ? bytes : 16));
      bytes_ = bytes;
    }
    void* data = view_.data;
    view_ = h.view();
    view_.data = data;
    view_.device = Device::cuda;
    FK_CUDA_CHECK(cudaGetDevice(&view_.device_id));
    FK_CUDA_CHECK(cudaMemcpy(view_.data, h.data(), bytes, cudaMemcpyHostToDevice));
  }
  // Copies back into `h`, which must have this tensor's dtype and element count.
  void download(HostTensor& h) const {
    size_t bytes = static_cast<size_t>(h.numel()) * dtype_size(h.dtype());
    FK_CUDA_CHECK(cudaMemcpy(h.data(), view_.data, bytes, cudaMemcpyDeviceToHost));
  }
  // Poison on the device: NaN bytes (0xff) for floats, so unwritten outputs show.
  void poison() { FK_CUDA_CHECK(cudaMemset(view_.data, 0xff, bytes_)); }

  const TensorView& view() const { return view_; }
  operator const TensorView&() const { return view_; }

 private:
  TensorView view_;
  size_t bytes_ = 0;
};

}  // namespace flashkit
#endif
