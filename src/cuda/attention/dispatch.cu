// flashkit::cuda::attention_forward/backward (declared in launch.h): CUDA-specific checks
// (dtype, 16-byte access, options this backend lacks), AttentionShape -> AttnArguments, and the
// switch to the kernel compiled for (dtype, hdim bucket, score policy: plain, plain causal, or
// GeneralScores with the modifiers asked for: one alone, or the all-in-one policy for several),
// and the choice between the Hopper kernels (sm90/) and the sm80-class ones.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <type_traits>

#include "api/validate.h"
#include "common/philox.h"
#include "common/softmax_state.h"
#include "cuda/attention/kernels.h"
#include "cuda/attention/launch.h"
#include "cuda/attention/tile_config.h"
#include "cuda/common/check.h"
#include "cuda/common/workspace.h"

namespace flashkit::cuda {

namespace {

using attn::AttnArguments;
using detail::fail;

// Makes `id` the current device for the call's duration (the caller's device comes back after).
class DeviceGuard {
 public:
  explicit DeviceGuard(int id) {
    FK_CUDA_CHECK(cudaGetDevice(&prev_));
    if (prev_ != id) FK_CUDA_CHECK(cudaSetDevice(id));
  }
  ~DeviceGuard() { cudaSetDevice(prev_); }

