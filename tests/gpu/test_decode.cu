// GPU decode (src/cuda/decode/) for every schedule against the fp64 CPU reference on fresh random
// inputs, outputs poisoned first: dense/paged/ragged/GQA/MQA/q_len > 1, fp16/bf16, hdim 64/128/256,
// growing scores (the conditional rescale), NaN in every cache row past the lengths;
// results independent of the CTA count (Lean, split-KV, FlashDecoding); repeated runs and
// CUDA-graph replays (Lean's epoch-reset flags, split-KV's self-resetting arrival counters,
// FlashDecoding's two launches); the cp.async loader; decode while another
// kernel holds part of the GPU; merge_states; GPU-only errors; softcap and sliding windows (with
// the tokens below the window's first chunk NaN: never read).
// Tests named *Small* also run under compute-sanitizer (tests/gpu/run).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>
#include <vector>

#include "decode_case.h"
#include "device_tensor.h"
#include "flashkit/decode.h"
#include "flashkit/errors.h"
#include "scoped_env.h"

using namespace flashkit;
using namespace flashkit::testing;

namespace {

struct GpuInputs {
  DecodeInputs host;
  DeviceTensor q, k, v, seqlens, table, out, lse;
  DecodeOptions opts;  // softcap and window_left of every run (and of the reference)
  explicit GpuInputs(const DecodeCase& c, const DecodeOptions& o = {})
      : host(make_decode_inputs(c)), opts(o) {
    poison_below_window(host, c, o.window_left);
    q.upload(host.q);
    k.upload(host.k);
    v.upload(host.v);
    seqlens.upload(host.seqlens);
    if (host.problem.paged) table.upload(host.table);
    out.upload(host.out);
    lse.upload(host.lse);
  }
  TensorView table_view() const { return host.problem.paged ? table.view() : TensorView{}; }
  void run(const DecodePlan& plan, Stream stream = nullptr) {
    DecodeOptions o = opts;
    o.stream = stream;
    decode(q, k, v, seqlens, table_view(), out, lse, plan, o);
  }
  void fetch() {
    FK_CUDA_CHECK(cudaDeviceSynchronize());
    out.download(host.out);
    lse.download(host.lse);
  }
};

// Runs `plan` on poisoned outputs and checks against the reference; returns the output.
HostTensor check(GpuInputs& in, const DecodePlan& plan, const std::string& what) {
  in.out.poison();
  in.lse.poison();
  in.run(plan);
  in.fetch();
  auto exact =
      cpu::reference_decode(in.host.q, in.host.k, in.host.v, in.host.seqlens, in.host.table_view(),
                            0.f, false, in.opts.softcap, in.opts.window_left);
  auto naive =
      cpu::reference_decode(in.host.q, in.host.k, in.host.v, in.host.seqlens, in.host.table_view(),
                            0.f, true, in.opts.softcap, in.opts.window_left);
  EXPECT_LE(max_abs_err(in.host.out, exact.out), decode_tolerance(exact, naive)) << what << " " << plan.describe();
  EXPECT_LE(max_abs_err(in.host.lse, exact.lse), 2e-3) << what << " " << plan.describe();
  return in.host.out;
}

const DecodeSchedule kAll[] = {DecodeSchedule::single, DecodeSchedule::split_kv,
                               DecodeSchedule::flash_decoding, DecodeSchedule::lean};

void sweep(const DecodeCase& c, const std::string& what, const DecodeOptions& opts = {}) {
  GpuInputs in(c, opts);
  DeviceInfo dev = decode_device_info(in.host.problem, Device::cuda);
  for (DecodeSchedule s : kAll) check(in, make_decode_plan(in.host.problem, c.lens, dev, s), what);
}

}  // namespace

TEST(DecodeGpu, DenseRaggedGqaEveryDtypeAndHdim) {
  for (DType dt : {DType::bf16, DType::f16})
    for (int d : {64, 128, 256})
      sweep(DecodeCase{.batch = 5, .q_len = 1, .hq = 16, .hkv = 4, .d = d, .dtype = dt,
                       .lens = {1, 4000, 257, 9000, 64}, .seed = static_cast<uint64_t>(d)},
            std::string(dtype_name(dt)) + " d" + std::to_string(d));
}

