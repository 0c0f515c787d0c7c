// PLACEHOLDER: replaced by the attention family's bindings.
#include "bindings.h"
namespace flashkit::py {
void bind_attention(nb::module_&) {}
}  // namespace flashkit::py
