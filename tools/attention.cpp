// `flashkit demo/check` rows for exact attention (forward + backward vs the fp64 reference with
// the DESIGN.md tolerance rule, CPU and, when built with CUDA and a GPU is there, the GPU) and
// `flashkit bench attention`: the FA2 CPU path against the naive fp32 path
// (src/cpu/naive_attention) and the fp64 reference, in ms and GFLOP/s, optionally written as JSON.
#include "flashkit/attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "attention_case.h"
#include "cli.h"
#include "cpu/naive_attention.h"
#include "flashkit/errors.h"
#ifdef FLASHKIT_WITH_CUDA
#include <cuda_runtime.h>

#include "device_tensor.h"
#endif

namespace flashkit::cli {
namespace {

using testing::AttentionCase;
using testing::AttentionSpec;
using testing::ErrorBound;

const char* short_dtype(DType t) {
  return t == DType::f32 ? "f32" : t == DType::f16 ? "f16" : t == DType::bf16 ? "bf16" : "?";
}

std::string problem(const AttentionSpec& s) {
  std::ostringstream os;
  os << "b" << s.batch << " s" << s.seqlen_q;
  if (s.seqlen_k != s.seqlen_q) os << "x" << s.seqlen_k;
  os << " h" << s.heads;
  if (s.kv_heads != s.heads) os << "/" << s.kv_heads;
  os << " d" << s.hdim << " " << short_dtype(s.dtype);
  if (s.varlen()) os << " varlen";
  if (s.causal) os << " causal";
  return os.str();
}

// 4 b h sq sk d for the forward (two GEMMs), halved when causal; the backward does 2.5x that.
double attention_flops(const AttentionSpec& s, bool backward) {
  double pairs = 0;  // (query, key) pairs over all sequences
  if (s.varlen())
    for (size_t b = 0; b < s.lens_q.size(); ++b) pairs += double{1} * s.lens_q[b] * s.lens_k[b];
  else
    pairs = double{1} * s.batch * s.seqlen_q * s.seqlen_k;
  double f = 4.0 * s.heads * pairs * s.hdim;
  if (s.causal) f /= 2;
  return backward ? 2.5 * f : f;
}

std::string gflops(double flops, double ms) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f GFLOP/s", flops / (ms * 1e6));
  return b;
}

// The worst of several outputs' (error, tolerance) pairs, by error / tolerance.
ErrorBound worst(std::initializer_list<ErrorBound> es) {
  ErrorBound w = *es.begin();
  for (const ErrorBound& e : es)
    if (e.error * w.tolerance > w.error * e.tolerance) w = e;
  return w;
}

struct Outputs {
  HostTensor out, lse, dq, dk, dv;
};

// Checks one backend's outputs against the references; adds the fwd and bwd rows.
void add_rows(std::vector<Row>& rows, const AttentionCase& c, const Outputs& o, const Outputs& ref,
              const Outputs& naive, const char* backend, double fwd_ms, double bwd_ms) {
  ErrorBound f = worst(
      {testing::bound(o.out, naive.out, ref.out), testing::bound(o.lse, naive.lse, ref.lse, 1e-4)});
  rows.push_back({"attention fwd", backend, problem(c.spec), f.error, f.tolerance, fwd_ms,
                  gflops(attention_flops(c.spec, false), fwd_ms), f.ok()});
  ErrorBound b =
      worst({testing::bound(o.dq, naive.dq, ref.dq), testing::bound(o.dk, naive.dk, ref.dk),
             testing::bound(o.dv, naive.dv, ref.dv)});
  rows.push_back({"attention bwd", backend, problem(c.spec), b.error, b.tolerance, bwd_ms,
                  gflops(attention_flops(c.spec, true), bwd_ms), b.ok()});
}

Outputs fresh_outputs(const AttentionCase& c) {
  Outputs o;
  o.out.reset(c.spec.dtype, c.q_shape());
  o.lse.reset(DType::f32, c.lse_shape());
  o.dq.reset(c.spec.dtype, c.q_shape());
  o.dk.reset(c.spec.dtype, c.kv_shape());
  o.dv.reset(c.spec.dtype, c.kv_shape());
  for (HostTensor* t : {&o.out, &o.lse, &o.dq, &o.dk, &o.dv}) t->poison();
  return o;
}

void run_cpu(std::vector<Row>& rows, const AttentionCase& c, const Outputs& ref,
             const Outputs& naive, int repeats) {
  Outputs o = fresh_outputs(c);
  double fwd_ms, bwd_ms;
  {
    Progress p("attention fwd+bwd on the CPU, " + problem(c.spec));
    fwd_ms = time_ms([&] { attention_forward(c.q, c.k, c.v, o.out, o.lse, c.opts); }, repeats);
    bwd_ms = time_ms(
        [&] { attention_backward(c.q, c.k, c.v, o.out, c.dout, o.lse, o.dq, o.dk, o.dv, c.opts); },
        repeats);
  }
  add_rows(rows, c, o, ref, naive, "cpu", fwd_ms, bwd_ms);
}

#ifdef FLASHKIT_WITH_CUDA
void run_gpu(std::vector<Row>& rows, const AttentionCase& c, const Outputs& ref,
             const Outputs& naive, int repeats) {
  Outputs o = fresh_outputs(c);
  double fwd_ms = 0, bwd_ms = 0;
  try {
    Progress p("attention fwd+bwd on the GPU, " + problem(c.spec));
    DeviceTensor q(c.q), k(c.k), v(c.v), dout(c.dout), out(o.out), lse(o.lse), dq(o.dq), dk(o.dk),
        dv(o.dv), cu_q, cu_k;
    AttentionOptions opts = c.opts;
    if (c.spec.varlen()) {
      cu_q.upload(c.cu_q);
      cu_k.upload(c.cu_k);
      opts.cu_seqlens_q = cu_q.view();
      opts.cu_seqlens_k = cu_k.view();
      opts.max_seqlen_q = c.spec.seqlen_q;
      opts.max_seqlen_k = c.spec.seqlen_k;
    }
    if (opts.alibi_slopes.defined() || opts.block_mask.defined())
      throw Error("demo: option tensors are not copied to the GPU here");
    auto sync = [] { FK_CUDA_CHECK(cudaDeviceSynchronize()); };
    fwd_ms = time_ms([&] { attention_forward(q, k, v, out, lse, opts); }, repeats, sync);
    bwd_ms = time_ms([&] { attention_backward(q, k, v, out, dout, lse, dq, dk, dv, opts); },
                     repeats, sync);
    out.download(o.out);
    lse.download(o.lse);
    dq.download(o.dq);
    dk.download(o.dk);
    dv.download(o.dv);
  } catch (const Error& e) {
    std::fprintf(stderr, "  attention (cuda): %s\n", e.what());
    rows.push_back({"attention fwd+bwd", "cuda", problem(c.spec), INFINITY, 0, 0, "error", false});
    return;
  }
  add_rows(rows, c, o, ref, naive, "cuda", fwd_ms, bwd_ms);
}
#endif

Outputs references(const AttentionCase& c, DType precision) {
  Progress p(std::string("attention naive reference in ") + dtype_name(precision));
  Outputs r;
  c.reference_forward(r.out, r.lse, precision);
  c.reference_backward(r.dq, r.dk, r.dv, precision);
  return r;
}

}  // namespace

