// AttentionCase: one random attention problem (dense or varlen, every option) with owning host
// tensors, the fp64 reference and the low-precision naive baseline, and the DESIGN.md tolerance
// rule. Used by tests/cpp/test_attention*.cpp and the CLI (tools/attention.cpp); the GPU tests
// can run the same cases on DeviceTensor copies.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/half.h"
#include "common/host_tensor.h"
#include "cpu/reference_attention.h"
#include "flashkit/attention.h"

namespace flashkit::testing {

struct AttentionSpec {
  DType dtype = DType::f32;
  int batch = 2, seqlen_q = 33, seqlen_k = 33, heads = 2, kv_heads = 2, hdim = 64;
  std::vector<int> lens_q, lens_k;  // varlen when set (batch = their size)
  bool causal = false;
  int window_left = -1, window_right = -1;
  float softcap = 0.f;
  int alibi_dims = 0;            // 0: off, 1: [heads], 2: [batch, heads]
  int block_q = 0, block_k = 0;  // block mask with these blocks when > 0 (about 1/3 zeros)
  float dropout_p = 0.f;
  float softmax_scale = 0.f;

  // A dense problem; set the other fields afterwards.
  static AttentionSpec dense(DType dt, int b, int sq, int sk, int h, int hk, int d,
                             bool causal = false) {
    AttentionSpec s;
    s.dtype = dt;
    s.batch = b;
    s.seqlen_q = sq;
    s.seqlen_k = sk;
    s.heads = h;
    s.kv_heads = hk;
    s.hdim = d;
    s.causal = causal;
    return s;
  }

  bool varlen() const { return !lens_q.empty(); }
  std::string str() const {
    std::string s = std::string(dtype_name(dtype)) + " b" + std::to_string(batch) + " sq" +
                    std::to_string(seqlen_q) + " sk" + std::to_string(seqlen_k) + " h" +
                    std::to_string(heads) + "/" + std::to_string(kv_heads) + " d" +
                    std::to_string(hdim);
    if (varlen()) s += " varlen";
    if (causal) s += " causal";
    if (window_left >= 0 || window_right >= 0)
      s += " win(" + std::to_string(window_left) + "," + std::to_string(window_right) + ")";
    if (softcap > 0) s += " softcap";
    if (alibi_dims) s += " alibi" + std::to_string(alibi_dims);
    if (block_q) s += " blockmask";
    if (dropout_p > 0) s += " dropout";
    return s;
  }
};

struct ErrorBound {
  double error = 0, tolerance = 0;
  bool ok() const { return error <= tolerance; }
};

// max |a - ref| over elements where ref is finite; a non-finite `a` there (an unwritten poisoned
// output) or a mismatch of infinities counts as infinite error.
inline double max_abs_diff(const HostTensor& a, const HostTensor& ref) {
  double e = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double r = ref.dtype() == DType::f64 ? ref.ptr<double>()[i] : ref.get(i);
    const double x = a.dtype() == DType::f64 ? a.ptr<double>()[i] : a.get(i);
    if (std::isinf(r)) {
      if (x != r) return INFINITY;
      continue;
    }
    if (!std::isfinite(x)) return INFINITY;
    e = std::max(e, std::fabs(x - r));
  }
  return e;
}

// The DESIGN.md rule: max|out - ref| <= 2 max|naive_lowprec - ref| + abs_floor.
inline ErrorBound bound(const HostTensor& out, const HostTensor& naive, const HostTensor& ref,
                        double abs_floor = 1e-5) {
  return {max_abs_diff(out, ref), 2 * max_abs_diff(naive, ref) + abs_floor};
}

class AttentionCase {
 public:
  AttentionSpec spec;
  HostTensor q, k, v, dout, alibi, block_mask, cu_q, cu_k;
  AttentionOptions opts;
  int64_t total_q = 0, total_k = 0;