 private:
  int prev_ = 0;
};

// The kernels move rows in 16-byte cp.async / vector stores.
void check_vector_access(const TensorView& t, const char* name) {
  if (reinterpret_cast<uintptr_t>(t.data) % 16 != 0)
    fail(name, ": expected a 16-byte aligned data pointer on cuda, got ", t.data);
  const int64_t per16 = 16 / int64_t(dtype_size(t.dtype));
  for (int d = 0; d + 1 < t.ndim; ++d)
    if (t.stride[d] % per16 != 0)
      fail(name, ": expected strides that are multiples of ", per16,
           " elements on cuda (16-byte rows), got ", t.stride[d], " in dim ", d);
}

void check_forward_vectors(const TensorView& q, const TensorView& k, const TensorView& v,
                           const TensorView& out) {
  for (auto [t, name] : {std::pair{&q, "q"}, {&k, "k"}, {&v, "v"}, {&out, "out"}})
    check_vector_access(*t, name);
}

// What every CUDA kernel needs of the problem's shape and scale.
void check_limits(const AttentionShape& s) {
  if (!(s.softmax_scale > 0.f))
    fail("softmax_scale: expected > 0 on cuda (the max is taken on unscaled scores), got ",
         s.softmax_scale);
  if (s.heads > 65535 || s.batch > 65535)
    fail("q: expected at most 65535 heads and batch on cuda, got ", s.heads, " and ", s.batch);
  // The main kernels' 1-D grids hold one CTA per (tile of >= 64 rows, head, batch).
  const int64_t tiles = (int64_t(s.seqlen_q > s.seqlen_k ? s.seqlen_q : s.seqlen_k) + 63) / 64;
  if (tiles * s.heads * s.batch > INT32_MAX)
    fail("q: expected at most 2^31 tiles of 64 rows x heads x batch on cuda, got ", tiles, " x ",
         s.heads, " x ", s.batch);
}

void check_supported(const AttentionShape& s, const AttentionOptions& o) {
  if (s.dtype != DType::f16 && s.dtype != DType::bf16)
    fail("q: expected f16 or bf16 on cuda, got ", dtype_name(s.dtype));
  // Whole kernel tiles (at most 128 x 128, powers of two) then lie inside one mask block.
  if (o.block_mask.defined() && o.block_mask_block_q % 128 != 0)
    fail("block_mask_block_q: expected a multiple of 128 on cuda, got ", o.block_mask_block_q);
  if (o.block_mask.defined() && o.block_mask_block_k % 128 != 0)
    fail("block_mask_block_k: expected a multiple of 128 on cuda, got ", o.block_mask_block_k);
  check_limits(s);
}

attn::Strides strides_of(const TensorView& t, bool varlen) {
  TokenStrides s = token_strides(t, varlen);
  return {s.batch, s.token, s.head};
}

AttnArguments arguments(const AttentionShape& s, const TensorView& q, const TensorView& k,
                        const TensorView& v, const TensorView& out, const TensorView& lse,
                        const AttentionOptions& o) {
  AttnArguments a;
  a.q = q.data, a.k = k.data, a.v = v.data, a.o = out.data;
  a.lse = lse.ptr<float>();
  a.q_stride = strides_of(q, s.varlen), a.k_stride = strides_of(k, s.varlen);
  a.v_stride = strides_of(v, s.varlen), a.o_stride = strides_of(out, s.varlen);
  TokenStrides ls = lse_strides(lse, s.varlen);
  a.lse_batch_stride = ls.batch, a.lse_head_stride = ls.head, a.lse_row_stride = ls.token;
  if (s.varlen) {
    a.cu_seqlens_q = o.cu_seqlens_q.ptr<const int>();
    a.cu_seqlens_k = o.cu_seqlens_k.ptr<const int>();
  }
  a.batch = s.batch, a.heads = s.heads, a.kv_heads = s.kv_heads;
  a.seqlen_q = s.seqlen_q, a.seqlen_k = s.seqlen_k;
  a.total_q = static_cast<int>(s.total_q);
  a.total_k = static_cast<int>(s.total_k);
  a.head_dim = s.hdim;
  a.softmax_scale = s.softmax_scale;
  a.causal = o.causal;
  a.window_left = o.window_left, a.window_right = o.window_right;
  a.softcap = o.softcap;
  if (o.alibi_slopes.defined()) {  // [heads] or [batch, heads] (validated)
    const TensorView& al = o.alibi_slopes;
    a.alibi_slopes = al.ptr<const float>();
    a.alibi_batch_stride = al.ndim == 2 ? al.stride[0] : 0;
    a.alibi_head_stride = al.stride[al.ndim - 1];
  }
  if (o.block_mask.defined()) {  // [b|1, h|1, nq, nk] u8 (validated)
    const TensorView& m = o.block_mask;
    a.block_mask = m.ptr<const uint8_t>();
    a.bm_batch_stride = m.shape[0] == 1 ? 0 : m.stride[0];
    a.bm_head_stride = m.shape[1] == 1 ? 0 : m.stride[1];
    a.bm_row_stride = m.stride[2], a.bm_col_stride = m.stride[3];
    a.bm_block_q = o.block_mask_block_q, a.bm_block_k = o.block_mask_block_k;
  }
  if (o.dropout_p > 0.f) {
    a.dropout_seed = o.dropout_seed, a.dropout_offset = o.dropout_offset;
    a.dropout_threshold = dropout_threshold(o.dropout_p);
    // p is quantised to threshold / 256; the scale inverts that keep probability exactly.
    a.dropout_keep_scale = float(dropout_keep_scale(a.dropout_threshold));
  }
  a.deterministic = o.deterministic;
  return a;
}

// The modifiers (kernels.h's mods:: bits) the options ask for.
unsigned score_mods(const AttentionOptions& o) {
  namespace m = attn::mods;
  return (o.softcap > 0.f ? m::kSoftcap : 0u) | (o.alibi_slopes.defined() ? m::kAlibi : 0u) |
         (o.dropout_p > 0.f ? m::kDropout : 0u) | (o.block_mask.defined() ? m::kBlockSparse : 0u);
}

[[noreturn]] [[maybe_unused]] void not_compiled(int hdim) {
  fail("q: hdim ", hdim, " kernels are not compiled into this build (FLASHKIT_KERNELS=minimal "
       "keeps hdim 33..64 and 97..128; on Hopper every hdim <= 128, and <= 256 with plain "
       "scores)");
}

[[noreturn]] [[maybe_unused]] void no_attention_kernels() {
  fail("q: this build has no callable CUDA attention kernels (FLASHKIT_KERNELS=noattention or "
       "check: decode and MAS only); build with FLASHKIT_KERNELS=minimal or all");
}

// Calls f.operator()<Element, kHeadDim = bucket, Policy>() for the compiled kernel matching the
// problem: plain (causal or not) without modifiers or window, a window-only or one-modifier policy,
// or the all-in-one policy when several modifiers are on.
template <class F>
void dispatch(const AttentionShape& s, const AttentionOptions& o, int bucket, F&& f) {
  auto by_policy = [&]<class E, int D>() {
    namespace m = attn::mods;
    using attn::GeneralScores;
    switch (score_mods(o)) {
      case 0:
        if (o.window_left >= 0 || o.window_right >= 0) return f.template operator()<E, D, GeneralScores<0>>();
        if (o.causal) return f.template operator()<E, D, attn::PlainScores<true>>();
        return f.template operator()<E, D, attn::PlainScores<false>>();
      case m::kSoftcap: return f.template operator()<E, D, GeneralScores<m::kSoftcap>>();
      case m::kAlibi: return f.template operator()<E, D, GeneralScores<m::kAlibi>>();
      case m::kDropout: return f.template operator()<E, D, GeneralScores<m::kDropout>>();
      case m::kBlockSparse: return f.template operator()<E, D, GeneralScores<m::kBlockSparse>>();
      default: return f.template operator()<E, D, GeneralScores<m::kAll>>();
    }
  };
  auto by_hdim = [&]<class E>() {
    switch (bucket) {
#ifndef FLASHKIT_KERNELS_MINIMAL
      case 32: return by_policy.template operator()<E, 32>();
      case 96: return by_policy.template operator()<E, 96>();
      case 192: return by_policy.template operator()<E, 192>();
#endif
      case 64: return by_policy.template operator()<E, 64>();
      case 128: return by_policy.template operator()<E, 128>();
      case 256: return by_policy.template operator()<E, 256>();  // minimal: the Hopper forward only
      default: not_compiled(s.hdim);
    }
  };
  if (s.dtype == DType::bf16) return by_hdim.template operator()<cutlass::bfloat16_t>();
#if !defined(FLASHKIT_KERNELS_MINIMAL) || defined(FLASHKIT_KERNELS_F16)
  return by_hdim.template operator()<cutlass::half_t>();  // minimal-f16: minimal's set in f16
#else
  fail("q: f16 kernels are not compiled into this build (FLASHKIT_KERNELS=minimal keeps bf16)");
#endif
}

// The sm80-class kernels of a build: every hdim bucket, but minimal builds keep 64 and 128 (bf16:
// by_hdim never reaches an f16 instantiation there).
template <int D>
#ifdef FLASHKIT_KERNELS_MINIMAL
constexpr bool kSm80Built = D == 64 || D == 128;
#else
constexpr bool kSm80Built = true;
#endif

// What the Hopper kernels are compiled for, both passes alike (scripts/gen_instantiations.py):
// hdim 64 and 128 with every policy, but minimal builds leave out the all-modifier one
// (combinations of modifiers); hdim 256 with plain scores (causal or not), window, ALiBi, and
// softcap alone for bf16 (the forward's bounded softmax only: sm90_unsupported sends it softcaps
// <= 55.4; the backward's column kernel hands warpgroup 1 P^T (1 - t^2), its dQ pass P (1 - t^2)).
template <class P>
constexpr bool kPlain = false;
template <bool kCausal>
constexpr bool kPlain<attn::PlainScores<kCausal>> = true;
template <class E, class P>
constexpr bool kSm90Built256 = kPlain<P> || std::is_same_v<P, attn::GeneralScores<0>> ||
                               std::is_same_v<P, attn::GeneralScores<attn::mods::kAlibi>> ||
                               (std::is_same_v<P, attn::GeneralScores<attn::mods::kSoftcap>> &&
                                std::is_same_v<E, cutlass::bfloat16_t>);
template <class E, int D, class P>
#ifdef FLASHKIT_KERNELS_MINIMAL
constexpr bool kSm90Built = D == 256
                                ? kSm90Built256<E, P>
                                : (D == 64 || D == 128) &&
                                      !std::is_same_v<P, attn::GeneralScores<attn::mods::kAll>>;
#else
constexpr bool kSm90Built = D == 256 ? kSm90Built256<E, P> : D == 64 || D == 128;
#endif

// The Hopper kernels come in three head-dim buckets: 64, 128 and 256. Head dims of the sm80
// path's 32, 96 and 192 buckets run in the next one up, their tail zero-filled by TMA (the extra
// FLOPs cost less than the sm80 kernel's lower speed: bench/NOTES-attention.md).
int sm90_bucket(int hdim) { return hdim <= 64 ? 64 : hdim <= 128 ? 128 : 256; }

// Why no sm90 kernel can run on this device with this build (null when one can).
const char* no_sm90(int device_id) {
  constexpr std::string_view archs = FLASHKIT_CUDA_ARCHS;
  if (archs.find("90a") == std::string_view::npos) return "this build has no sm_90a code";
  int major = 0, minor = 0;
  FK_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device_id));
  FK_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device_id));
  if (major != 9 || minor != 0) return "the device is not sm_90";
  return nullptr;
}

