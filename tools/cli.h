// Shared pieces of the `flashkit` command (tools/main.cpp): the context each op family's demo,
// check and bench functions get, the result rows they return, and progress/timing helpers.
#pragma once
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "flashkit/tensor.h"

namespace flashkit::cli {

enum class Size { demo, check };  // demo: the built-in default problem; check: small and quick

struct Context {
  bool gpu = false;   // run the GPU path (a GPU was found and CUDA is compiled in)
  int device = 0;
  Size size = Size::demo;
};

// One line of the correctness/timing table.
struct Row {
  std::string op;       // "attention fwd", "decode lean", "mas"...
  std::string backend;  // "cpu", "cuda"
  std::string problem;  // "b2 s1024 h8 d64 causal"
  double error = 0;     // the measured error (max abs, or mismatches for exact ops)
  double tolerance = 0; // the bound it must stay under (<=)
  double ms = 0;        // median time of the op (0 if not timed)
  std::string rate;     // "12.3 GFLOP/s", "1.1 TB/s"
  bool pass = false;
};

using Family = std::function<std::vector<Row>(const Context&)>;

// Each op family implements these in tools/<family>.cpp.
std::vector<Row> run_attention(const Context& ctx);
std::vector<Row> run_decode(const Context& ctx);
std::vector<Row> run_mas(const Context& ctx);
// `flashkit bench <op> [--key value ...]`; returns the exit code.
int bench_attention(const std::vector<std::string>& args, const Context& ctx);
int bench_decode(const std::vector<std::string>& args, const Context& ctx);
int bench_mas(const std::vector<std::string>& args, const Context& ctx);
int bench_attention_fp8(const std::vector<std::string>& args, const Context& ctx);  // GPU

// Median wall time in ms of `fn` (after one warm-up call); `sync` is run after each call
// (a device synchronise for GPU work). Prints progress dots when a run takes over a second.
double time_ms(const std::function<void()>& fn, int repeats,
               const std::function<void()>& sync = [] {});

// Writes `text` to `path` (the --json option's file) and says so; an Error naming --json when
// the file cannot be written.
void write_json(const std::string& path, const std::string& text);

// GPU only (tools/gpu_timing.cpp, CUDA builds): median ms of `call` over `repeats` runs, each
// timed with CUDA events after a 256 MiB memset that flushes L2 (and hides the host's launch
// cost); no warm-up call.
double gpu_median_ms(const std::function<void()>& call, int repeats);

// Prints "  <what>..." now and "done in X s" when the returned guard dies: progress for steps
// that may take over a second.
struct Progress {
  explicit Progress(std::string what);
  ~Progress();
  std::string what;
  std::chrono::steady_clock::time_point t0;
};

// Parse "--key value" pairs; returns the value or `def`.
std::string arg(const std::vector<std::string>& args, const std::string& key,
                const std::string& def);
long arg_int(const std::vector<std::string>& args, const std::string& key, long def);
double arg_double(const std::vector<std::string>& args, const std::string& key, double def);
// "f32"/"float32", "f16"/"float16", "bf16"/"bfloat16"; anything else is an Error naming --dtype.
DType parse_dtype(const std::string& s);

}  // namespace flashkit::cli