  AttentionCase(const AttentionSpec& s, uint64_t seed) : spec(s) {
    std::mt19937_64 rng(seed);
    if (s.varlen()) {
      spec.batch = static_cast<int>(s.lens_q.size());
      cu_q.reset(DType::i32, {spec.batch + 1});
      cu_k.reset(DType::i32, {spec.batch + 1});
      cu_q.ptr<int32_t>()[0] = cu_k.ptr<int32_t>()[0] = 0;
      for (int b = 0; b < spec.batch; ++b) {
        cu_q.ptr<int32_t>()[b + 1] = cu_q.ptr<int32_t>()[b] + s.lens_q[b];
        cu_k.ptr<int32_t>()[b + 1] = cu_k.ptr<int32_t>()[b] + s.lens_k[b];
      }
      total_q = cu_q.ptr<int32_t>()[spec.batch];
      total_k = cu_k.ptr<int32_t>()[spec.batch];
      spec.seqlen_q = *std::max_element(s.lens_q.begin(), s.lens_q.end());
      spec.seqlen_k = *std::max_element(s.lens_k.begin(), s.lens_k.end());
      opts.cu_seqlens_q = cu_q.view();
      opts.cu_seqlens_k = cu_k.view();
    } else {
      total_q = int64_t{s.batch} * s.seqlen_q;
      total_k = int64_t{s.batch} * s.seqlen_k;
    }
    q.reset(s.dtype, q_shape());
    k.reset(s.dtype, kv_shape());
    v.reset(s.dtype, kv_shape());
    dout.reset(s.dtype, q_shape());
    q.fill_normal(rng);
    k.fill_normal(rng);
    v.fill_normal(rng);
    dout.fill_normal(rng);
    opts.causal = s.causal;
    opts.window_left = s.window_left;
    opts.window_right = s.window_right;
    opts.softcap = s.softcap;
    opts.softmax_scale = s.softmax_scale;
    if (s.alibi_dims) {
      if (s.alibi_dims == 1)
        alibi.reset(DType::f32, {s.heads});
      else
        alibi.reset(DType::f32, {spec.batch, s.heads});
      alibi.fill_uniform(rng, 0.01f, 0.5f);
      opts.alibi_slopes = alibi.view();
    }
    if (s.block_q > 0) {
      block_mask.reset(DType::u8, {spec.batch, s.heads, (spec.seqlen_q + s.block_q - 1) / s.block_q,
                                   (spec.seqlen_k + s.block_k - 1) / s.block_k});
      std::uniform_int_distribution<int> u(0, 2);
      for (int64_t i = 0; i < block_mask.numel(); ++i) block_mask.ptr<uint8_t>()[i] = u(rng) != 0;
      opts.block_mask = block_mask.view();
      opts.block_mask_block_q = s.block_q;
      opts.block_mask_block_k = s.block_k;
    }
    if (s.dropout_p > 0) {
      opts.dropout_p = s.dropout_p;
      opts.dropout_seed = rng();
      opts.dropout_offset = rng() >> 20;
    }
  }

  std::vector<int64_t> q_shape() const {
    if (spec.varlen()) return {total_q, spec.heads, spec.hdim};
    return {spec.batch, spec.seqlen_q, spec.heads, spec.hdim};
  }
  std::vector<int64_t> kv_shape() const {
    if (spec.varlen()) return {total_k, spec.kv_heads, spec.hdim};
    return {spec.batch, spec.seqlen_k, spec.kv_heads, spec.hdim};
  }
  std::vector<int64_t> lse_shape() const {
    if (spec.varlen()) return {spec.heads, total_q};
    return {spec.batch, spec.heads, spec.seqlen_q};
  }

  // Forward reference (f64) or naive baseline (precision = the inputs' dtype).
  void reference_forward(HostTensor& out, HostTensor& lse, DType precision) const {
    DType store = precision == DType::f64 ? DType::f64 : precision;
    out.reset(store, q_shape());
    lse.reset(precision == DType::f64 ? DType::f64 : DType::f32, lse_shape());
    cpu::reference_attention_forward(q, k, v, out, lse, opts, precision);
  }
  void reference_backward(HostTensor& dq, HostTensor& dk, HostTensor& dv, DType precision) const {
    dq.reset(precision, q_shape());
    dk.reset(precision, kv_shape());
    dv.reset(precision, kv_shape());
    cpu::reference_attention_backward(q, k, v, dout, dq, dk, dv, opts, precision);
  }
};

// FP8 (e4m3) inputs for the case: q, k, v quantized (descale = amax / 448, so the values use the
// format's range) into q8 / k8 / v8, and the case's own fp32 q / k / v replaced by the dequantized
// values (e4m3 * descale), so its references see exactly the kernel's inputs. Per tensor (descales
// [1]), or with `per_head` per (batch, KV head) (descales [batch, kv_heads]; dense cases): each
// such slice first scaled by its own factor (1, 1.5 or 2), so a kernel that reads another slice's
// descale is visibly wrong.
struct Fp8Inputs {
  HostTensor q8, k8, v8;
  HostTensor q_descale, k_descale, v_descale;  // fp32 [1] or [batch, kv_heads]
};
inline Fp8Inputs quantize_e4m3(AttentionCase& c, bool per_head = false) {
  Fp8Inputs f;
  const AttentionSpec& s = c.spec;
  const int slices = per_head ? s.batch * s.kv_heads : 1;
  // x: [batch, seqlen, heads, hdim] contiguous; `group` heads per KV head.
  auto one = [&](HostTensor& x, HostTensor& x8, HostTensor& d, int heads) {
    const int group = heads / s.kv_heads;
    const int64_t row = int64_t(heads) * s.hdim, seq = x.numel() / (int64_t(s.batch) * row);
    auto slice_of = [&](int64_t i) {
      if (!per_head) return 0;
      const int64_t b = i / (seq * row), h = (i % row) / s.hdim;
      return int(b * s.kv_heads + h / group);
    };
    std::vector<float> amax(static_cast<size_t>(slices), 0.f);
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int sl = slice_of(i);
      if (per_head) x.set(i, x.get(i) * (1.f + 0.5f * float(sl % 3)));
      amax[sl] = std::max(amax[sl], std::fabs(x.get(i)));
    }
    if (per_head) d.reset(DType::f32, {s.batch, s.kv_heads});
    else d.reset(DType::f32, {1});
    for (int sl = 0; sl < slices; ++sl) d.set(sl, amax[sl] > 0.f ? amax[sl] / 448.f : 1.f);
    x8.reset(DType::e4m3, {x.view().shape, x.view().shape + x.view().ndim});
    for (int64_t i = 0; i < x.numel(); ++i) {
      const float descale = d.get(slice_of(i));
      x8.set(i, x.get(i) / descale);
      x.set(i, x8.get(i) * descale);
    }
  };
  one(c.q, f.q8, f.q_descale, s.heads);
  one(c.k, f.k8, f.k_descale, s.kv_heads);
  one(c.v, f.v8, f.v_descale, s.kv_heads);
  return f;
}