TEST(DecodeGpu, PagedPageSizes) {
  for (int d : {64, 128})  // hdim 64: 64-token stages of two or more page boxes, or one
    for (int ps : {1, 16, 64, 256})
      sweep(DecodeCase{.batch = 3, .q_len = 1, .hq = 8, .hkv = 8, .d = d, .dtype = DType::bf16,
                       .page_size = ps, .lens = {3000, 17, 1200},
                       .seed = static_cast<uint64_t>(ps + d)},
            "d" + std::to_string(d) + " page " + std::to_string(ps));
}

// The cp.async loader (the one sm80-class GPUs run; FLASHKIT_DECODE_TMA=0 selects it on Hopper):
// dense ragged GQA at every hdim, and paged.
TEST(DecodeGpu, CpAsyncLoader) {
  const ScopedEnv cp_async("FLASHKIT_DECODE_TMA", "0");
  for (int d : {64, 128, 256})
    sweep(DecodeCase{.batch = 3, .q_len = 1, .hq = 16, .hkv = 4, .d = d, .dtype = DType::bf16,
                     .lens = {2500, 1, 700}, .seed = static_cast<uint64_t>(40 + d)},
          "cp.async d" + std::to_string(d));
  sweep(DecodeCase{.batch = 2, .q_len = 3, .hq = 8, .hkv = 2, .d = 64, .dtype = DType::f16,
                   .page_size = 16, .lens = {1500, 90}, .seed = 47},
        "cp.async paged");
  // The loader's three paged paths: one lookup a chunk (pages of 64k tokens), a shift (powers of
  // two below 64) and a division (other sizes) a copy.
  for (int d : {64, 128, 256})
    for (int ps : {1, 24, 64, 100, 192})
      sweep(DecodeCase{.batch = 3, .q_len = 2, .hq = 8, .hkv = 4, .d = d, .dtype = DType::bf16,
                       .page_size = ps, .lens = {2100, 17, 1200},
                       .seed = static_cast<uint64_t>(50 + ps + d)},
            "cp.async d" + std::to_string(d) + " page " + std::to_string(ps));
}

// Softcap and sliding windows, alone and together, on both loaders, dense and paged (a page per
// chunk, chunks of several pages), q_len 1, 2 and 5, every hdim; windows from 0 to past every
// cache.
TEST(DecodeGpu, SoftcapAndSlidingWindow) {
  struct Mode {
    float softcap;
    int window;
  };
  for (const char* tma : {"1", "0"}) {
    const ScopedEnv loader("FLASHKIT_DECODE_TMA", tma);
    for (Mode m : {Mode{1.5f, -1}, Mode{0.f, 0}, Mode{0.f, 100}, Mode{2.f, 1000}, Mode{0.f, 20000}})
      for (int d : {64, 128, 256})
        for (auto [ps, q_len] : {std::pair{0, 1}, {16, 5}, {64, 2}}) {
          DecodeOptions o;
          o.softcap = m.softcap;
          o.window_left = m.window;
          sweep(DecodeCase{.batch = 4,
                           .q_len = q_len,
                           .hq = 8,
                           .hkv = 2,
                           .d = d,
                           .dtype = DType::bf16,
                           .page_size = ps,
                           .lens = {3, 2100, 700, 4500},
                           .seed = static_cast<uint64_t>(d + ps + q_len)},
                std::string("tma ") + tma + " softcap " + std::to_string(m.softcap) + " window " +
                    std::to_string(m.window) + " d" + std::to_string(d) + " page " +
                    std::to_string(ps) + " q_len " + std::to_string(q_len),
                o);
        }
  }
}

// The same modifiers on fp16 caches (their kernels are separate instantiations): softcap alone
// and with a window, both loaders, every hdim, paged with q_len 5.
TEST(DecodeGpu, SoftcapAndSlidingWindowFp16) {
  for (const char* tma : {"1", "0"}) {
    const ScopedEnv loader("FLASHKIT_DECODE_TMA", tma);
    for (auto [softcap, window] : {std::pair{1.5f, -1}, {2.f, 1000}})
      for (int d : {64, 128, 256}) {
        DecodeOptions o;
        o.softcap = softcap;
        o.window_left = window;
        sweep(DecodeCase{.batch = 4,
                         .q_len = 5,
                         .hq = 8,
                         .hkv = 2,
                         .d = d,
                         .dtype = DType::f16,
                         .page_size = 16,
                         .lens = {3, 2100, 700, 4500},
                         .seed = static_cast<uint64_t>(70 + d)},
              std::string("fp16 tma ") + tma + " softcap " + std::to_string(softcap) + " window " +
                  std::to_string(window) + " d" + std::to_string(d),
              o);
      }
  }
}

