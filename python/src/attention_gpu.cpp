// Attention on any DLPack arrays the caller allocates (torch CUDA tensors included), writing into
// the given outputs on the given CUDA stream: the path bench/attention.py and the torch autograd
// wrapper use. Arrays become TensorViews through to_view; errors surface as ValueError.
#include <cstdint>

#include "bindings.h"
#include "flashkit/attention.h"

namespace flashkit::py {

namespace {

AttentionOptions options(float softmax_scale, bool causal, bool deterministic, uintptr_t stream,
                         const std::optional<nb::ndarray<>>& workspace) {
  AttentionOptions o;
  o.softmax_scale = softmax_scale;
  o.causal = causal;
  o.deterministic = deterministic;
  o.stream = reinterpret_cast<Stream>(stream);
  if (workspace) {
    o.workspace.data = workspace->data();
    o.workspace.bytes = workspace->nbytes();
  }
  return o;
}

}  // namespace

void bind_attention_gpu(nb::module_& m) {
  m.def(
      "attention_forward_into",
      [](nb::ndarray<> q, nb::ndarray<> k, nb::ndarray<> v, nb::ndarray<> out, nb::ndarray<> lse,
         float softmax_scale, bool causal, uintptr_t stream) {
        attention_forward(to_view(q, "q"), to_view(k, "k"), to_view(v, "v"), to_view(out, "out"),
                          to_view(lse, "lse"), options(softmax_scale, causal, false, stream, {}));
      },
      nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("out"), nb::arg("lse"),
      nb::arg("softmax_scale") = 0.f, nb::arg("causal") = false, nb::arg("stream") = 0,
      "out, lse = attention(q, k, v) written into the given [b, s, h, d] / [b, h, s] arrays.");
  m.def(
      "attention_backward_into",
      [](nb::ndarray<> q, nb::ndarray<> k, nb::ndarray<> v, nb::ndarray<> out, nb::ndarray<> dout,
         nb::ndarray<> lse, nb::ndarray<> dq, nb::ndarray<> dk, nb::ndarray<> dv,
         float softmax_scale, bool causal, bool deterministic, uintptr_t stream,
         std::optional<nb::ndarray<>> workspace) {
        attention_backward(to_view(q, "q"), to_view(k, "k"), to_view(v, "v"), to_view(out, "out"),
                           to_view(dout, "dout"), to_view(lse, "lse"), to_view(dq, "dq"),
                           to_view(dk, "dk"), to_view(dv, "dv"),
                           options(softmax_scale, causal, deterministic, stream, workspace));
      },
      nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("out"), nb::arg("dout"), nb::arg("lse"),
      nb::arg("dq"), nb::arg("dk"), nb::arg("dv"), nb::arg("softmax_scale") = 0.f,
      nb::arg("causal") = false, nb::arg("deterministic") = false, nb::arg("stream") = 0,
      nb::arg("workspace") = nb::none(),
      "dq, dk, dv of attention written into the given arrays; workspace: optional scratch of at "
      "least attention_backward_workspace_bytes(q, k) bytes (else a cached buffer is used).");
  m.def(
      "attention_backward_workspace_bytes",
      [](nb::ndarray<> q, nb::ndarray<> k, bool causal) {
        AttentionOptions o;
        o.causal = causal;
        return attention_backward_workspace_bytes(to_view(q, "q"), to_view(k, "k"), o);
      },
      nb::arg("q"), nb::arg("k"), nb::arg("causal") = false);
}

}  // namespace flashkit::py
