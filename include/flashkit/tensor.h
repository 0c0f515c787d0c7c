// TensorView: a non-owning view of a strided tensor on the CPU or a CUDA device.
// Every flashkit entry point takes TensorViews; strides are in elements (not bytes).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>

namespace flashkit {

// e4m3: OCP float8 (torch.float8_e4m3fn); attention_forward's fp8 inputs (see attention.h).
enum class DType : uint8_t { f32, f16, bf16, f64, i32, i64, u8, bool8, e4m3 };
enum class Device : uint8_t { cpu, cuda };

inline constexpr int kMaxDims = 6;

size_t dtype_size(DType t);
const char* dtype_name(DType t);

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::f32;
  Device device = Device::cpu;
  int device_id = 0;
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t stride[kMaxDims] = {};

  // Contiguous (row-major) view.
  static TensorView of(void* data, DType dtype, std::initializer_list<int64_t> shape,
                       Device device = Device::cpu, int device_id = 0);
  // Strided view; strides in elements.
  static TensorView strided(void* data, DType dtype, std::initializer_list<int64_t> shape,
                            std::initializer_list<int64_t> stride, Device device = Device::cpu,
                            int device_id = 0);

  bool defined() const { return data != nullptr || ndim > 0; }
  int64_t size(int dim) const { return shape[dim < 0 ? dim + ndim : dim]; }
  int64_t numel() const;
  bool is_contiguous() const;
  std::string shape_str() const;  // "[2, 128, 8, 64]"

  template <class T>
  T* ptr() const { return static_cast<T*>(data); }
};

}  // namespace flashkit