// FLASHKIT_ATTENTION_PATH, "auto" when unset or empty.
std::string_view path_env() {
  const char* env = std::getenv("FLASHKIT_ATTENTION_PATH");
  return env && *env ? env : "auto";
}

// Why the Hopper kernels cannot run this pass of this problem, or null when they can: sm_90a code
// in the build, an sm_90 device, hdim <= 128, or <= 256 with plain scores, window, ALiBi or bf16
// softcap (the forward: softcap <= 55.4). Both passes take every compiled score policy (minimal
// builds: not combinations of modifiers), dense or varlen batches.
const char* sm90_unsupported(const AttentionShape& s, const AttentionOptions& o, bool backward) {
  if (const char* why = no_sm90(s.device_id)) return why;
  const int b = sm90_bucket(s.hdim);
  const unsigned m = score_mods(o);
  // kSm90Built256's policies: plain scores, window and ALiBi, and softcap alone for bf16. Its
  // forward there is the bounded softmax alone (a softcap the bound covers: sm90/fwd_mainloop.h
  // kBoundedOnly); the backward recomputes P from the LSE and takes any softcap.
  if (b == 256 && (m & ~attn::mods::kAlibi) != 0) {
    const bool softcap_bf16 = m == attn::mods::kSoftcap && s.dtype == DType::bf16;
    if (backward && !softcap_bf16)
      return "head dims above 128 have an sm90 backward for plain scores, window, ALiBi and bf16 "
             "softcap only";
    if (!backward && !(softcap_bf16 && softcap_max_floor_log2(o.softcap) != INFINITY))
      return "head dims above 128 have an sm90 forward for plain scores, window, ALiBi and bf16 "
             "softcap <= 55.4 only";
  }
#ifdef FLASHKIT_KERNELS_MINIMAL
  if (m & (m - 1)) return "combinations of score modifiers have no sm90 kernel in a minimal build";
#endif
  return nullptr;
}

