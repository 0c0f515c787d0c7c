// `flashkit bench attention-fp8`: the FP8 (e4m3) forward against the bf16 forward of the same
// (dequantized) values on the GPU, FA2-protocol shapes (batch * seqlen = 16k, hidden 2048), each
// call timed with CUDA events (median, L2 flushed before each call; the fp8 call includes its V
// transpose), plus each head dim's error against the fp64 reference on a small problem.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "attention_case.h"
#include "common/half.h"
#include "cli.h"
#include "flashkit/attention.h"
#include "flashkit/errors.h"

#ifdef FLASHKIT_WITH_CUDA
#include <cuda_runtime.h>

#include "device_tensor.h"
#endif

namespace flashkit::cli {

#ifdef FLASHKIT_WITH_CUDA
namespace {

std::vector<int> int_list(const std::string& s) {
  std::vector<int> r;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');) r.push_back(std::stoi(x));
  return r;
}

// One small problem: the fp8 inputs and descales, and a bf16 copy of the dequantized values.
struct Fp8Problem {
  testing::AttentionCase c;
  testing::Fp8Inputs f;
  HostTensor q16, k16, v16;
  explicit Fp8Problem(const testing::AttentionSpec& s) : c(s, 7), f(testing::quantize_e4m3(c)) {
    for (auto [src, dst] : {std::pair{&c.q, &q16}, {&c.k, &k16}, {&c.v, &v16}}) {
      dst->reset(DType::bf16, {src->view().shape, src->view().shape + src->view().ndim});
      for (int64_t i = 0; i < src->numel(); ++i) dst->set(i, src->get(i));  // exact in bf16
    }
  }
};

// The timed problems' inputs: every FA2-protocol shape has batch * seqlen * heads * hdim =
// 16384 * 2048 elements, so one device buffer per operand serves them all, viewed with each shape.
// Values uniform in [-sqrt 3, sqrt 3] (variance 1), quantized with descale sqrt 3 / 448; the bf16
// copies hold the dequantized values (exact in bf16).
struct TimedInputs {
  static constexpr int64_t kElems = int64_t{16384} * 2048;
  DeviceTensor x8[3], x16[3], descale;
  DeviceTensor out;
  HostTensor lse_host{DType::f32, {int64_t{16384} * 32}};
  DeviceTensor lse{lse_host};
  TimedInputs() {
    const float d = std::sqrt(3.f) / 448.f;
    uint64_t state = 0x9e3779b97f4a7c15ull;
    for (int t = 0; t < 3; ++t) {
      HostTensor h8(DType::e4m3, {kElems}), h16(DType::bf16, {kElems});
      for (int64_t i = 0; i < kElems; ++i) {
        state ^= state << 13, state ^= state >> 7, state ^= state << 17;  // xorshift64
        const float u = float(state >> 40) * (2.f / 16777216.f) - 1.f;   // [-1, 1)
        const uint8_t code = float_to_e4m3(u * 448.f);
        h8.ptr<uint8_t>()[i] = code;
        h16.set(i, e4m3_to_float(code) * d);
      }
      x8[t].upload(h8);
      x16[t].upload(h16);
    }
    HostTensor hd(DType::f32, {1});
    hd.set(0, d);
    descale.upload(hd);
    HostTensor ho(DType::bf16, {kElems});
    out.upload(ho);
  }
  TensorView view(const DeviceTensor& t, std::initializer_list<int64_t> shape) const {
    TensorView v = t.view();
    return TensorView::of(v.data, v.dtype, shape, v.device, v.device_id);
  }
};

// Max |out - ref| of the fp8 and the bf16 forward against the fp64 reference of the dequantized
// inputs (b1 s1024 h2, causal or not), and the naive fp8 baseline's (DESIGN.md's rule: <= 2x it).
struct Errors {
  double fp8, bf16, naive;
};
Errors errors(int hdim, bool causal) {
  testing::AttentionSpec s = testing::AttentionSpec::dense(DType::f32, 1, 1024, 1024, 2, 2, hdim, causal);
  Fp8Problem p(s);
  HostTensor ref_out, ref_lse, lp_out, lp_lse;
  p.c.reference_forward(ref_out, ref_lse, DType::f64);
  testing::fp8_naive_forward(p.c, lp_out, lp_lse);
  DeviceTensor q(p.f.q8), k(p.f.k8), v(p.f.v8), qd(p.f.q_descale), kd(p.f.k_descale),
      vd(p.f.v_descale), q16(p.q16), k16(p.k16), v16(p.v16);
  HostTensor out_h(DType::bf16, p.c.q_shape()), lse_h(DType::f32, p.c.lse_shape());
  DeviceTensor out(out_h), lse(lse_h);
  AttentionOptions o = p.c.opts;
  o.q_descale = qd.view(), o.k_descale = kd.view(), o.v_descale = vd.view();
  out.poison();
  attention_forward(q, k, v, out, lse, o);
  FK_CUDA_CHECK(cudaDeviceSynchronize());
  out.download(out_h);
  Errors e;
  e.fp8 = testing::max_abs_diff(out_h, ref_out);
  e.naive = testing::max_abs_diff(lp_out, ref_out);
  out.poison();
  attention_forward(q16, k16, v16, out, lse, p.c.opts);
  FK_CUDA_CHECK(cudaDeviceSynchronize());
  out.download(out_h);
  e.bf16 = testing::max_abs_diff(out_h, ref_out);
  return e;
}

}  // namespace
#endif

int bench_attention_fp8(const std::vector<std::string>& args, const Context& ctx) {
  if (std::find(args.begin(), args.end(), "--help") != args.end()) {
    std::puts(
        "usage: flashkit bench attention-fp8 [--hdim 64,128,256] [--seqlen 2048,4096,8192,16384]\n"
        "         [--causal 0,1] [--repeats 20] [--json path]\n"
        "  the e4m3 forward (V transpose included) against the bf16 forward of the same values,\n"
        "  batch = 16384 / seqlen, heads = 2048 / hdim; TFLOP/s = 4 b h s^2 d (/2 causal) / time;\n"
        "  and each (hdim, causal)'s max |out - fp64 reference| at b1 s1024 h2 (GPU, Hopper only)");
    return 0;
  }
#ifndef FLASHKIT_WITH_CUDA
  (void)ctx;
  throw Error("bench attention-fp8: flashkit was built without CUDA");
#else
  if (!ctx.gpu) throw Error("bench attention-fp8: expected a GPU (the fp8 forward runs on sm_90)");
  const std::vector<int> hdims = int_list(arg(args, "--hdim", "64,128,256"));
  const std::vector<int> seqlens = int_list(arg(args, "--seqlen", "2048,4096,8192,16384"));
  const std::vector<int> causals = int_list(arg(args, "--causal", "0,1"));
  const int repeats = static_cast<int>(arg_int(args, "--repeats", 20));
  const std::string json = arg(args, "--json", "");
  const GpuInfo gpu = cuda_device_info(ctx.device);
  std::ostringstream js;
  js << "{\n  \"device\": \"" << gpu.name << "\",\n  \"op\": \"attention forward, e4m3 vs bf16\",\n"
     << "  \"flops\": \"4*b*h*s*s*d, /2 causal\",\n  \"results\": [";
  bool first = true;
  std::unique_ptr<TimedInputs> timed;
  {
    Progress p("random e4m3 / bf16 inputs (3 x 32 M elements)");
    timed = std::make_unique<TimedInputs>();
  }
  std::printf("%-6s %-7s %-7s %9s %9s %9s %9s %7s\n", "hdim", "causal", "seqlen", "fp8 ms",
              "fp8 TF/s", "bf16 ms", "bf16 TF/s", "ratio");
  for (int d : hdims)
    for (int causal : causals) {
      const Errors e = errors(d, causal != 0);
      std::printf("hdim %d causal %d: max|out - ref| fp8 %.3g (naive fp8 %.3g), bf16 %.3g\n", d,
                  causal, e.fp8, e.naive, e.bf16);
      for (int s : seqlens) {
        const int b = std::max(1, 16384 / s), h = 2048 / d;
        if (int64_t(b) * s * h * d != TimedInputs::kElems)
          throw Error("--seqlen: expected divisors of 16384, got " + std::to_string(s));
        const TimedInputs& in = *timed;
        const TensorView q = in.view(in.x8[0], {b, s, h, d}), k = in.view(in.x8[1], {b, s, h, d}),
                         v = in.view(in.x8[2], {b, s, h, d});
        const TensorView q16 = in.view(in.x16[0], {b, s, h, d}),
                         k16 = in.view(in.x16[1], {b, s, h, d}),
                         v16 = in.view(in.x16[2], {b, s, h, d});
        const TensorView out = in.view(in.out, {b, s, h, d}), lse = in.view(in.lse, {b, h, s});
        AttentionOptions o16;
        o16.causal = causal != 0;
        AttentionOptions o = o16;
        o.q_descale = o.k_descale = o.v_descale = in.descale.view();
        auto fp8 = [&] { attention_forward(q, k, v, out, lse, o); };
        auto bf16 = [&] { attention_forward(q16, k16, v16, out, lse, o16); };
        fp8();  // warm-up (workspace, descriptors)
        bf16();
        const double ms8 = gpu_median_ms(fp8, repeats);
        const double ms16 = gpu_median_ms(bf16, repeats);
        const double flops = 4.0 * b * h * double(s) * s * d / (causal ? 2 : 1);
        const double t8 = flops / (ms8 * 1e9), t16 = flops / (ms16 * 1e9);
        std::printf("%-6d %-7d %-7d %9.3f %9.1f %9.3f %9.1f %7.2f\n", d, causal, s, ms8, t8, ms16,
                    t16, t8 / t16);
        js << (first ? "\n" : ",\n") << "    {\"hdim\": " << d << ", \"causal\": "
           << (causal ? "true" : "false") << ", \"seqlen\": " << s << ", \"batch\": " << b
           << ", \"heads\": " << h << ", \"fp8_ms\": " << ms8 << ", \"fp8_tflops\": " << t8
           << ", \"bf16_ms\": " << ms16 << ", \"bf16_tflops\": " << t16
           << ", \"fp8_max_abs_err\": " << e.fp8 << ", \"naive_fp8_max_abs_err\": " << e.naive
           << ", \"bf16_max_abs_err\": " << e.bf16 << "}";
        first = false;
      }
    }
  js << "\n  ]\n}\n";
  if (!json.empty()) write_json(json, js.str());
  return 0;
#endif
}

}  // namespace flashkit::cli