TEST(DecodeGpu, QueryTokensAndMqa) {
  for (int q_len : {2, 5, 16})
    // MQA 8:1 with 16 tokens -> 128 rows, 8 row blocks; the length-3 sequence leaves early tokens
    // without visible keys.
    sweep(DecodeCase{.batch = 3, .q_len = q_len, .hq = 8, .hkv = 1, .d = 64, .dtype = DType::bf16,
                     .page_size = 16, .lens = {3, 2000, 700}, .seed = static_cast<uint64_t>(q_len)},
          "q_len " + std::to_string(q_len));
}

// Lean over 1 to 264 CTAs, split-KV (merge in the kernel) and FlashDecoding (merge_states after
// it) over 1 to 109 splits per tile; the last split plans have more CTAs than the GPU holds at
// once: nobody waits, so they still run.
TEST(DecodeGpu, ResultIndependentOfCtaCount) {
  DecodeCase c{.batch = 2, .q_len = 1, .hq = 8, .hkv = 2, .d = 128, .dtype = DType::bf16,
               .page_size = 16, .lens = {20000, 3000}, .seed = 3};
  GpuInputs in(c);
  HostTensor base = check(in, make_decode_plan(in.host.problem, c.lens, {132, 1}, DecodeSchedule::single), "single");
  auto compare = [&](const DecodePlan& plan) {
    HostTensor o = check(in, plan, schedule_name(plan.schedule));
    double diff = 0;
    for (int64_t i = 0; i < o.numel(); ++i) diff = std::max(diff, double(std::fabs(o.get(i) - base.get(i))));
    EXPECT_LE(diff, 1.6e-2) << plan.describe();  // a bf16 ulp at |x| < 2 after fp32 reassociation
  };
  for (DeviceInfo dev : {DeviceInfo{1, 1}, DeviceInfo{7, 1}, DeviceInfo{33, 2}, DeviceInfo{132, 2}})
    compare(make_decode_plan(in.host.problem, c.lens, dev, DecodeSchedule::lean));
  std::set<int> splits;
  for (DeviceInfo dev : {DeviceInfo{1, 1}, DeviceInfo{7, 1}, DeviceInfo{33, 2}, DeviceInfo{132, 2},
                         DeviceInfo{4000, 2}}) {
    DecodePlan plan = make_decode_plan(in.host.problem, c.lens, dev, DecodeSchedule::split_kv);
    splits.insert(plan.num_splits);
    compare(plan);
    DecodePlan fd = make_decode_plan(in.host.problem, c.lens, dev, DecodeSchedule::flash_decoding);
    EXPECT_EQ(fd.num_splits, plan.num_splits);  // the same splits, only the merge differs
    compare(fd);
  }
  EXPECT_EQ(splits.size(), 5u);  // 1 (written directly), 3, 15, 57, 109
  const DeviceInfo gpu = decode_device_info(in.host.problem, Device::cuda);
  EXPECT_GT(*splits.rbegin() * 4, gpu.sm_count * gpu.ctas_per_sm);  // 436 CTAs: more than one wave
}

// Scores that keep growing along the cache (keys scaled up to 9x towards the end): each warp's
// running max outgrows its reference by more than 2^8 again and again, so the conditional O
// rescale runs many times mid-segment; q_len 2 adds the causal mask. Every schedule vs fp64.
TEST(DecodeGpu, GrowingScoresRescale) {
  DecodeCase c{.batch = 2, .q_len = 2, .hq = 8, .hkv = 2, .d = 64, .dtype = DType::bf16,
               .lens = {6000, 2500}, .seed = 21};
  GpuInputs in(c);
  const int64_t ctx = 6000 + 5, row = int64_t{c.hkv} * c.d;  // make_decode_inputs: max_len + 5
  for (int64_t i = 0; i < in.host.k.numel(); ++i)
    in.host.k.set(i, in.host.k.get(i) * static_cast<float>(1.0 + 8.0 * ((i / row) % ctx) / ctx));
  in.k.upload(in.host.k);
  const DeviceInfo dev = decode_device_info(in.host.problem, Device::cuda);
  for (DecodeSchedule s : kAll) check(in, make_decode_plan(in.host.problem, c.lens, dev, s), "growing");
}