std::vector<Row> run_attention(const Context& ctx) {
  std::vector<AttentionSpec> specs;
  if (ctx.size == Size::demo) {
    specs.push_back(AttentionSpec::dense(DType::bf16, 2, 1024, 1024, 8, 8, 64, true));
  } else {
    specs.push_back(AttentionSpec::dense(DType::bf16, 2, 128, 128, 4, 2, 64, true));
    specs.push_back(AttentionSpec::dense(DType::f32, 1, 100, 130, 2, 2, 128, false));
    // fp16 for the varlen case, except in minimal builds (which keep bf16 kernels only).
    const DType varlen_dtype = build_info().kernel_set == "minimal" ? DType::bf16 : DType::f16;
    AttentionSpec v = AttentionSpec::dense(varlen_dtype, 0, 0, 0, 4, 4, 64, true);
    v.lens_q = {1, 77, 130};
    v.lens_k = {9, 77, 64};
    specs.push_back(v);
  }
  std::vector<Row> rows;
  const int repeats = ctx.size == Size::demo ? 3 : 1;
  // Builds without callable CUDA attention kernels (FLASHKIT_KERNELS=noattention or check) run
  // the CPU rows only and say so, instead of reporting the GPU rows as failures.
  const BuildInfo build = build_info();
  const bool gpu_kernels = build.cuda_attention;
  if (ctx.gpu && !gpu_kernels)
    std::fprintf(stderr, "  attention (cuda): skipped, this build has no CUDA attention kernels "
                         "(FLASHKIT_KERNELS=%s)\n", build.kernel_set.c_str());
  for (const AttentionSpec& s : specs) {
    AttentionCase c(s, 2026);
    const Outputs ref = references(c, DType::f64);
    const Outputs naive = references(c, s.dtype);
    run_cpu(rows, c, ref, naive, repeats);
#ifdef FLASHKIT_WITH_CUDA
    if (ctx.gpu && gpu_kernels && s.dtype != DType::f32)  // GPU: f16/bf16
      run_gpu(rows, c, ref, naive, repeats);
#endif
  }
  return rows;
}

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> r;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');) r.push_back(x);
  return r;
}

// /proc/loadavg's first three fields: the machine is shared, so results say how busy it was.
std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

}  // namespace

