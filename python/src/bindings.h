// Pieces shared by the nanobind extension's files: ndarray (NumPy / DLPack) -> TensorView, and
// the per-family binders that python/src/module.cpp calls.
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>

#include <optional>

#include "flashkit/tensor.h"

namespace flashkit::py {

namespace nb = nanobind;

// View of any DLPack/NumPy array (no copy). `name` goes into error messages.
TensorView to_view(const nb::ndarray<>& a, const char* name);
// View whose elements are read as `as` whatever the array's dtype says (same element size): for
// dtypes the producer lacks (NumPy: bfloat16, float8 e4m3).
TensorView to_view_as(const nb::ndarray<>& a, const char* name, DType as);
// Empty view for an omitted optional argument (None).
TensorView to_view_opt(const std::optional<nb::ndarray<>>& a, const char* name);

void bind_attention(nb::module_& m);
void bind_attention_gpu(nb::module_& m);  // python/src/attention_gpu.cpp
void bind_decode(nb::module_& m);
void bind_mas(nb::module_& m);

}  // namespace flashkit::py
