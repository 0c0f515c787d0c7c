// flashkit._C.monotonic_alignment_search: NumPy / DLPack arrays -> flashkit's MAS (CPU now;
// CUDA tensors once the GPU kernel lands). The Python drop-ins live in python/flashkit/mas.py.
#include "flashkit/mas.h"

#include <nanobind/nanobind.h>

#include "bindings.h"

namespace flashkit::py {

void bind_mas(nb::module_& m) {
  m.def(
      "monotonic_alignment_search",
      [](const nb::ndarray<>& value, const nb::ndarray<>& text_lengths,
         const nb::ndarray<>& mel_lengths, const std::optional<nb::ndarray<>>& path,
         const std::optional<nb::ndarray<>>& durations, float neg) {
        MasOptions opts;
        opts.neg = neg;
        TensorView v = to_view(value, "value"), tx = to_view(text_lengths, "text_lengths"),
                   ty = to_view(mel_lengths, "mel_lengths"), p = to_view_opt(path, "path"),
                   d = to_view_opt(durations, "durations");
        nb::gil_scoped_release no_gil;
        monotonic_alignment_search(v, tx, ty, p, d, opts);
      },
      nb::arg("value"), nb::arg("text_lengths"), nb::arg("mel_lengths"), nb::arg("path").none(),
      nb::arg("durations").none(), nb::arg("neg") = -1e9f,
      "Writes the Cython-exact MAS path [B, T, S] and/or durations int32 [B, T] for value\n"
      "[B, T, S] (any strides) and int32 lengths [B]; see flashkit.mas for the Python API.");
}

}  // namespace flashkit::py