// Every cache row no sequence owns below its length (dense capacity slack, the tail of a
// sequence's last page, spare pages) holds NaN. TMA boxes fetch whole boxes past a segment's end
// (sm_90), so this checks that V rows there are zeroed and K columns masked; 0 x NaN would leak.
TEST(DecodeGpu, CacheSlackNeverLeaks) {
  for (int ps : {0, 16, 64})
    for (int d : {64, 128}) {
      DecodeCase c{.batch = 3, .q_len = 2, .hq = 8, .hkv = 2, .d = d, .dtype = DType::bf16,
                   .page_size = ps, .lens = {300, 1000, 77}, .seed = static_cast<uint64_t>(ps + d)};
      GpuInputs in(c);
      const TensorView& kv = in.host.k.view();  // [outer, tokens, hkv, d]; v has the same shape
      std::vector<char> owned(static_cast<size_t>(kv.shape[0] * kv.shape[1]), 0);
      for (int b = 0; b < c.batch; ++b)
        for (int j = 0; j < c.lens[b]; ++j) {
          const int64_t outer = ps ? in.host.table.ptr<int32_t>()[b * in.host.table.view().shape[1] + j / ps] : b;
          owned[outer * kv.shape[1] + (ps ? j % ps : j)] = 1;
        }
      const int64_t row = kv.shape[2] * kv.shape[3];
      for (int64_t i = 0; i < in.host.k.numel(); ++i)
        if (!owned[i / row]) {
          in.host.k.set(i, NAN);
          in.host.v.set(i, NAN);
        }
      in.k.upload(in.host.k);
      in.v.upload(in.host.v);
      const DeviceInfo dev = decode_device_info(in.host.problem, Device::cuda);
      for (DecodeSchedule s : kAll)
        check(in, make_decode_plan(in.host.problem, c.lens, dev, s),
              "page " + std::to_string(ps) + " d" + std::to_string(d));
    }
}