// The kernel family of a pass. FLASHKIT_ATTENTION_PATH=sm80 forces the sm80-class kernels for
// forward and backward (so tests cover both on Hopper); =sm90 demands the Hopper forward and fails
// where it cannot run, and takes the Hopper backward wherever it exists; unset or auto takes sm90
// wherever it can.
bool use_sm90(const AttentionShape& s, const AttentionOptions& o, bool backward) {
  const std::string_view want = path_env();
  if (want == "sm80") return false;
  if (want != "auto" && want != "sm90")
    fail("FLASHKIT_ATTENTION_PATH: expected auto, sm80 or sm90, got '", want, "'");
  const char* why = sm90_unsupported(s, o, backward);
  if (why && want == "sm90" && !backward) fail("FLASHKIT_ATTENTION_PATH: sm90 was asked for, but ", why);
  return why == nullptr;
}

// The fp8 (e4m3) forward: the Hopper kernel with plain or causal scores on a dense or varlen
// batch (the variants and other devices have none: an Error naming the option). V^T goes into
// the workspace (attention_forward_workspace_bytes), written by the launcher's transpose kernel.
void check_fp8_supported(const AttentionShape& s, const AttentionOptions& o) {
  const char* not_fp8 = " with float8_e4m3fn inputs on cuda (plain or causal scores)";
  if (o.window_left >= 0 || o.window_right >= 0)
    fail("window_left: a sliding window is not supported", not_fp8);
  if (o.softcap > 0.f) fail("softcap: not supported", not_fp8);
  if (o.alibi_slopes.defined()) fail("alibi_slopes: not supported", not_fp8);
  if (o.dropout_p > 0.f) fail("dropout_p: dropout is not supported", not_fp8);
  if (o.block_mask.defined()) fail("block_mask: not supported", not_fp8);
  if (s.seqlen_k < 1 && s.seqlen_q > 0) fail("k: expected seqlen_k >= 1", not_fp8);
  check_limits(s);
  if (path_env() == "sm80")
    fail("FLASHKIT_ATTENTION_PATH: sm80 was asked for, but float8_e4m3fn inputs run on the sm90 "
         "kernel only");
  if (const char* why = no_sm90(s.device_id))
    fail("q: float8_e4m3fn attention on cuda needs an sm_90 (Hopper) device and a build with "
         "sm_90a code, but ", why);
}