// x with its significand cut to `bits` bits after the leading one (toward zero).
inline float truncate_significand(float x, int bits) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u &= ~((1u << (23 - bits)) - 1u);
  std::memcpy(&x, &u, 4);
  return x;
}

// The fp8 forward's naive baseline (DESIGN.md: the same computation done naively in that
// precision): scores of the dequantized inputs as an FP8 tensor-core GEMM forms them — Hopper's
// fp8 MMA keeps only ~14 significant bits while it accumulates (DeepSeek-V3 report, sec. 3.3.2;
// measured on an H100: lse errors of 1-9e-4 at hdim 64-256 against 1e-5 for bf16), modelled
// conservatively as exact sums of 8 products added into an accumulator truncated to 13 bits
// after the leading one — then P = exp(s - max)
// rounded to e4m3 before P V (the row sum from the unrounded P, as the kernels do), out rounded
// to bf16, lse in fp32. Dense or varlen batches, causal or not, GQA (the fp8 kernels' reach).
inline void fp8_naive_forward(const AttentionCase& c, HostTensor& out, HostTensor& lse) {
  const AttentionSpec& s = c.spec;
  const int d = s.hdim, g = s.heads / s.kv_heads;
  const float scale = s.softmax_scale != 0.f ? s.softmax_scale : 1.f / std::sqrt(float(d));
  out.reset(DType::bf16, c.q_shape());
  lse.reset(DType::f32, c.lse_shape());
  const std::vector<float> q = c.q.to_float(), k = c.k.to_float(), v = c.v.to_float();
  const bool varlen = s.varlen();
  std::vector<float> p(static_cast<size_t>(s.seqlen_k)), o(static_cast<size_t>(d));
  for (int b = 0; b < s.batch; ++b) {
    // this sequence's lengths and first rows (dense: b * seqlen)
    const int sq = varlen ? s.lens_q[b] : s.seqlen_q, sk = varlen ? s.lens_k[b] : s.seqlen_k;
    const int64_t q0 = varlen ? c.cu_q.ptr<int32_t>()[b] : int64_t(b) * s.seqlen_q;
    const int64_t k0 = varlen ? c.cu_k.ptr<int32_t>()[b] : int64_t(b) * s.seqlen_k;
    for (int h = 0; h < s.heads; ++h)
      for (int i = 0; i < sq; ++i) {
        const float* qi = &q[((q0 + i) * s.heads + h) * d];
        auto kv_row = [&](const std::vector<float>& t, int j) {
          return &t[((k0 + j) * s.kv_heads + h / g) * d];
        };
        float mx = -INFINITY;
        for (int j = 0; j < sk; ++j) {
          const float* kj = kv_row(k, j);
          float acc = 0.f;
          for (int x0 = 0; x0 < d; x0 += 8) {
            double part = 0;
            for (int x = x0; x < std::min(d, x0 + 8); ++x) part += double(qi[x]) * kj[x];
            acc = truncate_significand(static_cast<float>(acc + part), 13);
          }
          const bool masked = s.causal && j > i + sk - sq;
          p[j] = masked ? -INFINITY : acc * scale;
          mx = std::max(mx, p[j]);
        }
        float l = 0.f;
        for (int j = 0; j < sk; ++j) {
          p[j] = mx == -INFINITY ? 0.f : std::exp(p[j] - mx);
          l += p[j];
          p[j] = e4m3_to_float(float_to_e4m3(p[j]));
        }
        std::fill(o.begin(), o.end(), 0.f);
        for (int j = 0; j < sk; ++j) {
          if (p[j] == 0.f) continue;
          const float* vj = kv_row(v, j);
          for (int x = 0; x < d; ++x) o[x] += p[j] * vj[x];
        }
        const int64_t row = ((q0 + i) * s.heads + h) * d;
        for (int x = 0; x < d; ++x) out.set(row + x, l > 0.f ? o[x] / l : 0.f);
        // lse [batch, heads, seqlen_q], varlen [heads, total_q]
        const int64_t at = varlen ? h * c.total_q + q0 + i : (int64_t(b) * s.heads + h) * sq + i;
        lse.set(at, l > 0.f ? mx + std::log(l) : -INFINITY);
      }
  }
}

}  // namespace flashkit::testing
