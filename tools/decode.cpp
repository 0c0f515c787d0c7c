// `flashkit demo/check` rows for decode (each schedule checked against the fp64 reference, with
// timings and K/V read rate) and `flashkit bench decode`. Called from tools/main.cpp.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli.h"
#include "decode_case.h"
#include "flashkit/decode.h"
#include "flashkit/errors.h"
#ifdef FLASHKIT_WITH_CUDA
#include <cuda_runtime.h>

#include "device_tensor.h"
#endif

namespace flashkit::cli {
namespace {

using testing::DecodeCase;
using testing::DecodeInputs;

std::string describe(const DecodeCase& c) {
  int max_len = 0;
  for (int l : c.lens) max_len = std::max(max_len, l);
  char buf[96];
  std::snprintf(buf, sizeof buf, "b%d ctx<=%d h%d/%d d%d q%d %s %s", c.batch, max_len, c.hq, c.hkv,
                c.d, c.q_len, dtype_name(c.dtype),
                c.page_size ? ("paged" + std::to_string(c.page_size)).c_str() : "dense");
  return buf;
}

// Bytes of K and V a decode reads (the memory-bound cost): with a sliding window, the keys the
// query tokens can see.
double kv_bytes(const DecodeCase& c, int window_left = -1) {
  double tokens = 0;
  for (int l : c.lens) tokens += window_left < 0 ? l : std::min(l, window_left + c.q_len);
  return 2.0 * tokens * c.hkv * c.d * dtype_size(c.dtype);
}

std::string rate(double bytes, double ms) {
  char buf[32];
  if (bytes / (ms * 1e-3) > 1e12) std::snprintf(buf, sizeof buf, "%.2f TB/s", bytes / (ms * 1e9));
  else std::snprintf(buf, sizeof buf, "%.1f GB/s", bytes / (ms * 1e6));
  return buf;
}

// Runs `plan` on the CPU or the GPU; returns the median ms and leaves the result in in.out/lse.
// head_major: k/v hold [batch, kv_heads, ctx, hdim]; decode sees them through a strided view.
double run_plan(const Context& ctx, DecodeInputs& in, const DecodePlan& plan, int repeats,
                bool head_major = false, const DecodeOptions& opts = {}) {
  auto logical = [&](TensorView v) {
    if (head_major) {
      std::swap(v.shape[1], v.shape[2]);
      std::swap(v.stride[1], v.stride[2]);
    }
    return v;
  };
  if (!ctx.gpu) {
    return time_ms([&] {
      decode(in.q, logical(in.k), logical(in.v), in.seqlens, in.table_view(), in.out, in.lse, plan,
             opts);
    }, repeats);
  }
#ifdef FLASHKIT_WITH_CUDA
  DeviceTensor q(in.q), k(in.k), v(in.v), sl(in.seqlens), out(in.out), lse(in.lse);
  DeviceTensor bt;
  if (in.problem.paged) bt.upload(in.table);
  out.poison();
  lse.poison();
  const TensorView kl = logical(k.view()), vl = logical(v.view());
  auto call = [&] {
    decode(q, kl, vl, sl, in.problem.paged ? bt.view() : TensorView{}, out, lse, plan, opts);
  };
  call();  // uploads the plan, warms up
  FK_CUDA_CHECK(cudaDeviceSynchronize());
  out.download(in.out);
  lse.download(in.lse);
  return gpu_median_ms(call, repeats);
#else
  throw Error("--device: cuda requested, but flashkit was built without CUDA");
#endif
}

DeviceInfo device_for(const Context& ctx, const DecodeProblem& p) {
  return decode_device_info(p, ctx.gpu ? Device::cuda : Device::cpu, ctx.device);
}

}  // namespace

std::vector<Row> run_decode(const Context& ctx) {
  DecodeCase c;
  if (ctx.size == Size::demo)  // 8k context, ragged, Llama-style GQA, paged bf16
    c = DecodeCase{.batch = 4, .q_len = 1, .hq = 32, .hkv = 8, .d = 128, .dtype = DType::bf16,
                   .page_size = 16, .lens = {8192, 5311, 2048, 7001}, .seed = 7};
  else
    c = DecodeCase{.batch = 3, .q_len = 2, .hq = 8, .hkv = 2, .d = ctx.gpu ? 64 : 40,
                   .dtype = DType::bf16, .page_size = 16, .lens = {700, 1, 1500}, .seed = 7};
  DecodeInputs in = make_decode_inputs(c);
  cpu::DecodeReference exact, naive;
  {
    Progress pr("decode: fp64 reference on " + describe(c));
    exact = cpu::reference_decode(in.q, in.k, in.v, in.seqlens, in.table_view(), 0.f);
    naive = cpu::reference_decode(in.q, in.k, in.v, in.seqlens, in.table_view(), 0.f, true);
  }
  const double tol = testing::decode_tolerance(exact, naive);
  std::vector<Row> rows;
  for (DecodeSchedule s : {DecodeSchedule::lean, DecodeSchedule::split_kv, DecodeSchedule::flash_decoding,
                           DecodeSchedule::single}) {
    DecodePlan plan = make_decode_plan(in.problem, c.lens, device_for(ctx, in.problem), s);
    in.out.poison();
    in.lse.poison();
    Row r;
    r.op = std::string("decode ") + schedule_name(s);
    r.backend = ctx.gpu ? "cuda" : "cpu";
    r.problem = describe(c);
    r.ms = run_plan(ctx, in, plan, ctx.size == Size::demo ? 5 : 2);
    r.rate = rate(kv_bytes(c), r.ms);
    r.error = std::max(testing::max_abs_err(in.out, exact.out),
                       testing::max_abs_err(in.lse, exact.lse) > 1e-3 ? INFINITY : 0.0);
    r.tolerance = tol;
    r.pass = r.error <= tol;
    rows.push_back(r);
  }
  return rows;
}

int bench_decode(const std::vector<std::string>& args, const Context& ctx) {
  for (const std::string& a : args)
    if (a == "--help" || a == "-h") {
      std::puts("flashkit bench decode [--batch 1] [--ctx 8192] [--heads 32] [--kv-heads 8]\n"
                "  [--hdim 128] [--q-len 1] [--page-size 0 (dense)] [--dtype bf16|f16|f32]\n"
                "  [--schedule auto|single|split_kv|flash_decoding|lean] [--repeats 20] [--device cpu|cuda]\n"
                "  [--head-major 1: dense cache stored [b, kv_heads, ctx, hdim], passed as a strided view]\n"
                "  [--softcap 0 (off)] [--window-left -1 (none): a sliding window of that many keys]\n"
                "prints the plan, microseconds per call and GB/s of the K/V the queries see");
      return 0;
    }
  DecodeCase c;
  c.batch = static_cast<int>(arg_int(args, "--batch", 1));
  c.hq = static_cast<int>(arg_int(args, "--heads", 32));
  c.hkv = static_cast<int>(arg_int(args, "--kv-heads", 8));
  c.d = static_cast<int>(arg_int(args, "--hdim", 128));
  c.q_len = static_cast<int>(arg_int(args, "--q-len", 1));
  c.page_size = static_cast<int>(arg_int(args, "--page-size", 0));
  std::string dt = arg(args, "--dtype", "bf16");
  c.dtype = parse_dtype(dt);
  c.lens.assign(c.batch, static_cast<int>(arg_int(args, "--ctx", 8192)));
  const int repeats = static_cast<int>(arg_int(args, "--repeats", 20));
  c.tiled_fill = true;
  bool head_major = false;
  DecodeInputs in = make_decode_inputs(c);
  if (arg_int(args, "--head-major", 0) && c.page_size == 0) {
    // The same dense cache stored [batch, kv_heads, ctx, hdim] and seen through a strided view
    // (run_plan): each head's keys contiguous in memory, the layout torch's SDPA reads.
    head_major = true;
    for (HostTensor* t : {&in.k, &in.v}) {
      const TensorView v = t->view();
      HostTensor hm(c.dtype, {v.shape[0], v.shape[2], v.shape[1], v.shape[3]});
      const size_t row = v.shape[3] * dtype_size(c.dtype);
      for (int64_t b = 0; b < v.shape[0]; ++b)
        for (int64_t s = 0; s < v.shape[1]; ++s)
          for (int64_t h = 0; h < v.shape[2]; ++h)
            std::memcpy(static_cast<uint8_t*>(hm.data()) + (((b * v.shape[2] + h) * v.shape[1] + s) * row),
                        static_cast<const uint8_t*>(t->data()) + (((b * v.shape[1] + s) * v.shape[2] + h) * row), row);
      *t = std::move(hm);
    }
  }
  DecodePlan plan = make_decode_plan(in.problem, c.lens, device_for(ctx, in.problem),
                                     parse_schedule(arg(args, "--schedule", "auto"), "--schedule"));
  DecodeOptions opts;
  opts.softcap = static_cast<float>(arg_double(args, "--softcap", 0.0));
  opts.window_left = static_cast<int>(arg_int(args, "--window-left", -1));
  const double ms = run_plan(ctx, in, plan, repeats, head_major, opts);
  std::printf("decode %s on %s: %s\n  %.1f us, %s of K/V read\n", describe(c).c_str(),
              ctx.gpu ? "cuda" : "cpu", plan.describe().c_str(), ms * 1e3,
              rate(kv_bytes(c, opts.window_left), ms).c_str());
  return 0;
}

}  // namespace flashkit::cli
