// Argument checks shared by every entry point in src/api/. Each throws flashkit::Error with a
// message that starts with the argument's name, says what was expected and what came.
// Entry points run all their checks before any output is touched.
#pragma once
#include <initializer_list>
#include <string>

#include "common/str_cat.h"
#include "flashkit/errors.h"
#include "flashkit/tensor.h"

namespace flashkit::detail {

template <class... Args>
[[noreturn]] void fail(const Args&... args) {
  throw Error(cat(args...));
}

const char* device_name(Device d);

void check_defined(const TensorView& t, const char* name);
void check_dtype(const TensorView& t, const char* name, std::initializer_list<DType> allowed);
void check_same_dtype(const TensorView& t, const char* name, const TensorView& ref,
                      const char* ref_name);
void check_same_device(const TensorView& t, const char* name, const TensorView& ref,
                       const char* ref_name);
void check_ndim(const TensorView& t, const char* name, int ndim);
// Expected shape; -1 entries match anything.
void check_shape(const TensorView& t, const char* name, std::initializer_list<int64_t> expected);
void check_same_shape(const TensorView& t, const char* name, const TensorView& ref,
                      const char* ref_name);
void check_last_dim_contiguous(const TensorView& t, const char* name);
void check_contiguous(const TensorView& t, const char* name);
void check_nonnegative_strides(const TensorView& t, const char* name);
void check_aligned(const TensorView& t, const char* name, size_t bytes);
// Output `out` must not share memory with input `in` (conservative: address-range overlap).
void check_no_overlap(const TensorView& out, const char* out_name, const TensorView& in,
                      const char* in_name);

}  // namespace flashkit::detail
