// PLACEHOLDER: replaced by the mas family's bindings.
#include "bindings.h"
namespace flashkit::py {
void bind_mas(nb::module_&) {}
}  // namespace flashkit::py