// Sync words are never reset by a memset: each Lean launch bumps the epoch, and each split-KV
// tile's last split zeroes its arrival counter (a stale one would leave the output unwritten).
// FlashDecoding's two launches are captured together. Run the same plan many times with fresh
// queries, then replay it from a CUDA graph.
TEST(DecodeGpu, RepeatedRunsAndGraphReplay) {
  DecodeCase c{.batch = 3, .q_len = 2, .hq = 16, .hkv = 4, .d = 128, .dtype = DType::bf16,
               .page_size = 32, .lens = {5000, 1300, 77}, .seed = 9};
  GpuInputs in(c);
  std::mt19937_64 rng(77);
  const DecodeSchedule kSplitting[] = {DecodeSchedule::lean, DecodeSchedule::split_kv,
                                       DecodeSchedule::flash_decoding};
  for (DecodeSchedule s : kSplitting) {
    DecodePlan plan = make_decode_plan(in.host.problem, c.lens, decode_device_info(in.host.problem, Device::cuda), s);
    ASSERT_GT(s == DecodeSchedule::lean ? plan.num_partial_slots : plan.num_splits - 1, 0) << plan.describe();
    for (int i = 0; i < 4; ++i) {
      in.host.q.fill_normal(rng);
      in.q.upload(in.host.q);
      check(in, plan, "run " + std::to_string(i));
    }
  }
  for (DecodeSchedule s : kSplitting) {
    DecodePlan p = make_decode_plan(in.host.problem, c.lens, decode_device_info(in.host.problem, Device::cuda), s);
    cudaStream_t stream;
    FK_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    in.run(p, stream);  // uploads the plan and sizes the workspace before capture
    FK_CUDA_CHECK(cudaStreamSynchronize(stream));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    FK_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    in.run(p, stream);
    FK_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    FK_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (int i = 0; i < 3; ++i) {
      in.host.q.fill_normal(rng);
      in.q.upload(in.host.q);
      in.out.poison();
      FK_CUDA_CHECK(cudaGraphLaunch(exec, stream));
      FK_CUDA_CHECK(cudaStreamSynchronize(stream));
      in.fetch();
      auto exact = cpu::reference_decode(in.host.q, in.host.k, in.host.v, in.host.seqlens, in.host.table_view(), 0.f);
      auto naive = cpu::reference_decode(in.host.q, in.host.k, in.host.v, in.host.seqlens, in.host.table_view(), 0.f, true);
      EXPECT_LE(max_abs_err(in.host.out, exact.out), decode_tolerance(exact, naive))
          << "replay " << i << " " << p.describe();
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
  }
}

namespace {
// Holds `blocks` SMs (one CTA each, most of the shared memory) for about `cycles` clocks.
__global__ void occupy(long long cycles, int* sink) {
  extern __shared__ int pad[];
  const long long t0 = clock64();
  int x = 0;
  while (clock64() - t0 < cycles) x += pad[threadIdx.x % 32];
  if (x == -1) *sink = x;
}
}  // namespace

// Lean's CTAs spin on their peers: with part of the GPU taken by another kernel, not all are
// resident at first; the plan's co-residency bound means they still finish once it leaves.
TEST(DecodeGpu, RunsWhileAnotherKernelHoldsPartOfTheGpu) {
  DecodeCase c{.batch = 4, .q_len = 1, .hq = 32, .hkv = 8, .d = 128, .dtype = DType::bf16,
               .page_size = 16, .lens = {30000, 9000, 100, 17000}, .seed = 12};
  GpuInputs in(c);
  DecodePlan plan = make_decode_plan(in.host.problem, c.lens, decode_device_info(in.host.problem, Device::cuda),
                                     DecodeSchedule::lean);
  in.run(plan);  // upload the plan first
  FK_CUDA_CHECK(cudaDeviceSynchronize());
  cudaStream_t busy, work;
  FK_CUDA_CHECK(cudaStreamCreateWithFlags(&busy, cudaStreamNonBlocking));
  FK_CUDA_CHECK(cudaStreamCreateWithFlags(&work, cudaStreamNonBlocking));
  int* sink;
  FK_CUDA_CHECK(cudaMalloc(&sink, 4));
  const int smem = 200 * 1024;
  FK_CUDA_CHECK(cudaFuncSetAttribute(occupy, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  occupy<<<plan.device.sm_count / 2, 32, smem, busy>>>(50'000'000LL, sink);  // ~25 ms on half the SMs
  FK_CUDA_CHECK(cudaGetLastError());
  in.out.poison();
  in.run(plan, work);
  FK_CUDA_CHECK(cudaStreamSynchronize(work));
  FK_CUDA_CHECK(cudaStreamSynchronize(busy));
  in.fetch();
  auto exact = cpu::reference_decode(in.host.q, in.host.k, in.host.v, in.host.seqlens, in.host.table_view(), 0.f);
  auto naive = cpu::reference_decode(in.host.q, in.host.k, in.host.v, in.host.seqlens, in.host.table_view(), 0.f, true);
  EXPECT_LE(max_abs_err(in.host.out, exact.out), decode_tolerance(exact, naive));
  cudaFree(sink);
  cudaStreamDestroy(busy);
  cudaStreamDestroy(work);
}

// Small shapes for compute-sanitizer: a Lean grid with hosts, peers and finishing CTAs, split-KV
// with one split per tile (written directly; several: SplitKvMergesInKernel), single; paged and
// dense; q_len 3.
TEST(DecodeGpuSmall, AllSchedules) {
  for (int ps : {0, 16}) {
    DecodeCase c{.batch = 2, .q_len = 3, .hq = 4, .hkv = 2, .d = 64, .dtype = DType::bf16,
                 .page_size = ps, .lens = {700, 90}, .seed = 31};
    GpuInputs in(c);
    for (DecodeSchedule s : kAll) check(in, make_decode_plan(in.host.problem, c.lens, {3, 1}, s), "small");
  }
}

// Split-KV with several splits per tile, some empty (the length-90 sequence has one LeanTile for
// three splits): the in-kernel merge and its counters, and FlashDecoding's partials + merge_states
// launch, under the sanitizers, each run twice.
// Softcap with a window on a small Lean / split-KV / single grid, for the sanitizers.
TEST(DecodeGpuSmall, SoftcapAndWindow) {
  for (int ps : {0, 16}) {
    DecodeCase c{.batch = 2,
                 .q_len = 3,
                 .hq = 4,
                 .hkv = 2,
                 .d = 64,
                 .dtype = DType::bf16,
                 .page_size = ps,
                 .lens = {700, 90},
                 .seed = 35};
    DecodeOptions o;
    o.softcap = 2.f;
    o.window_left = 130;
    GpuInputs in(c, o);
    for (DecodeSchedule s : kAll)
      check(in, make_decode_plan(in.host.problem, c.lens, {3, 1}, s), "small window");
  }
}

TEST(DecodeGpuSmall, SplitKvMergesInKernelAndAfter) {
  for (int ps : {0, 16}) {
    DecodeCase c{.batch = 2, .q_len = 3, .hq = 4, .hkv = 2, .d = 64, .dtype = DType::bf16,
                 .page_size = ps, .lens = {700, 90}, .seed = 33};
    GpuInputs in(c);
    for (DecodeSchedule s : {DecodeSchedule::split_kv, DecodeSchedule::flash_decoding}) {
      DecodePlan plan = make_decode_plan(in.host.problem, c.lens, {16, 1}, s);
      ASSERT_EQ(plan.num_splits, 3) << plan.describe();
      for (int i = 0; i < 2; ++i) check(in, plan, "split run " + std::to_string(i));
    }
  }
}

TEST(DecodeGpuSmall, MergeStatesMatchesCpu) {
  std::mt19937_64 rng(5);
  HostTensor o(DType::bf16, {3, 4, 2, 64}), l(DType::f32, {3, 4, 2}), out_cpu(DType::f32, {4, 2, 64}),
      lse_cpu(DType::f32, {4, 2}), out_gpu(DType::f32, {4, 2, 64}), lse_gpu(DType::f32, {4, 2});
  o.fill_normal(rng);
  l.fill_normal(rng, 0.f, 3.f);
  l.ptr<float>()[5] = -INFINITY;  // one empty part
  merge_states(o, l, out_cpu, lse_cpu);
  DeviceTensor d_o(o), d_l(l), d_out(out_gpu), d_lse(lse_gpu);
  d_out.poison();
  d_lse.poison();
  merge_states(d_o, d_l, d_out, d_lse);
  FK_CUDA_CHECK(cudaDeviceSynchronize());
  d_out.download(out_gpu);
  d_lse.download(lse_gpu);
  for (int i = 0; i < out_cpu.numel(); ++i) EXPECT_NEAR(out_gpu.get(i), out_cpu.get(i), 1e-5) << i;
  for (int i = 0; i < lse_cpu.numel(); ++i) EXPECT_NEAR(lse_gpu.get(i), lse_cpu.get(i), 1e-5) << i;
}

TEST(DecodeGpuSmall, GpuOnlyErrorsNameArgument) {
  DecodeCase c{.batch = 1, .q_len = 1, .hq = 2, .hkv = 2, .d = 32, .dtype = DType::bf16, .lens = {40}, .seed = 2};
  GpuInputs in(c);
  DecodePlan plan = make_decode_plan(in.host.problem, c.lens, {4, 1});
  try {
    in.run(plan);
    ADD_FAILURE() << "hdim 32 accepted on the GPU";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("q: expected hdim 64, 128 or 256 on the GPU", 0), 0u) << e.what();
  }
  // 32 KV heads x 79 LeanTiles: more CTAs than any GPU of today holds at once.
  DecodeCase c2{.batch = 1, .q_len = 1, .hq = 32, .hkv = 32, .d = 64, .dtype = DType::bf16, .lens = {20000}, .seed = 2};
  GpuInputs in2(c2);
  DecodePlan huge = make_decode_plan(in2.host.problem, c2.lens, {100000, 1}, DecodeSchedule::lean);
  try {
    in2.run(huge);
    ADD_FAILURE() << "non-co-resident Lean grid accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("plan:", 0), 0u) << e.what();
  }
  in2.fetch();
  for (int64_t i = 0; i < in2.host.out.numel(); ++i) ASSERT_TRUE(std::isnan(in2.host.out.get(i)));
}
