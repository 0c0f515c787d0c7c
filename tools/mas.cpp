// `flashkit demo/check` rows for monotonic alignment search (exact equality with the Cython
// transcription, tolerance 0 mismatching cells) and `flashkit bench mas` (timings, JSON).
// Called from tools/main.cpp through run_mas / bench_mas.
#include "flashkit/mas.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#ifdef FLASHKIT_WITH_CUDA
#include <cuda_runtime.h>

#include "device_tensor.h"
#endif
#include "cli.h"
#include "common/host_tensor.h"
#include "cpu/reference_mas.h"
#include "flashkit/errors.h"

namespace flashkit::cli {
namespace {

struct MasProblem {
  int64_t B, T, S;
  DType dtype;
  bool ties;          // integer-valued likelihoods: most comparisons are ties
  bool full_lengths;  // every item tx = T, ty = S (the Super-MAS protocol); else random lengths
};

std::string describe(const MasProblem& p) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "b%lld t%lld s%lld %s%s", static_cast<long long>(p.B),
                static_cast<long long>(p.T), static_cast<long long>(p.S), dtype_name(p.dtype),
                p.ties ? " ties" : "");
  return buf;
}

struct MasInputs {
  HostTensor value, text_lengths, mel_lengths;
};

MasInputs make_inputs(const MasProblem& p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  MasInputs in{HostTensor(p.dtype, {p.B, p.T, p.S}), HostTensor(DType::i32, {p.B}),
               HostTensor(DType::i32, {p.B})};
  if (p.ties)
    in.value.fill_int(rng, -3, 0);
  else
    in.value.fill_normal(rng, -2.f, 1.f);
  for (int64_t b = 0; b < p.B; ++b) {
    int32_t tx = static_cast<int32_t>(p.T), ty = static_cast<int32_t>(p.S);
    if (!p.full_lengths) {
      tx = std::uniform_int_distribution<int32_t>(1, tx)(rng);
      ty = std::uniform_int_distribution<int32_t>(tx, ty)(rng);
    }
    in.text_lengths.ptr<int32_t>()[b] = tx;
    in.mel_lengths.ptr<int32_t>()[b] = ty;
  }
  return in;
}

// Runs MAS on `gpu` or the CPU into `path` (int32, poisoned first); returns the median ms.
double time_mas(const MasInputs& in, HostTensor& path, bool gpu, int repeats) {
  path.poison();
  if (!gpu) {
    return time_ms(
        [&] {
          monotonic_alignment_search(in.value, in.text_lengths, in.mel_lengths, path, TensorView{});
        },
        repeats);
  }
#ifdef FLASHKIT_WITH_CUDA
  DeviceTensor v(in.value), tx(in.text_lengths), ty(in.mel_lengths), dp(path),
      status(HostTensor(DType::i32, {1}));
  dp.poison();
  MasOptions opts;
  opts.status = status.view();
  const double ms = time_ms([&] { monotonic_alignment_search(v, tx, ty, dp, TensorView{}, opts); },
                            repeats, [] { FK_CUDA_CHECK(cudaDeviceSynchronize()); });
  dp.download(path);
  HostTensor st(DType::i32, {1});
  status.download(st);
  if (st.ptr<int32_t>()[0] != -1)
    throw Error("mas: the kernel reported bad lengths for item " +
                std::to_string(st.ptr<int32_t>()[0]));
  return ms;
#else
  throw Error("mas: this flashkit was built without CUDA");
#endif
}

Row run_one(const MasProblem& p, int repeats, bool gpu) {
  MasInputs in = make_inputs(p, 42);
  HostTensor path(DType::i32, {p.B, p.T, p.S});
  Row r;
  r.op = "mas";
  r.backend = gpu ? "cuda" : "cpu";
  r.problem = describe(p);
  try {
    Progress pr("mas on the " + std::string(gpu ? "GPU" : "CPU") + ", " + r.problem);
    r.ms = time_mas(in, path, gpu, repeats);
  } catch (const Error& e) {
    std::fprintf(stderr, "  mas (%s): %s\n", r.backend.c_str(), e.what());
    r.error = INFINITY;
    r.rate = "error";
    return r;
  }
  std::vector<int32_t> ref;
  {
    Progress pr("mas: Cython-semantics oracle on " + r.problem);
    ref = ref::monotonic_alignment_search(in.value, in.text_lengths.ptr<int32_t>(),
                                          in.mel_lengths.ptr<int32_t>(), -1e9f);
  }
  int64_t bad = 0;
  for (int64_t i = 0; i < path.numel(); ++i) bad += path.ptr<int32_t>()[i] != ref[i];
  r.error = static_cast<double>(bad);
  r.tolerance = 0;
  r.pass = bad == 0;
  int64_t cells = 0;
  for (int64_t b = 0; b < p.B; ++b)
    cells += int64_t{in.text_lengths.ptr<int32_t>()[b]} * in.mel_lengths.ptr<int32_t>()[b];
  char rate[32];
  std::snprintf(rate, sizeof rate, "%.2f Gcell/s", cells / (r.ms * 1e6));
  r.rate = rate;
  return r;
}

}  // namespace

