// HostTensor: an owning, contiguous CPU tensor for tests, the CLI and benchmarks (the library
// itself never allocates user-visible tensors). Fill helpers draw fresh random data or poison.
#pragma once
#include <cmath>
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <random>
#include <vector>

#include "common/half.h"
#include "flashkit/tensor.h"

namespace flashkit {

class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DType dtype, std::initializer_list<int64_t> shape) { reset(dtype, shape); }
  HostTensor(DType dtype, const std::vector<int64_t>& shape) { reset(dtype, shape); }
  // Copies own their data: the view is re-pointed at the new storage.
  HostTensor(const HostTensor& o) : storage_(o.storage_), view_(o.view_) { view_.data = storage_.data(); }
  HostTensor& operator=(const HostTensor& o) {
    storage_ = o.storage_;
    view_ = o.view_;
    view_.data = storage_.data();
    return *this;
  }
  HostTensor(HostTensor&&) noexcept = default;  // vector move keeps the buffer, so data stays valid
  HostTensor& operator=(HostTensor&&) noexcept = default;

  void reset(DType dtype, const std::vector<int64_t>& shape) {
    view_ = TensorView{};
    view_.dtype = dtype;
    view_.ndim = static_cast<int>(shape.size());
    int64_t n = 1;
    for (int d = view_.ndim - 1; d >= 0; --d) {
      view_.shape[d] = shape[d];
      view_.stride[d] = n;
      n *= shape[d];
    }
    // 64-byte aligned storage, padded so an empty tensor still has a valid pointer.
    storage_.assign((static_cast<size_t>(n) * dtype_size(dtype) + 127) / 64, Line{});
    view_.data = storage_.data();
  }

  const TensorView& view() const { return view_; }
  operator const TensorView&() const { return view_; }
  int64_t numel() const { return view_.numel(); }
  DType dtype() const { return view_.dtype; }
  void* data() const { return view_.data; }
  template <class T>
  T* ptr() const { return static_cast<T*>(view_.data); }

  float get(int64_t i) const { return load_as_float(view_.data, view_.dtype, i); }
  void set(int64_t i, float v) { store_from_float(view_.data, view_.dtype, i, v); }

  void fill(float v) {
    for (int64_t i = 0; i < numel(); ++i) set(i, v);
  }
  void fill_uniform(std::mt19937_64& rng, float lo, float hi) {
    std::uniform_real_distribution<float> u(lo, hi);
    for (int64_t i = 0; i < numel(); ++i) set(i, u(rng));
  }
  void fill_normal(std::mt19937_64& rng, float mean = 0.f, float sd = 1.f) {
    std::normal_distribution<float> n(mean, sd);
    for (int64_t i = 0; i < numel(); ++i) set(i, n(rng));
  }
  void fill_int(std::mt19937_64& rng, int lo, int hi) {  // inclusive; tie-heavy data
    std::uniform_int_distribution<int> u(lo, hi);
    for (int64_t i = 0; i < numel(); ++i) set(i, static_cast<float>(u(rng)));
  }
  // Poison: NaN for float dtypes, 0x7f.. pattern for integers, so unwritten outputs show.
  void poison() {
    if (view_.dtype == DType::f32 || view_.dtype == DType::f16 || view_.dtype == DType::bf16 ||
        view_.dtype == DType::f64)
      fill(NAN);
    else
      for (auto& l : storage_)
        for (auto& b : l.b) b = 0x7f;
  }
  std::vector<float> to_float() const {
    std::vector<float> r(numel());
    for (int64_t i = 0; i < numel(); ++i) r[i] = get(i);
    return r;
  }
  bool same_bytes(const HostTensor& o) const {
    size_t n = static_cast<size_t>(numel()) * dtype_size(dtype());
    return o.numel() == numel() && o.dtype() == dtype() &&
           std::equal(bytes(), bytes() + n, o.bytes());
  }
  const uint8_t* bytes() const { return reinterpret_cast<const uint8_t*>(view_.data); }

 private:
  struct alignas(64) Line {
    uint8_t b[64] = {};
  };
  std::vector<Line> storage_;
  TensorView view_;
};

}  // namespace flashkit
