// The `flashkit` command: info, demo (the main job), check (self-test) and bench <op>.
// Each op family lives in its own tools/<family>.cpp; this file only dispatches and prints.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "cli.h"
#include "flashkit/common.h"
#include "flashkit/errors.h"

using namespace flashkit;
using namespace flashkit::cli;

namespace flashkit::cli {

double time_ms(const std::function<void()>& fn, int repeats, const std::function<void()>& sync) {
  fn();
  sync();
  std::vector<double> t;
  auto start = std::chrono::steady_clock::now();
  bool dots = false;
  for (int i = 0; i < repeats; ++i) {
    auto a = std::chrono::steady_clock::now();
    fn();
    sync();
    auto b = std::chrono::steady_clock::now();
    t.push_back(std::chrono::duration<double, std::milli>(b - a).count());
    if (std::chrono::duration<double>(b - start).count() > 1.0) {
      std::fprintf(stderr, ".");
      dots = true;
    }
  }
  if (dots) std::fprintf(stderr, "\n");
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void write_json(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  if (!f) throw Error("--json: expected a writable path, got '" + path + "'");
  f << text;
  std::printf("wrote %s\n", path.c_str());
}

Progress::Progress(std::string w) : what(std::move(w)), t0(std::chrono::steady_clock::now()) {
  std::fprintf(stderr, "  %s ...\n", what.c_str());
}
Progress::~Progress() {
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (s > 1.0) std::fprintf(stderr, "  %s done in %.1f s\n", what.c_str(), s);
}

std::string arg(const std::vector<std::string>& args, const std::string& key,
                const std::string& def) {
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == key) return args[i + 1];
  return def;
}
long arg_int(const std::vector<std::string>& args, const std::string& key, long def) {
  std::string v = arg(args, key, "");
  return v.empty() ? def : std::stol(v);
}
double arg_double(const std::vector<std::string>& args, const std::string& key, double def) {
  std::string v = arg(args, key, "");
  return v.empty() ? def : std::stod(v);
}

DType parse_dtype(const std::string& s) {
  if (s == "f32" || s == "float32") return DType::f32;
  if (s == "f16" || s == "float16") return DType::f16;
  if (s == "bf16" || s == "bfloat16") return DType::bf16;
  throw Error("--dtype: expected f32, f16 or bf16, got '" + s + "'");
}

}  // namespace flashkit::cli

static int cmd_info() {
  BuildInfo b = build_info();
  std::printf("flashkit %s\n", b.version.c_str());
  std::printf("  CUDA kernels : %s%s%s\n", b.cuda ? "compiled for " : "not compiled",
              b.cuda ? b.cuda_archs.c_str() : "", b.cuda ? (" (" + b.kernel_set + " set)").c_str() : "");
  std::printf("  CPU threads  : %d\n", b.cpu_threads);
  int n = cuda_device_count();
  std::printf("  GPUs found   : %d\n", n);
  for (int i = 0; i < n; ++i) {
    GpuInfo g = cuda_device_info(i);
    std::printf("    [%d] %s, sm_%d%d, %d SMs, %.1f GiB, L2 %.0f MiB\n", i, g.name.c_str(),
                g.cc_major, g.cc_minor, g.sm_count, g.global_mem / 1073741824.0,
                g.l2_bytes / 1048576.0);
  }
  return 0;
}

static Context make_context(Size size, const std::vector<std::string>& args) {
  Context ctx;
  ctx.size = size;
  std::string dev = arg(args, "--device", "auto");
  bool have_gpu = build_info().cuda && cuda_device_count() > 0;
  if (dev == "cpu") ctx.gpu = false;
  else if (dev == "cuda") {
    if (!have_gpu) throw Error("--device: expected a GPU for 'cuda', got none (or no CUDA build)");
    ctx.gpu = true;
  } else ctx.gpu = have_gpu;
  return ctx;
}

static int run_table(Size size, const std::vector<std::string>& args) {
  Context ctx = make_context(size, args);
  std::string only = arg(args, "--op", "all");
  std::printf("flashkit %s on %s%s\n", size == Size::demo ? "demo" : "check",
              ctx.gpu ? "GPU: " : "CPU",
              ctx.gpu ? cuda_device_info(ctx.device).name.c_str() : "");
  std::fflush(stdout);  // the header before the families' progress lines (on stderr)
  std::vector<Row> rows;
  struct { const char* name; Family fn; } families[] = {
      {"attention", run_attention}, {"decode", run_decode}, {"mas", run_mas}};
  for (auto& f : families) {
    if (only != "all" && only != f.name) continue;
    auto r = f.fn(ctx);
    rows.insert(rows.end(), r.begin(), r.end());
  }
  int failed = 0;
  std::printf("\n%-22s %-5s %-34s %10s %10s %10s %-16s %s\n", "op", "dev", "problem", "error",
              "tolerance", "ms", "rate", "check");
  for (const Row& r : rows) {
    std::printf("%-22s %-5s %-44s %10.3g %10.3g %10.3f %-16s %s\n", r.op.c_str(),
                r.backend.c_str(), r.problem.c_str(), r.error, r.tolerance, r.ms, r.rate.c_str(),
                r.pass ? "ok" : "FAIL");
    failed += !r.pass;
  }
  std::printf("\n%zu passed, %d failed\n", rows.size() - failed, failed);
  return failed ? 1 : 0;
}

static void usage() {
  std::puts(
      "usage: flashkit <command> [options]\n"
      "  info                      build, CPU threads, GPUs found\n"
      "  demo  [--device cpu|cuda] the main job: attention fwd+bwd, decode and MAS on the default\n"
      "                            problem, checked against the reference, with timings\n"
      "  check [--device cpu|cuda] self-test on small problems (exit 1 on any failure)\n"
      "  bench attention|attention-fp8|decode|mas [--key value ...]   timings; see each op's --help");
}

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
    usage();
    return args.empty() ? 2 : 0;
  }
  std::string cmd = args[0];
  std::vector<std::string> rest(args.begin() + 1, args.end());
  try {
    if (cmd == "info") return cmd_info();
    if (cmd == "demo") return run_table(Size::demo, rest);
    if (cmd == "check") return run_table(Size::check, rest);
    if (cmd == "bench") {
      if (rest.empty()) throw Error("bench: expected an op (attention, decode, mas), got none");
      std::string op = rest[0];
      std::vector<std::string> bargs(rest.begin() + 1, rest.end());
      Context ctx = make_context(Size::demo, bargs);
      if (op == "attention") return bench_attention(bargs, ctx);
      if (op == "attention-fp8") return bench_attention_fp8(bargs, ctx);
      if (op == "decode") return bench_decode(bargs, ctx);
      if (op == "mas") return bench_mas(bargs, ctx);
      throw Error("bench: expected an op (attention, attention-fp8, decode, mas), got '" + op + "'");
    }
    std::fprintf(stderr, "flashkit: unknown command '%s'\n", cmd.c_str());
    usage();
    return 2;
  } catch (const Error& e) {
    std::fprintf(stderr, "flashkit: error: %s\n", e.what());
    return 1;
  }
}
