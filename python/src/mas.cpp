// flashkit._C.monotonic_alignment_search(_fused): NumPy / DLPack arrays (CPU, or CUDA tensors with
// the caller's stream) -> flashkit's MAS. The Python drop-ins live in python/flashkit/mas.py.
#include "flashkit/mas.h"

#include <nanobind/nanobind.h>

#include <cstdint>

#include "bindings.h"

namespace flashkit::py {

namespace {

MasOptions options(float neg, const std::optional<nb::ndarray<>>& status, uintptr_t stream) {
  MasOptions opts;
  opts.neg = neg;
  opts.status = to_view_opt(status, "status");
  opts.stream = reinterpret_cast<Stream>(stream);
  return opts;
}

}  // namespace

void bind_mas(nb::module_& m) {
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
