// flashkit._C.attention_forward / attention_backward: NumPy / DLPack arrays -> flashkit's exact
// attention (CPU now; CUDA arrays once the GPU kernels land). Outputs are caller-allocated; the
// friendly Python API that allocates them lives in python/flashkit/attention.py.
#include "flashkit/attention.h"
#include "flashkit/block_mask.h"
#include "flashkit/errors.h"

#include <nanobind/nanobind.h>

#include <cstdint>
#include <tuple>

#include "bindings.h"
#include "common/half.h"

namespace flashkit::py {

namespace {

using Opt = std::optional<nb::ndarray<>>;

AttentionOptions make_options(bool causal, float softmax_scale, int window_left, int window_right,
                              float softcap, const Opt& alibi_slopes, float dropout_p,
                              uint64_t dropout_seed, uint64_t dropout_offset, const Opt& block_mask,
                              int block_mask_block_q, int block_mask_block_k,
                              const Opt& cu_seqlens_q, const Opt& cu_seqlens_k, int max_seqlen_q,
                              int max_seqlen_k, bool deterministic, uintptr_t stream) {
  AttentionOptions o;
  o.causal = causal;
  o.softmax_scale = softmax_scale;
  o.window_left = window_left;
  o.window_right = window_right;
  o.softcap = softcap;
  o.alibi_slopes = to_view_opt(alibi_slopes, "alibi_slopes");
  o.dropout_p = dropout_p;
  o.dropout_seed = dropout_seed;
  o.dropout_offset = dropout_offset;
  o.block_mask = to_view_opt(block_mask, "block_mask");
  o.block_mask_block_q = block_mask_block_q;
  o.block_mask_block_k = block_mask_block_k;
  o.cu_seqlens_q = to_view_opt(cu_seqlens_q, "cu_seqlens_q");
  o.cu_seqlens_k = to_view_opt(cu_seqlens_k, "cu_seqlens_k");
  o.max_seqlen_q = max_seqlen_q;
  o.max_seqlen_k = max_seqlen_k;
  o.deterministic = deterministic;
  o.stream = reinterpret_cast<Stream>(stream);  // the caller's CUDA stream (0: legacy default)
  return o;
}

// The fp8 forward's varlen options.
AttentionOptions fp8_options(const Opt& cq, const Opt& ck, int mq, int mk) {
  AttentionOptions o;
  o.cu_seqlens_q = to_view_opt(cq, "cu_seqlens_q");
  o.cu_seqlens_k = to_view_opt(ck, "cu_seqlens_k");
  o.max_seqlen_q = mq;
  o.max_seqlen_k = mk;
  return o;
}

// An fp8 operand: float8_e4m3fn arrays as they are; with `codes`, 8-bit arrays holding e4m3
// codes (NumPy has no float8 dtype; torch passes float8_e4m3fn tensors as uint8 views, which
// every torch version exports through DLPack).
TensorView fp8_view(const nb::ndarray<>& a, const char* name, bool codes) {
  return codes ? to_view_as(a, name, DType::e4m3) : to_view(a, name);
}

}  // namespace

void bind_attention(nb::module_& m) {
  m.def(
      "attention_forward_fp8",
      [](const nb::ndarray<>& q, const nb::ndarray<>& k, const nb::ndarray<>& v,
         const nb::ndarray<>& out, const nb::ndarray<>& lse, const Opt& q_descale,
         const Opt& k_descale, const Opt& v_descale, bool causal, float scale, const Opt& cq,
         const Opt& ck, int mq, int mk, bool codes, bool out_bits, const Opt& workspace,
         uintptr_t stream) {
        AttentionOptions o = fp8_options(cq, ck, mq, mk);
        o.causal = causal;
        o.softmax_scale = scale;
        o.q_descale = to_view_opt(q_descale, "q_descale");
        o.k_descale = to_view_opt(k_descale, "k_descale");
        o.v_descale = to_view_opt(v_descale, "v_descale");
        o.stream = reinterpret_cast<Stream>(stream);
        TensorView tq = fp8_view(q, "q", codes), tk = fp8_view(k, "k", codes),
                   tv = fp8_view(v, "v", codes), tl = to_view(lse, "lse");
        // out_bits: a 16-bit array holding bfloat16 bits (NumPy has no bfloat16).
        TensorView to = out_bits ? to_view_as(out, "out", DType::bf16) : to_view(out, "out");
        if (workspace) {
          const TensorView ws = to_view(*workspace, "workspace");
          o.workspace = Workspace{ws.data, size_t(ws.numel()) * dtype_size(ws.dtype)};
        }
        nb::gil_scoped_release no_gil;
        attention_forward(tq, tk, tv, to, tl, o);
      },
      nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("out"), nb::arg("lse"), nb::kw_only(),
      nb::arg("q_descale").none() = nb::none(), nb::arg("k_descale").none() = nb::none(),
      nb::arg("v_descale").none() = nb::none(), nb::arg("causal") = false,
      nb::arg("softmax_scale") = 0.f, nb::arg("cu_seqlens_q").none() = nb::none(),
      nb::arg("cu_seqlens_k").none() = nb::none(), nb::arg("max_seqlen_q") = 0,
      nb::arg("max_seqlen_k") = 0, nb::arg("codes") = false, nb::arg("out_bits") = false,
      nb::arg("workspace").none() = nb::none(), nb::arg("stream") = 0,
      "The FP8 (e4m3) forward: out (bfloat16) = softmax(scale q k^T) v of the dequantized inputs\n"
      "(real x = x * x_descale; descales fp32 one-element arrays on q's device, None = 1) and\n"
      "the fp32 logsumexp lse (varlen with cu_seqlens_q/k, as attention_forward). codes: q/k/v\n"
      "are uint8 arrays of e4m3 codes; out_bits: out is a\n"
      "uint16 array of bfloat16 bits. workspace: uint8 scratch of\n"
      "attention_forward_fp8_workspace_bytes (else a cached buffer).");
  m.def(
      "quantize_e4m3",
      [](const nb::ndarray<const float, nb::c_contig, nb::device::cpu>& x,
         const nb::ndarray<uint8_t, nb::c_contig, nb::device::cpu>& out, float inv_descale) {
        if (x.size() != out.size())
          throw Error("out: expected " + std::to_string(x.size()) + " elements, got " +
                      std::to_string(out.size()));
        const float* src = x.data();
        uint8_t* dst = out.data();
        for (size_t i = 0; i < x.size(); ++i) dst[i] = float_to_e4m3(src[i] * inv_descale);
      },
      nb::arg("x"), nb::arg("out"), nb::arg("inv_descale"),
      "out = e4m3 codes of x * inv_descale (round to nearest even, saturating at +-448).");
  m.def(
      "dequantize_e4m3",
      [](const nb::ndarray<const uint8_t, nb::c_contig, nb::device::cpu>& codes,
         const nb::ndarray<float, nb::c_contig, nb::device::cpu>& out, float descale) {
        if (codes.size() != out.size())
          throw Error("out: expected " + std::to_string(codes.size()) + " elements, got " +
                      std::to_string(out.size()));
        for (size_t i = 0; i < codes.size(); ++i)
          out.data()[i] = e4m3_to_float(codes.data()[i]) * descale;
      },
      nb::arg("codes"), nb::arg("out"), nb::arg("descale"),
      "out = the e4m3 values of codes times descale.");
  m.def(
      "attention_forward_fp8_workspace_bytes",
      [](const nb::ndarray<>& q, const nb::ndarray<>& k, const Opt& cq, const Opt& ck, int mq,
         int mk, bool codes) {
        return attention_forward_workspace_bytes(fp8_view(q, "q", codes), fp8_view(k, "k", codes),
                                                 fp8_options(cq, ck, mq, mk));
      },
      nb::arg("q"), nb::arg("k"), nb::kw_only(), nb::arg("cu_seqlens_q").none() = nb::none(),
      nb::arg("cu_seqlens_k").none() = nb::none(), nb::arg("max_seqlen_q") = 0,
      nb::arg("max_seqlen_k") = 0, nb::arg("codes") = false,
      "Bytes of GPU scratch attention_forward_fp8 needs (V transposed; 0 on the CPU).");
  // The option keywords, shared by forward and backward (same names as AttentionOptions).
  auto options = [] {
    return std::make_tuple(nb::arg("causal") = false, nb::arg("softmax_scale") = 0.f,
                           nb::arg("window_left") = -1, nb::arg("window_right") = -1,
                           nb::arg("softcap") = 0.f, nb::arg("alibi_slopes").none() = nb::none(),
                           nb::arg("dropout_p") = 0.f, nb::arg("dropout_seed") = 0,
                           nb::arg("dropout_offset") = 0, nb::arg("block_mask").none() = nb::none(),
                           nb::arg("block_mask_block_q") = 128, nb::arg("block_mask_block_k") = 128,
                           nb::arg("cu_seqlens_q").none() = nb::none(),
                           nb::arg("cu_seqlens_k").none() = nb::none(), nb::arg("max_seqlen_q") = 0,
                           nb::arg("max_seqlen_k") = 0, nb::arg("deterministic") = false,
                           nb::arg("stream") = 0);
  };
  std::apply(
      [&](auto... opt) {
        m.def(
            "attention_forward",
            [](const nb::ndarray<>& q, const nb::ndarray<>& k, const nb::ndarray<>& v,
               const nb::ndarray<>& out, const nb::ndarray<>& lse, bool causal, float scale, int wl,
               int wr, float softcap, const Opt& alibi, float p, uint64_t seed, uint64_t offset,
               const Opt& bm, int bq, int bk, const Opt& cq, const Opt& ck, int mq, int mk,
               bool det, uintptr_t stream) {
              AttentionOptions o = make_options(causal, scale, wl, wr, softcap, alibi, p, seed,
                                                offset, bm, bq, bk, cq, ck, mq, mk, det, stream);
              TensorView tq = to_view(q, "q"), tk = to_view(k, "k"), tv = to_view(v, "v"),
                         to = to_view(out, "out"), tl = to_view(lse, "lse");
              nb::gil_scoped_release no_gil;
              attention_forward(tq, tk, tv, to, tl, o);
            },
            nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("out"), nb::arg("lse"), nb::kw_only(),
            opt...,
            "Writes out = softmax(scale q k^T + modifiers) v and the fp32 logsumexp lse\n"
            "(see include/flashkit/attention.h for layouts and options).");
        m.def(
            "attention_backward",
            [](const nb::ndarray<>& q, const nb::ndarray<>& k, const nb::ndarray<>& v,
               const nb::ndarray<>& out, const nb::ndarray<>& dout, const nb::ndarray<>& lse,
               const nb::ndarray<>& dq, const nb::ndarray<>& dk, const nb::ndarray<>& dv,
               bool causal, float scale, int wl, int wr, float softcap, const Opt& alibi, float p,
               uint64_t seed, uint64_t offset, const Opt& bm, int bq, int bk, const Opt& cq,
               const Opt& ck, int mq, int mk, bool det, uintptr_t stream) {
              AttentionOptions o = make_options(causal, scale, wl, wr, softcap, alibi, p, seed,
                                                offset, bm, bq, bk, cq, ck, mq, mk, det, stream);
              TensorView tq = to_view(q, "q"), tk = to_view(k, "k"), tv = to_view(v, "v"),
                         to = to_view(out, "out"), tg = to_view(dout, "dout"),
                         tl = to_view(lse, "lse"), tdq = to_view(dq, "dq"), tdk = to_view(dk, "dk"),
                         tdv = to_view(dv, "dv");
              nb::gil_scoped_release no_gil;
              attention_backward(tq, tk, tv, to, tg, tl, tdq, tdk, tdv, o);
            },
            nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("out"), nb::arg("dout"),
            nb::arg("lse"), nb::arg("dq"), nb::arg("dk"), nb::arg("dv"), nb::kw_only(), opt...,
            "Writes dq, dk, dv of attention_forward given dout (GQA: dk/dv summed over the "
            "group).");
      },
      options());
  m.def(
      "block_mask_local_global",
      [](const nb::ndarray<>& mask, int local, int global, bool causal) {
        block_mask_local_global(to_view(mask, "mask"), local, global, causal);
      },
      nb::arg("mask"), nb::arg("local"), nb::arg("global_"), nb::arg("causal") = false,
      "Fills a uint8 block mask in place with the local + global pattern (block_mask.h).");
  m.def(
      "block_mask_butterfly", [](const nb::ndarray<>& mask) { block_mask_butterfly(to_view(mask, "mask")); },
      nb::arg("mask"), "Fills a square uint8 block mask in place with the butterfly pattern.");
}

}  // namespace flashkit::py
