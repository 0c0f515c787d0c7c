// Python bindings of the decode family: DecodePlan (a read-only class made by make_decode_plan),
// decode and merge_states writing into caller-given NumPy / DLPack (e.g. torch CUDA) arrays.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>

#include "bindings.h"
#include "flashkit/decode.h"
#include "flashkit/errors.h"

namespace flashkit::py {

namespace {

DType parse_dtype(const std::string& s) {
  if (s == "float32") return DType::f32;
  if (s == "float16") return DType::f16;
  if (s == "bfloat16") return DType::bf16;
  throw Error("dtype: expected 'float32', 'float16' or 'bfloat16', got '" + s + "'");
}

Stream to_stream(uintptr_t s) { return reinterpret_cast<Stream>(s); }

}  // namespace

void bind_decode(nb::module_& m) {
  nb::class_<DecodePlan>(m, "DecodePlan", "A decode schedule computed on the host (plan -> run).")
      .def_prop_ro("schedule", [](const DecodePlan& p) { return std::string(schedule_name(p.schedule)); })
      .def_ro("grid", &DecodePlan::grid)
      .def_ro("num_splits", &DecodePlan::num_splits)
      .def_ro("total_iters", &DecodePlan::total_iters)
      .def_ro("lean_tile", &DecodePlan::lean_tile)
      .def_ro("kv_lengths", &DecodePlan::kv_lengths)
      // What the plan was made from (with kv_lengths and the shapes): the same inputs give the
      // same plan, which is how flashkit.decode names a plan to its torch custom op.
      .def_prop_ro("requested", [](const DecodePlan& p) { return std::string(schedule_name(p.requested)); })
      .def_prop_ro("sm_count", [](const DecodePlan& p) { return p.device.sm_count; })
      .def_prop_ro("ctas_per_sm", [](const DecodePlan& p) { return p.device.ctas_per_sm; })
      .def_prop_ro("window_left", [](const DecodePlan& p) { return p.problem.window_left; })
      .def_prop_ro("workspace_bytes", [](const DecodePlan& p) { return decode_workspace_bytes(p); })
      .def("__repr__", [](const DecodePlan& p) { return "DecodePlan(" + p.describe() + ")"; });

  m.def(
      "make_decode_plan",
      [](int batch, int q_len, int num_q_heads, int num_kv_heads, int hdim, const std::string& dtype,
         const std::vector<int>& kv_lengths, int page_size, const std::string& schedule,
         const std::string& device, int device_id, int sm_count, int ctas_per_sm,
         int window_left) {
        DecodeProblem p{batch, q_len, num_q_heads, num_kv_heads, hdim, parse_dtype(dtype),
                        page_size > 0, page_size, window_left};
        if (device != "cpu" && device != "cuda")
          throw Error("device: expected 'cpu' or 'cuda', got '" + device + "'");
        DeviceInfo dev = decode_device_info(p, device == "cpu" ? Device::cpu : Device::cuda, device_id);
        if (sm_count > 0) dev.sm_count = sm_count;
        if (ctas_per_sm > 0) dev.ctas_per_sm = ctas_per_sm;
        return make_decode_plan(p, kv_lengths, dev, parse_schedule(schedule));
      },
      nb::arg("batch"), nb::arg("q_len"), nb::arg("num_q_heads"), nb::arg("num_kv_heads"),
      nb::arg("hdim"), nb::arg("dtype"), nb::arg("kv_lengths"), nb::arg("page_size") = 0,
      nb::arg("schedule") = "auto", nb::arg("device") = "cpu", nb::arg("device_id") = 0,
      nb::arg("sm_count") = 0, nb::arg("ctas_per_sm") = 0, nb::arg("window_left") = -1,
      "Plan a decode; page_size > 0 means a paged cache. sm_count / ctas_per_sm override the "
      "device's values (0: query the device). window_left >= 0: the decodes' sliding window "
      "(auto then plans split_kv).");

  m.def(
      "decode",
      [](const nb::ndarray<>& q, const nb::ndarray<>& k_cache, const nb::ndarray<>& v_cache,
         const nb::ndarray<>& cache_seqlens, const std::optional<nb::ndarray<>>& block_table,
         const nb::ndarray<>& out, const nb::ndarray<>& lse, const DecodePlan& plan,
         float softmax_scale, uintptr_t stream, const std::optional<nb::ndarray<>>& workspace,
         float softcap, int window_left) {
        DecodeOptions o;
        o.softmax_scale = softmax_scale;
        o.softcap = softcap;
        o.window_left = window_left;
        o.stream = to_stream(stream);
        if (workspace) o.workspace = Workspace{workspace->data(), workspace->nbytes()};
        decode(to_view(q, "q"), to_view(k_cache, "k_cache"), to_view(v_cache, "v_cache"),
               to_view(cache_seqlens, "cache_seqlens"), to_view_opt(block_table, "block_table"),
               to_view(out, "out"), to_view(lse, "lse"), plan, o);
      },
      nb::arg("q"), nb::arg("k_cache"), nb::arg("v_cache"), nb::arg("cache_seqlens"),
      nb::arg("block_table").none(), nb::arg("out"), nb::arg("lse"), nb::arg("plan"),
      nb::arg("softmax_scale") = 0.f, nb::arg("stream") = 0,
      nb::arg("workspace").none() = nb::none(), nb::arg("softcap") = 0.f,
      nb::arg("window_left") = -1,
      "Decode attention into out [b, q_len, hq, d] and lse [b, hq, q_len] (see decode.h);\n"
      "workspace: optional GPU scratch of at least plan.workspace_bytes bytes (else a cached "
      "one);\n"
      "softcap > 0: scores become softcap * tanh(scores / softcap); window_left >= 0: a sliding\n"
      "window (a query at cache position p sees keys p - window_left .. p).");

  m.def(
      "merge_states",
      [](const nb::ndarray<>& o_parts, const nb::ndarray<>& lse_parts, const nb::ndarray<>& out,
         const std::optional<nb::ndarray<>>& lse, uintptr_t stream) {
        merge_states(to_view(o_parts, "o_parts"), to_view(lse_parts, "lse_parts"), to_view(out, "out"),
                     to_view_opt(lse, "lse"), to_stream(stream));
      },
      nb::arg("o_parts"), nb::arg("lse_parts"), nb::arg("out"), nb::arg("lse").none() = nb::none(),
      nb::arg("stream") = 0,
      "Combine (O, LSE) parts [P, ..., d] / [P, ...] into out [..., d] and lse [...].");
}

}  // namespace flashkit::py