// Nothing to compute: no query rows or no heads (outputs are empty).
bool empty(const AttentionShape& s) { return s.batch == 0 || s.heads == 0 || s.total_q == 0 || s.seqlen_q == 0; }

}  // namespace

size_t attention_forward_workspace_bytes(const AttentionShape& s, const AttentionOptions&) {
  if (s.dtype != DType::e4m3) return 0;
  return size_t(attn::fp8_vt_bytes(s.varlen, s.batch, s.kv_heads, s.hdim, s.seqlen_k, s.total_k));
}

namespace {

// The fp8 forward of a checked, non-empty problem (a: its arguments so far).
void fp8_forward(const AttentionShape& s, AttnArguments& a, const AttentionOptions& opts,
                 cudaStream_t stream) {
  // One element (strides 0) or [batch, kv_heads]; unset: null, 1.
  auto descale = [](const TensorView& t) {
    attn::Descale d;
    d.p = t.ptr<const float>();
    if (t.defined() && t.ndim == 2) d.batch_stride = t.stride[0], d.head_stride = t.stride[1];
    return d;
  };
  a.q_descale = descale(opts.q_descale);
  a.k_descale = descale(opts.k_descale);
  a.v_descale = descale(opts.v_descale);
  a.vt = workspace(opts.workspace, attention_forward_workspace_bytes(s, opts), opts.stream,
                   "attention_forward");
#ifdef FLASHKIT_NO_ATTENTION_KERNELS
  (void)a, (void)stream;
  no_attention_kernels();
#else
  using E4m3 = cutlass::float_e4m3_t;
  auto run = [&]<int D>() {
    if (opts.causal) attn::run_fwd_sm90<E4m3, D, attn::PlainScores<true>>(a, stream);
    else attn::run_fwd_sm90<E4m3, D, attn::PlainScores<false>>(a, stream);
  };
  switch (sm90_bucket(s.hdim)) {
    case 64: return run.template operator()<64>();
    case 128: return run.template operator()<128>();
    default: return run.template operator()<256>();
  }
#endif
}

#ifndef FLASHKIT_NO_ATTENTION_KERNELS
// One pass (the backward if kBackward) of a checked problem on the kernel compiled for its dtype,
// head-dim bucket and score policy: the Hopper one where `sm90` (use_sm90) and it is built, else
// the sm80-class one.
template <bool kBackward>
void run_pass(const AttentionShape& s, const AttentionOptions& opts, bool sm90,
              const AttnArguments& a, cudaStream_t stream) {
  dispatch(s, opts, sm90 ? sm90_bucket(s.hdim) : attn::hdim_bucket(s.hdim),
           [&]<class E, int D, class P>() {
             if constexpr (kSm90Built<E, D, P>) {
               if (sm90) {
                 if constexpr (kBackward)
                   attn::run_bwd_sm90<E, D, P>(a, stream);
                 else
                   attn::run_fwd_sm90<E, D, P>(a, stream);
                 return;
               }
             }
             if constexpr (!kSm80Built<D>)
               not_compiled(s.hdim);
             else if constexpr (kBackward)
               attn::run_bwd_sm80<E, D, P>(a, stream);
             else
               attn::run_fwd_sm80<E, D, P>(a, stream);
           });
}
#endif

}  // namespace

