// flashkit._C.monotonic_alignment_search(_fused): NumPy / DLPack arrays (CPU, or CUDA tensors with
// the caller's stream) -> flashkit's MAS; flashkit._C.maximum_path_raw: the drop-in's fast path for
// torch CUDA tensors, described by pointer, dtype code, shape and strides (no DLPack capsules, no
// mask slices: one call). The Python drop-ins live in python/flashkit/mas.py.
#include "flashkit/mas.h"

#include <nanobind/nanobind.h>
#include <nanobind/stl/array.h>

#include <array>
#include <cstdint>
#include <string>

#include "bindings.h"
#include "flashkit/errors.h"

namespace flashkit::py {

namespace {

MasOptions options(float neg, const std::optional<nb::ndarray<>>& status, uintptr_t stream) {
  MasOptions opts;
  opts.neg = neg;
  opts.status = to_view_opt(status, "status");
  opts.stream = reinterpret_cast<Stream>(stream);
  return opts;
}

using Dims = std::array<int64_t, 3>;

TensorView raw_view(uintptr_t data, int dtype, const Dims& shape, const Dims& stride, int ndim,
                    int device, const char* name) {
  if (dtype < 0 || dtype > static_cast<int>(DType::bool8))
    throw Error(std::string(name) + ": unsupported dtype code " + std::to_string(dtype));
  TensorView t;
  t.data = reinterpret_cast<void*>(data);
  t.dtype = static_cast<DType>(dtype);
  t.device = Device::cuda;
  t.device_id = device;
  t.ndim = ndim;
  for (int d = 0; d < ndim; ++d) t.shape[d] = shape[d], t.stride[d] = stride[d];
  return t;
}

// maximum_path(value, mask) on CUDA: value and mask [b, d1, d2] (strided), path a fresh contiguous
// [b, d1, d2] of value's dtype. Lengths are the mask's first column (d1) and first row (d2), read
// by the kernel; vits swaps the roles of d1 and d2 (python/flashkit/mas.py).
void maximum_path_raw(uintptr_t value, int vdtype, const Dims& shape, const Dims& vstride,
                      int vdevice, uintptr_t mask, int mdtype, const Dims& mstride, int mdevice,
                      uintptr_t path, bool vits, float neg, uintptr_t status, uintptr_t stream) {
  const int64_t B = shape[0], d1 = shape[1], d2 = shape[2];
  const Dims pstride = {d1 * d2, d2, 1};
  auto swap = [](const Dims& s) { return Dims{s[0], s[2], s[1]}; };
  auto line = [&](int dim) {  // mask[:, :, 0] (dim 1) or mask[:, 0, :] (dim 2)
    return raw_view(mask, mdtype, {B, shape[dim], 0}, {mstride[0], mstride[dim], 0}, 2, mdevice,
                    "mask");
  };
  const Dims vshape = vits ? swap(shape) : shape;
  TensorView v =
      raw_view(value, vdtype, vshape, vits ? swap(vstride) : vstride, 3, vdevice, "value");
  TensorView p = raw_view(path, vdtype, vshape, vits ? swap(pstride) : pstride, 3, vdevice, "path");
  MasOptions opts;
  opts.neg = neg;
  if (status != 0)
    opts.status =
        raw_view(status, static_cast<int>(DType::i32), {1, 0, 0}, {1, 0, 0}, 1, vdevice, "status");
  opts.stream = reinterpret_cast<Stream>(stream);
  nb::gil_scoped_release no_gil;
  monotonic_alignment_search(v, line(vits ? 2 : 1), line(vits ? 1 : 2), p, TensorView{}, opts);
}

}  // namespace

void bind_mas(nb::module_& m) {
  nb::dict codes;
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i32, DType::i64,
                  DType::u8, DType::bool8})
    codes[dtype_name(t)] = static_cast<int>(t);
  m.attr("dtype_codes") = codes;
  m.def("maximum_path_raw", &maximum_path_raw, nb::arg("value"), nb::arg("value_dtype"),
        nb::arg("shape"), nb::arg("value_stride"), nb::arg("value_device"), nb::arg("mask"),
        nb::arg("mask_dtype"), nb::arg("mask_stride"), nb::arg("mask_device"), nb::arg("path"),
        nb::arg("vits"), nb::arg("neg"), nb::arg("status"), nb::arg("stream"),
        "maximum_path on CUDA tensors given by pointer, DType code (dtype_codes), shape and\n"
        "strides in elements; path is a contiguous buffer of value's dtype. Used by\n"
        "flashkit.maximum_path for torch CUDA tensors.");
  m.def(
      "monotonic_alignment_search",
      [](const nb::ndarray<>& value, const nb::ndarray<>& text_lengths,
         const nb::ndarray<>& mel_lengths, const std::optional<nb::ndarray<>>& path,
         const std::optional<nb::ndarray<>>& durations, float neg,
         const std::optional<nb::ndarray<>>& status, uintptr_t stream) {
        MasOptions opts = options(neg, status, stream);
        TensorView v = to_view(value, "value"), tx = to_view(text_lengths, "text_lengths"),
                   ty = to_view(mel_lengths, "mel_lengths"), p = to_view_opt(path, "path"),
                   d = to_view_opt(durations, "durations");
        nb::gil_scoped_release no_gil;
        monotonic_alignment_search(v, tx, ty, p, d, opts);
      },
      nb::arg("value"), nb::arg("text_lengths"), nb::arg("mel_lengths"), nb::arg("path").none(),
      nb::arg("durations").none(), nb::arg("neg") = -1e9f, nb::arg("status").none() = nb::none(),
      nb::arg("stream") = 0,
      "Writes the Cython-exact MAS path [B, T, S] and/or durations int32 [B, T] for value\n"
      "[B, T, S] (any strides) and int32 lengths [B]; status (int32 [1]) gets -1 or the first\n"
      "item with bad lengths. See flashkit.mas for the Python API.");
  m.def(
      "monotonic_alignment_search_fused",
      [](const nb::ndarray<>& z, const nb::ndarray<>& mean, const nb::ndarray<>& logs,
         const nb::ndarray<>& text_lengths, const nb::ndarray<>& mel_lengths,
         const std::optional<nb::ndarray<>>& path, const std::optional<nb::ndarray<>>& durations,
         float neg, const std::optional<nb::ndarray<>>& status, uintptr_t stream) {
        MasOptions opts = options(neg, status, stream);
        TensorView zv = to_view(z, "z"), mv = to_view(mean, "m"), lv = to_view(logs, "logs"),
                   tx = to_view(text_lengths, "text_lengths"),
                   ty = to_view(mel_lengths, "mel_lengths"), p = to_view_opt(path, "path"),
                   d = to_view_opt(durations, "durations");
        nb::gil_scoped_release no_gil;
        monotonic_alignment_search_fused(zv, mv, lv, tx, ty, p, d, opts);
      },
      nb::arg("z"), nb::arg("m"), nb::arg("logs"), nb::arg("text_lengths"), nb::arg("mel_lengths"),
      nb::arg("path").none(), nb::arg("durations").none(), nb::arg("neg") = -1e9f,
      nb::arg("status").none() = nb::none(), nb::arg("stream") = 0,
      "MAS on the Glow-TTS/VITS likelihood computed on the fly from z [B, C, S], m and logs\n"
      "[B, C, T]; no [B, T, S] buffer.");
}

}  // namespace flashkit::py
