// The flashkit._C extension: converts arrays to TensorViews and maps flashkit::Error to
// ValueError; each op family binds itself in python/src/<family>.cpp.
#include <string>

#include <nanobind/stl/string.h>

#include "bindings.h"
#include "flashkit/common.h"
#include "flashkit/errors.h"

namespace flashkit::py {

namespace {
// The array's shape, strides, data and device (dtype left for the caller).
TensorView view_of(const nb::ndarray<>& a, const char* name) {
  if (a.ndim() > static_cast<size_t>(kMaxDims))
    throw Error(std::string(name) + ": expected at most " + std::to_string(kMaxDims) +
                " dims, got " + std::to_string(a.ndim()));
  TensorView t;
  t.data = a.data();
  t.ndim = static_cast<int>(a.ndim());
  for (int d = 0; d < t.ndim; ++d) {
    t.shape[d] = static_cast<int64_t>(a.shape(d));
    t.stride[d] = static_cast<int64_t>(a.stride(d));
  }
  int dev = a.device_type();
  if (dev == nb::device::cpu::value) t.device = Device::cpu;
  else if (dev == nb::device::cuda::value) t.device = Device::cuda;
  else throw Error(std::string(name) + ": expected a CPU or CUDA array, got DLPack device " +
                   std::to_string(dev));
  t.device_id = a.device_id();
  return t;
}
}  // namespace

TensorView to_view(const nb::ndarray<>& a, const char* name) {
  TensorView t = view_of(a, name);
  nb::dlpack::dtype dt = a.dtype();
  using code = nb::dlpack::dtype_code;
  auto is = [&](code c, int bits) { return dt.code == static_cast<uint8_t>(c) && dt.bits == bits; };
  if (is(code::Float, 32)) t.dtype = DType::f32;
  else if (is(code::Float, 16)) t.dtype = DType::f16;
  else if (is(code::Bfloat, 16)) t.dtype = DType::bf16;
  else if (is(code::Float, 64)) t.dtype = DType::f64;
  else if (is(code::Int, 32)) t.dtype = DType::i32;
  else if (is(code::Int, 64)) t.dtype = DType::i64;
  else if (is(code::UInt, 8)) t.dtype = DType::u8;
  else if (is(code::Bool, 8)) t.dtype = DType::bool8;
  else if (is(code::Float8_E4M3FN, 8)) t.dtype = DType::e4m3;
  else
    throw Error(std::string(name) + ": unsupported dtype (DLPack code " +
                std::to_string(dt.code) + ", " + std::to_string(dt.bits) + " bits)");
  return t;
}

TensorView to_view_as(const nb::ndarray<>& a, const char* name, DType as) {
  TensorView t = view_of(a, name);
  if (a.dtype().bits != 8 * dtype_size(as) || a.dtype().lanes != 1)
    throw Error(std::string(name) + ": expected " + std::to_string(8 * dtype_size(as)) +
                "-bit elements to read as " + dtype_name(as) + ", got " +
                std::to_string(a.dtype().bits) + " bits");
  t.dtype = as;
  return t;
}

TensorView to_view_opt(const std::optional<nb::ndarray<>>& a, const char* name) {
  return a ? to_view(*a, name) : TensorView{};
}

}  // namespace flashkit::py

NB_MODULE(_C, m) {
  using namespace flashkit;
  // torch.library keeps the functions of our custom ops (and so this module's functions and
  // DecodePlans in flashkit's plan cache) alive until after nanobind's shutdown check, which
  // would then print a "leaked" report at every exit with torch loaded. Nothing leaks.
  nanobind::set_leak_warnings(false);
  nanobind::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const flashkit::Error& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
  m.def("build_info", [] {
    BuildInfo b = build_info();
    nanobind::dict d;
    d["version"] = b.version;
    d["cuda"] = b.cuda;
    d["cuda_archs"] = b.cuda_archs;
    d["kernel_set"] = b.kernel_set;
    d["cuda_attention"] = b.cuda_attention;
    d["cpu_threads"] = b.cpu_threads;
    d["gpus"] = cuda_device_count();
    return d;
  });
  py::bind_attention(m);
  py::bind_attention_gpu(m);
  py::bind_decode(m);
  py::bind_mas(m);
}