std::vector<Row> run_mas(const Context& ctx) {
  const bool gpu = ctx.gpu;
  if (ctx.size == Size::demo) return {run_one({32, 512, 2048, DType::f32, false, true}, 5, gpu)};
  return {run_one({6, 61, 200, DType::f32, false, false}, 3, gpu),
          run_one({6, 61, 200, DType::f32, true, false}, 3, gpu),
          run_one({4, 40, 130, DType::bf16, true, false}, 3, gpu),
          run_one({3, 700, 1500, DType::f16, false, false}, 3, gpu)};
}

int bench_mas(const std::vector<std::string>& args, const Context& ctx) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::puts(
        "flashkit bench mas [--batch 32] [--text 512] [--mel 2048] [--dtype f32|f16|bf16]\n"
        "                   [--output path|durations] [--repeats 10] [--json PATH]\n"
        "                   [--device cpu|cuda]\n"
        "  full lengths (tx = text, ty = mel); output path int32 [B, T, S] or durations\n"
        "  int32 [B, T]; median of repeats");
    return 0;
  }
  MasProblem p{arg_int(args, "--batch", 32),
               arg_int(args, "--text", 512),
               arg_int(args, "--mel", 2048),
               parse_dtype(arg(args, "--dtype", "f32")),
               false,
               true};
  const int repeats = static_cast<int>(arg_int(args, "--repeats", 10));
  MasInputs in = make_inputs(p, 7);
  const std::string output = arg(args, "--output", "path");
  if (output != "path" && output != "durations")
    throw Error("--output: expected path or durations, got '" + output + "'");
  HostTensor path, durations;
  if (output == "path")
    path.reset(DType::i32, {p.B, p.T, p.S});
  else
    durations.reset(DType::i32, {p.B, p.T});
  double ms = 0;
  if (ctx.gpu) {
#ifdef FLASHKIT_WITH_CUDA
    DeviceTensor v(in.value), tx(in.text_lengths), ty(in.mel_lengths), dp, dd;
    if (output == "path")
      dp.upload(path);
    else
      dd.upload(durations);
    ms = time_ms([&] { monotonic_alignment_search(v, tx, ty, dp.view(), dd.view()); }, repeats,
                 [] { FK_CUDA_CHECK(cudaDeviceSynchronize()); });
#endif
  } else {
    ms = time_ms(
        [&] {
          monotonic_alignment_search(in.value, in.text_lengths, in.mel_lengths, path, durations);
        },
        repeats);
  }
  const BuildInfo bi = build_info();
  const std::string device = ctx.gpu ? "cuda" : "cpu";
  const std::string threads = ctx.gpu ? "" : ", " + std::to_string(bi.cpu_threads) + " threads";
  std::printf("mas %s %s -> %s: %.3f ms (median of %d%s)\n", device.c_str(), describe(p).c_str(),
              output.c_str(), ms, repeats, threads.c_str());
  const std::string json = arg(args, "--json", "");
  if (!json.empty()) {
    std::ofstream f(json);
    if (!f) throw Error("--json: expected a writable file, got '" + json + "'");
    f << "{\"op\": \"mas\", \"device\": \"" << device << "\", \"threads\": " << bi.cpu_threads
      << ", \"batch\": " << p.B << ", \"text\": " << p.T << ", \"mel\": " << p.S
      << ", \"dtype\": \"" << dtype_name(p.dtype) << "\", \"output\": \"" << output
      << "\", \"repeats\": " << repeats << ", \"ms_median\": " << ms << "}\n";
  }
  return 0;
}

}  // namespace flashkit::cli
