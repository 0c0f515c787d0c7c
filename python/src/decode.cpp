// PLACEHOLDER: replaced by the decode family's bindings.
#include "bindings.h"
namespace flashkit::py {
void bind_decode(nb::module_&) {}
}  // namespace flashkit::py