void attention_forward(const AttentionShape& s, const TensorView& q, const TensorView& k,
                       const TensorView& v, const TensorView& out, const TensorView& lse,
                       const AttentionOptions& opts) {
  const bool fp8 = s.dtype == DType::e4m3;
  if (fp8) check_fp8_supported(s, opts);
  else check_supported(s, opts);
  check_forward_vectors(q, k, v, out);
  if (empty(s)) return;
  DeviceGuard guard(s.device_id);
  AttnArguments a = arguments(s, q, k, v, out, lse, opts);
  auto stream = reinterpret_cast<cudaStream_t>(opts.stream);
  if (fp8) return fp8_forward(s, a, opts, stream);
  const bool sm90 = use_sm90(s, opts, false);
#ifdef FLASHKIT_NO_ATTENTION_KERNELS
  (void)sm90;
  no_attention_kernels();
#else
  run_pass<false>(s, opts, sm90, a, stream);
#endif
  if (opts.dropout_mask_out.defined()) {
    const TensorView& m = opts.dropout_mask_out;  // dense [b, h, sq, sk] (validated)
    attn::write_dropout_mask(a, m.ptr<uint8_t>(), {m.stride[0], m.stride[1], m.stride[2], m.stride[3]},
                             stream);
  }
}

// Sized for the larger of the two buckets the backward may run in (sm80's or the Hopper one's, which
// is never smaller), so the size does not depend on the device or on FLASHKIT_ATTENTION_PATH.
size_t attention_backward_workspace_bytes(const AttentionShape& s, const AttentionOptions&) {
  const int b = sm90_bucket(s.hdim);
  return attn::bwd_workspace_layout(s.batch, s.heads, s.total_q, s.seqlen_q, b).bytes;
}

void attention_backward(const AttentionShape& s, const TensorView& q, const TensorView& k,
                        const TensorView& v, const TensorView& out, const TensorView& dout,
                        const TensorView& lse, const TensorView& dq, const TensorView& dk,
                        const TensorView& dv, const AttentionOptions& opts) {
  check_supported(s, opts);
  const std::pair<const TensorView*, const char*> vecs[] = {
      {&q, "q"}, {&k, "k"}, {&v, "v"}, {&out, "out"}, {&dout, "dout"},
      {&dq, "dq"}, {&dk, "dk"}, {&dv, "dv"}};
  for (auto [t, name] : vecs) check_vector_access(*t, name);
  if (empty(s)) return;
  DeviceGuard guard(s.device_id);
  AttnArguments a = arguments(s, q, k, v, out, lse, opts);
  a.dout = dout.data, a.dq = dq.data, a.dk = dk.data, a.dv = dv.data;
  a.do_stride = strides_of(dout, s.varlen), a.dq_stride = strides_of(dq, s.varlen);
  a.dk_stride = strides_of(dk, s.varlen), a.dv_stride = strides_of(dv, s.varlen);
  a.workspace = workspace(opts.workspace, attention_backward_workspace_bytes(s, opts), opts.stream,
                          "attention_backward");
  const bool sm90 = use_sm90(s, opts, true);
#ifdef FLASHKIT_NO_ATTENTION_KERNELS
  (void)sm90;
  no_attention_kernels();
#else
  auto stream = reinterpret_cast<cudaStream_t>(opts.stream);
  run_pass<true>(s, opts, sm90, a, stream);
#endif
}

}  // namespace flashkit::cuda
