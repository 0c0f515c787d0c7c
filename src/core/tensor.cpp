// TensorView helpers and dtype names (include/flashkit/tensor.h).
#include "flashkit/tensor.h"

#include "common/str_cat.h"
#include "flashkit/errors.h"

namespace flashkit {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f64:
    case DType::i64: return 8;
    case DType::f32:
    case DType::i32: return 4;
    case DType::f16:
    case DType::bf16: return 2;
    case DType::u8:
    case DType::bool8:
    case DType::e4m3: return 1;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::f16: return "float16";
    case DType::bf16: return "bfloat16";
    case DType::f64: return "float64";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
    case DType::u8: return "uint8";
    case DType::bool8: return "bool";
    case DType::e4m3: return "float8_e4m3fn";
  }
  return "?";
}

static TensorView make(void* data, DType dtype, std::initializer_list<int64_t> shape,
                       Device device, int device_id) {
  if (shape.size() > static_cast<size_t>(kMaxDims))
    throw Error("TensorView: at most " + std::to_string(kMaxDims) + " dims, got " +
                std::to_string(shape.size()));
  TensorView t;
  t.data = data;
  t.dtype = dtype;
  t.device = device;
  t.device_id = device_id;
  t.ndim = static_cast<int>(shape.size());
  int i = 0;
  for (int64_t s : shape) t.shape[i++] = s;
  return t;
}

TensorView TensorView::of(void* data, DType dtype, std::initializer_list<int64_t> shape,
                          Device device, int device_id) {
  TensorView t = make(data, dtype, shape, device, device_id);
  int64_t s = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    t.stride[d] = s;
    s *= t.shape[d];
  }
  return t;
}

TensorView TensorView::strided(void* data, DType dtype, std::initializer_list<int64_t> shape,
                               std::initializer_list<int64_t> stride, Device device,
                               int device_id) {
  if (stride.size() != shape.size())
    throw Error("TensorView: " + std::to_string(shape.size()) + " dims but " +
                std::to_string(stride.size()) + " strides");
  TensorView t = make(data, dtype, shape, device, device_id);
  int i = 0;
  for (int64_t s : stride) t.stride[i++] = s;
  return t;
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= shape[d];
  return n;
}

bool TensorView::is_contiguous() const {
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    if (shape[d] != 1 && stride[d] != s) return false;
    s *= shape[d];
  }
  return true;
}

std::string TensorView::shape_str() const {
  std::string r = "[";
  for (int d = 0; d < ndim; ++d) detail::append(r, d ? ", " : ""), detail::append(r, shape[d]);
  return r + "]";
}

}  // namespace flashkit