int bench_attention(const std::vector<std::string>& args, const Context&) {
  if (std::find(args.begin(), args.end(), "--help") != args.end()) {
    std::puts(
        "usage: flashkit bench attention [--batch 1] [--seqlen 2048] [--heads 8] [--hdim 64]\n"
        "         [--dtype f32,bf16] [--causal 0,1] [--repeats 5] [--naive 1] [--bwd 1] [--json "
        "PATH]\n"
        "  CPU FA2 forward (and backward) against the naive fp32 path (full score matrix) and the\n"
        "  fp64 reference; comma lists run every combination; --json writes the results.");
    return 0;
  }
  const int batch = arg_int(args, "--batch", 1), seqlen = arg_int(args, "--seqlen", 2048),
            heads = arg_int(args, "--heads", 8), hdim = arg_int(args, "--hdim", 64),
            repeats = arg_int(args, "--repeats", 5);
  const bool naive = arg_int(args, "--naive", 1) != 0, bwd = arg_int(args, "--bwd", 1) != 0;
  const std::string json = arg(args, "--json", "");
  std::ostringstream js;
  js << "{\n  \"date\": \"2026-11-21\",\n  \"device\": \"cpu\",\n  \"threads\": "
     << omp_get_max_threads() << ",\n  \"load_average_at_start\": \"" << load_average()
     << "\",\n  \"flops\": \"4*b*h*sq*sk*d, /2 causal, x2.5 bwd\",\n"
     << "  \"results\": [";
  bool first = true;
  std::printf("%-28s %-24s %10s %14s\n", "problem", "path", "ms", "rate");
  for (const std::string& dts : split(arg(args, "--dtype", "f32,bf16")))
    for (const std::string& cs : split(arg(args, "--causal", "0,1"))) {
      AttentionSpec s =
          AttentionSpec::dense(parse_dtype(dts), batch, seqlen, seqlen, heads, heads, hdim, cs == "1");
      AttentionCase c(s, 1);
      HostTensor out(s.dtype, c.q_shape()), lse(DType::f32, c.lse_shape());
      HostTensor dq(s.dtype, c.q_shape()), dk(s.dtype, c.kv_shape()), dv(s.dtype, c.kv_shape());
      struct Timing {
        std::string path;
        double ms, flops;
      };
      std::vector<Timing> t;
      t.push_back({"fa2 fwd",
                   time_ms([&] { attention_forward(c.q, c.k, c.v, out, lse, c.opts); }, repeats),
                   attention_flops(s, false)});
      if (bwd)
        t.push_back(
            {"fa2 bwd",
             time_ms(
                 [&] { attention_backward(c.q, c.k, c.v, out, c.dout, lse, dq, dk, dv, c.opts); },
                 repeats),
             attention_flops(s, true)});
      if (naive) {
        HostTensor qf(DType::f32, c.q_shape()), kf(DType::f32, c.kv_shape()),
            vf(DType::f32, c.kv_shape()), of(DType::f32, c.q_shape());
        for (int64_t i = 0; i < qf.numel(); ++i) qf.set(i, c.q.get(i));
        for (int64_t i = 0; i < kf.numel(); ++i) kf.set(i, c.k.get(i)), vf.set(i, c.v.get(i));
        t.push_back(
            {"naive fp32 fwd",
             time_ms([&] { cpu::naive_attention_forward_f32(qf, kf, vf, of, s.causal); }, repeats),
             attention_flops(s, false)});
        // Both paths must compute the same thing, or the comparison means nothing.
        const double diff = testing::max_abs_diff(of, out);
        if (!(diff < 0.05))
          throw Error("bench: the naive fp32 path differs from fa2 by " + std::to_string(diff));
        HostTensor r_out(DType::f64, c.q_shape()), r_lse(DType::f64, c.lse_shape());
        t.push_back(
            {"naive fp64 fwd (reference)",
             time_ms([&] { cpu::reference_attention_forward(c.q, c.k, c.v, r_out, r_lse, c.opts); },
                     1),
             attention_flops(s, false)});
      }
      for (const Timing& x : t) {
        std::printf("%-28s %-24s %10.2f %14s\n", problem(s).c_str(), x.path.c_str(), x.ms,
                    gflops(x.flops, x.ms).c_str());
        js << (first ? "\n" : ",\n") << "    {\"batch\": " << batch << ", \"seqlen\": " << seqlen
           << ", \"heads\": " << heads << ", \"hdim\": " << hdim << ", \"dtype\": \""
           << short_dtype(s.dtype) << "\", \"causal\": " << (s.causal ? "true" : "false")
           << ", \"path\": \"" << x.path << "\", \"ms\": " << x.ms
           << ", \"gflops\": " << x.flops / (x.ms * 1e6) << "}";
        first = false;
      }
    }
  js << "\n  ]\n}\n";
  if (!json.empty()) write_json(json, js.str());
  return 0;
}

}  // namespace flashkit::cli
