// attention_forward / attention_backward / attention_backward_workspace_bytes: every argument
// check, then dispatch by device to src/cpu/ or src/cuda/attention/ (launch.h). The checks end
// in one AttentionShape both backends take; nothing is written before all of them pass.
#include "flashkit/attention.h"

#include <cmath>
#include <cstdint>
#include <optional>

#include "api/attention_shape.h"
#include "api/validate.h"
#include "cpu/attention.h"
#ifdef FLASHKIT_WITH_CUDA
#include "cuda/attention/launch.h"
#endif

namespace flashkit {
namespace {

using namespace detail;

constexpr int kMaxHdim = 256;

// q/k/v-like tensor: defined, q's dtype (or `dtype` when given: fp8 inputs' bf16 out), same
// device as q, non-negative strides, contiguous last dim.
void check_operand(const TensorView& t, const char* name, const TensorView& q, int ndim,
                   std::optional<DType> dtype = std::nullopt) {
  check_defined(t, name);
  check_ndim(t, name, ndim);
  check_same_device(t, name, q, "q");
  if (dtype) check_dtype(t, name, {*dtype});
  else check_same_dtype(t, name, q, "q");
  check_nonnegative_strides(t, name);
  check_last_dim_contiguous(t, name);
}

// One cu_seqlens tensor: int32 [batch+1], contiguous, on q's device. On the CPU its values are
// read too: 0 first, non-decreasing, last <= the tokens of `tokens_name`. Returns the longest
// sequence on the CPU (0 on a GPU, where the values are not read on the host).
int check_cu_seqlens(const TensorView& cu, const char* name, const TensorView& q, int64_t batch1,
                     int64_t total, const char* tokens_name) {
  check_defined(cu, name);
  check_same_device(cu, name, q, "q");
  check_dtype(cu, name, {DType::i32});
  check_ndim(cu, name, 1);
  if (batch1 < 0) {
    if (cu.shape[0] < 2)
      fail(name, ": expected shape [batch+1] with batch >= 1, got ", cu.shape_str());
  } else {
    check_shape(cu, name, {batch1});
  }
  check_contiguous(cu, name);
  if (cu.device != Device::cpu) return 0;
  const int32_t* c = cu.ptr<int32_t>();
  if (c[0] != 0) fail(name, ": expected ", name, "[0] == 0, got ", c[0]);
  int longest = 0;
  for (int64_t b = 1; b < cu.shape[0]; ++b) {
    if (c[b] < c[b - 1])
      fail(name, ": expected non-decreasing offsets, got ", name, "[", b, "] = ", c[b], " < ", name,
           "[", b - 1, "] = ", c[b - 1]);
    longest = std::max(longest, c[b] - c[b - 1]);
  }
  int64_t last = c[cu.shape[0] - 1];
  if (last > total)
    fail(name, ": expected offsets within ", tokens_name, "'s ", total, " tokens, got ", name, "[",
         cu.shape[0] - 1, "] = ", last);
  return longest;
}

// q and k (and v when given): dtypes, devices, layouts, head counts, hdim and, for varlen,
// cu_seqlens. Returns the problem shape with the softmax scale resolved.
AttentionShape check_qkv(const TensorView& q, const TensorView& k, const TensorView* v,
                         const AttentionOptions& opts) {
  check_defined(q, "q");
  const bool varlen = opts.cu_seqlens_q.defined() || opts.cu_seqlens_k.defined();
  if (varlen && !opts.cu_seqlens_q.defined())
    fail("cu_seqlens_q: expected a tensor when cu_seqlens_k is set, got none");
  if (varlen && !opts.cu_seqlens_k.defined())
    fail("cu_seqlens_k: expected a tensor when cu_seqlens_q is set, got none");
  const int nd = varlen ? 3 : 4;
  check_dtype(q, "q", {DType::f32, DType::f16, DType::bf16, DType::e4m3});
  check_operand(q, "q", q, nd);
  check_operand(k, "k", q, nd);
  if (v) {
    check_operand(*v, "v", q, nd);
    check_same_shape(*v, "v", k, "k");
  }
  AttentionShape s;
  s.varlen = varlen;
  s.dtype = q.dtype;
  s.device = q.device;
  s.device_id = q.device_id;
  s.hdim = static_cast<int>(q.size(-1));
  if (q.size(-1) < 8 || q.size(-1) > kMaxHdim || q.size(-1) % 8 != 0)
    fail("q: expected hdim (last dim) a multiple of 8 in 8..", kMaxHdim, ", got ", q.size(-1));
  if (q.dtype == DType::e4m3 && q.size(-1) % 16 != 0)
    fail("q: expected hdim a multiple of 16 for float8_e4m3fn inputs (16-byte rows), got ",
         q.size(-1));
  if (k.size(-1) != q.size(-1)) fail("k: expected hdim ", q.size(-1), " like q, got ", k.size(-1));
  const int64_t heads = q.size(-2), kv_heads = k.size(-2);
  if (heads < 1) fail("q: expected at least 1 head, got ", heads);
  if (kv_heads < 1 || heads % kv_heads != 0)
    fail("k: expected kv_heads dividing q's ", heads, " heads, got ", kv_heads);
  s.heads = static_cast<int>(heads);
  s.kv_heads = static_cast<int>(kv_heads);
  constexpr int64_t kMaxLen = INT32_MAX;
  if (!varlen) {
    if (q.shape[0] < 1) fail("q: expected batch >= 1, got ", q.shape[0]);
    if (k.shape[0] != q.shape[0])
      fail("k: expected batch ", q.shape[0], " like q, got ", k.shape[0]);
    if (q.shape[1] > kMaxLen) fail("q: expected seqlen_q < 2^31, got ", q.shape[1]);
    if (k.shape[1] > kMaxLen) fail("k: expected seqlen_k < 2^31, got ", k.shape[1]);
    s.batch = static_cast<int>(q.shape[0]);
    s.seqlen_q = static_cast<int>(q.shape[1]);
    s.seqlen_k = static_cast<int>(k.shape[1]);
    s.total_q = q.shape[0] * q.shape[1];
    s.total_k = k.shape[0] * k.shape[1];
  } else {
    if (q.shape[0] > kMaxLen) fail("q: expected total_q < 2^31, got ", q.shape[0]);
    if (k.shape[0] > kMaxLen) fail("k: expected total_k < 2^31, got ", k.shape[0]);
    s.total_q = q.shape[0];
    s.total_k = k.shape[0];
    int lq = check_cu_seqlens(opts.cu_seqlens_q, "cu_seqlens_q", q, -1, s.total_q, "q");
    int64_t batch1 = opts.cu_seqlens_q.shape[0];
    int lk = check_cu_seqlens(opts.cu_seqlens_k, "cu_seqlens_k", q, batch1, s.total_k, "k");
    s.batch = static_cast<int>(batch1 - 1);
    if (opts.max_seqlen_q < 0) fail("max_seqlen_q: expected >= 0, got ", opts.max_seqlen_q);
    if (opts.max_seqlen_k < 0) fail("max_seqlen_k: expected >= 0, got ", opts.max_seqlen_k);
    if (q.device == Device::cpu) {
      // Given maxima must cover the real ones: a block mask is sized from them.
      if (opts.max_seqlen_q > 0 && opts.max_seqlen_q < lq)
        fail("max_seqlen_q: expected >= the longest query sequence ", lq, ", got ",
             opts.max_seqlen_q);
      if (opts.max_seqlen_k > 0 && opts.max_seqlen_k < lk)
        fail("max_seqlen_k: expected >= the longest key sequence ", lk, ", got ",
             opts.max_seqlen_k);
      s.seqlen_q = opts.max_seqlen_q > 0 ? opts.max_seqlen_q : lq;
      s.seqlen_k = opts.max_seqlen_k > 0 ? opts.max_seqlen_k : lk;
    } else {
      if (opts.max_seqlen_q <= 0)
        fail(
            "max_seqlen_q: expected > 0 for varlen on cuda (cu_seqlens are not read on the host), "
            "got ",
            opts.max_seqlen_q);
      if (opts.max_seqlen_k <= 0)
        fail(
            "max_seqlen_k: expected > 0 for varlen on cuda (cu_seqlens are not read on the host), "
            "got ",
            opts.max_seqlen_k);
      s.seqlen_q = opts.max_seqlen_q;
      s.seqlen_k = opts.max_seqlen_k;
    }
  }
  if (!std::isfinite(opts.softmax_scale))
    fail("softmax_scale: expected a finite value (0 = 1/sqrt(hdim)), got ", opts.softmax_scale);
  s.softmax_scale =
      opts.softmax_scale != 0.f ? opts.softmax_scale : 1.f / std::sqrt(static_cast<float>(s.hdim));
  return s;
}

void check_mask_like(const TensorView& t, const char* name, const TensorView& q) {
  check_same_device(t, name, q, "q");
  check_dtype(t, name, {DType::u8, DType::bool8});
  check_nonnegative_strides(t, name);
}

// Scalar options and the option tensors (ALiBi slopes, block mask, dropout mask).
void check_options(const AttentionShape& s, const TensorView& q, const AttentionOptions& o) {
  if (!(o.dropout_p >= 0.f && o.dropout_p < 1.f))
    fail("dropout_p: expected a value in [0, 1), got ", o.dropout_p);
  if (o.window_left < -1) fail("window_left: expected >= -1 (-1 = unbounded), got ", o.window_left);
  if (o.window_right < -1)
    fail("window_right: expected >= -1 (-1 = unbounded), got ", o.window_right);
  if (!(o.softcap >= 0.f && std::isfinite(o.softcap)))
    fail("softcap: expected a finite value >= 0 (0 = off), got ", o.softcap);
  if (o.alibi_slopes.defined()) {
    const TensorView& a = o.alibi_slopes;
    check_defined(a, "alibi_slopes");
    check_same_device(a, "alibi_slopes", q, "q");
    check_dtype(a, "alibi_slopes", {DType::f32});
    check_nonnegative_strides(a, "alibi_slopes");
    bool ok = (a.ndim == 1 && a.shape[0] == s.heads) ||
              (a.ndim == 2 && a.shape[0] == s.batch && a.shape[1] == s.heads);
    if (!ok)
      fail("alibi_slopes: expected shape [", s.heads, "] or [", s.batch, ", ", s.heads, "], got ",
           a.shape_str());
  }
  if (o.block_mask.defined()) {
    const TensorView& m = o.block_mask;
    if (o.block_mask_block_q < 1)
      fail("block_mask_block_q: expected >= 1, got ", o.block_mask_block_q);
    if (o.block_mask_block_k < 1)
      fail("block_mask_block_k: expected >= 1, got ", o.block_mask_block_k);
    check_defined(m, "block_mask");
    check_mask_like(m, "block_mask", q);
    check_ndim(m, "block_mask", 4);
    const int64_t nq = (s.seqlen_q + o.block_mask_block_q - 1) / o.block_mask_block_q;
    const int64_t nk = (s.seqlen_k + o.block_mask_block_k - 1) / o.block_mask_block_k;
    bool ok = (m.shape[0] == 1 || m.shape[0] == s.batch) &&
              (m.shape[1] == 1 || m.shape[1] == s.heads) && m.shape[2] == nq && m.shape[3] == nk;
    if (!ok)
      fail("block_mask: expected shape [", s.batch, " or 1, ", s.heads, " or 1, ", nq, ", ", nk,
           "] (ceil(seqlen / block size)), got ", m.shape_str());
  }
}

// The fp8 forward's descale factors: fp32 on q's device, one element (per tensor) or [batch,
// kv_heads] (per sequence and KV head, dense batches; a query head takes its KV head's); only
// with e4m3 inputs.
void check_descales(const AttentionShape& s, const TensorView& q, const AttentionOptions& o) {
  const std::pair<const TensorView*, const char*> ds[] = {
      {&o.q_descale, "q_descale"}, {&o.k_descale, "k_descale"}, {&o.v_descale, "v_descale"}};
  for (auto [t, name] : ds) {
    if (!t->defined()) continue;
    if (q.dtype != DType::e4m3)
      fail(name, ": expected none unless q is float8_e4m3fn, got one with q ", dtype_name(q.dtype));
    check_defined(*t, name);
    check_same_device(*t, name, q, "q");
    check_dtype(*t, name, {DType::f32});
    if (t->numel() == 1) continue;
    if (t->ndim != 2 || t->shape[0] != s.batch || t->shape[1] != s.kv_heads)
      fail(name, ": expected one element or shape [", s.batch, ", ", s.kv_heads,
           "] (batch, kv_heads), got shape ", t->shape_str());
    if (s.varlen)
      fail(name, ": expected one element with varlen (cu_seqlens), got shape ", t->shape_str());
  }
}

// Backward and its workspace: 16/32-bit inputs only.
void check_not_fp8(const TensorView& q, const char* op) {
  if (q.dtype == DType::e4m3)
    fail("q: expected float32, float16 or bfloat16 for ", op,
         " (float8_e4m3fn inputs have a forward only), got float8_e4m3fn");
}

void check_dropout_mask_out(const AttentionShape& s, const TensorView& q,
                            const AttentionOptions& o) {
  const TensorView& m = o.dropout_mask_out;
  if (!m.defined()) return;
  check_defined(m, "dropout_mask_out");
  if (s.varlen)
    fail("dropout_mask_out: expected none with varlen (cu_seqlens), got ", m.shape_str());
  check_mask_like(m, "dropout_mask_out", q);
  check_shape(m, "dropout_mask_out", {s.batch, s.heads, s.seqlen_q, s.seqlen_k});
}

void check_lse(const AttentionShape& s, const TensorView& lse, const TensorView& q) {
  check_defined(lse, "lse");
  check_same_device(lse, "lse", q, "q");
  check_dtype(lse, "lse", {DType::f32});
  if (s.varlen)
    check_shape(lse, "lse", {s.heads, s.total_q});
  else
    check_shape(lse, "lse", {s.batch, s.heads, s.seqlen_q});
  check_nonnegative_strides(lse, "lse");
  check_last_dim_contiguous(lse, "lse");
}

struct Named {
  const TensorView* t;
  const char* name;
};

// Each output must not share memory with any input or any other output.
void check_outputs_separate(std::initializer_list<Named> outs, std::initializer_list<Named> ins) {
  for (const Named& o : outs) {
    if (!o.t->defined()) continue;
    for (const Named& i : ins)
      if (i.t->defined()) check_no_overlap(*o.t, o.name, *i.t, i.name);
    for (const Named& o2 : outs)
      if (&o2 < &o && o2.t->defined()) check_no_overlap(*o.t, o.name, *o2.t, o2.name);
  }
}

#ifndef FLASHKIT_WITH_CUDA
[[noreturn]] void no_cuda(const char* op) {
  fail("q: expected a CPU tensor (", op, ": flashkit was built without CUDA), got a CUDA one");
}
#endif

}  // namespace

void attention_forward(const TensorView& q, const TensorView& k, const TensorView& v,
                       const TensorView& out, const TensorView& lse, const AttentionOptions& opts) {
  AttentionShape s = check_qkv(q, k, &v, opts);
  // fp8 inputs write a bf16 out
  check_operand(out, "out", q, q.ndim,
                q.dtype == DType::e4m3 ? std::optional(DType::bf16) : std::nullopt);
  check_same_shape(out, "out", q, "q");
  check_descales(s, q, opts);
  check_lse(s, lse, q);
  check_options(s, q, opts);
  check_dropout_mask_out(s, q, opts);
  const TensorView& dm = opts.dropout_mask_out;
  check_outputs_separate({{&out, "out"}, {&lse, "lse"}, {&dm, "dropout_mask_out"}},
                         {{&q, "q"},
                          {&k, "k"},
                          {&v, "v"},
                          {&opts.cu_seqlens_q, "cu_seqlens_q"},
                          {&opts.cu_seqlens_k, "cu_seqlens_k"},
                          {&opts.alibi_slopes, "alibi_slopes"},
                          {&opts.block_mask, "block_mask"}});
  if (s.device == Device::cpu) return cpu::attention_forward(s, q, k, v, out, lse, opts);
#ifdef FLASHKIT_WITH_CUDA
  cuda::attention_forward(s, q, k, v, out, lse, opts);
#else
  no_cuda("attention_forward");
#endif
}

void attention_backward(const TensorView& q, const TensorView& k, const TensorView& v,
                        const TensorView& out, const TensorView& dout, const TensorView& lse,
                        const TensorView& dq, const TensorView& dk, const TensorView& dv,
                        const AttentionOptions& opts) {
  check_not_fp8(q, "attention_backward");
  AttentionShape s = check_qkv(q, k, &v, opts);
  check_descales(s, q, opts);
  check_operand(out, "out", q, q.ndim);
  check_same_shape(out, "out", q, "q");
  check_operand(dout, "dout", q, q.ndim);
  check_same_shape(dout, "dout", q, "q");
  check_lse(s, lse, q);
  check_operand(dq, "dq", q, q.ndim);
  check_same_shape(dq, "dq", q, "q");
  check_operand(dk, "dk", q, q.ndim);
  check_same_shape(dk, "dk", k, "k");
  check_operand(dv, "dv", q, q.ndim);
  check_same_shape(dv, "dv", v, "v");
  check_options(s, q, opts);
  check_outputs_separate({{&dq, "dq"}, {&dk, "dk"}, {&dv, "dv"}},
                         {{&q, "q"},
                          {&k, "k"},
                          {&v, "v"},
                          {&out, "out"},
                          {&dout, "dout"},
                          {&lse, "lse"},
                          {&opts.cu_seqlens_q, "cu_seqlens_q"},
                          {&opts.cu_seqlens_k, "cu_seqlens_k"},
                          {&opts.alibi_slopes, "alibi_slopes"},
                          {&opts.block_mask, "block_mask"}});
  if (s.device == Device::cpu)
    return cpu::attention_backward(s, q, k, v, out, dout, lse, dq, dk, dv, opts);
#ifdef FLASHKIT_WITH_CUDA
  cuda::attention_backward(s, q, k, v, out, dout, lse, dq, dk, dv, opts);
#else
  no_cuda("attention_backward");
#endif
}

size_t attention_forward_workspace_bytes(const TensorView& q, const TensorView& k,
                                         const AttentionOptions& opts) {
  AttentionShape s = check_qkv(q, k, nullptr, opts);
  check_options(s, q, opts);
  check_descales(s, q, opts);
  if (s.device == Device::cpu) return 0;
#ifdef FLASHKIT_WITH_CUDA
  return cuda::attention_forward_workspace_bytes(s, opts);
#else
  no_cuda("attention_forward_workspace_bytes");
#endif
}

size_t attention_backward_workspace_bytes(const TensorView& q, const TensorView& k,
                                          const AttentionOptions& opts) {
  check_not_fp8(q, "attention_backward_workspace_bytes");
  AttentionShape s = check_qkv(q, k, nullptr, opts);
  check_options(s, q, opts);
  if (s.device == Device::cpu) return 0;
#ifdef FLASHKIT_WITH_CUDA
  return cuda::attention_backward_workspace_bytes(s, opts);
#else
  no_cuda("attention_backward_workspace_bytes");
#endif
}

}  // namespace flashkit
