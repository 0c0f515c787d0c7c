// cuda::decode and cuda::decode_device_info (launch.h): picks the (dtype, hdim) KernelSet, fills
// DecodeParams from the tensors, the plan's device copy and the workspace, and launches the
// plan's schedule: one kernel (split-KV merges in it too), and for flash_decoding the public
// merge_states kernel after it.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <atomic>

#include "api/validate.h"
#include "common/env_knob.h"
#include "cuda/common/check.h"
#include "cuda/common/workspace.h"
#include "cuda/decode/kernel_set.h"
#include "cuda/decode/launch.h"
#include "cuda/decode/plan_device.h"
#include "cuda/decode/tensor_maps.h"
#include "flashkit/decode.h"

namespace flashkit::cuda {

using decoding::KernelSet;

namespace {

using flashkit::detail::env_int;

// Calls fn.template operator()<T, D>() for the compiled (dtype, hdim); an Error otherwise.
template <class Fn>
auto with_kernels(DType dt, int hdim, Fn&& fn) {
  const bool bf = dt == DType::bf16;
  if (dt != DType::bf16 && dt != DType::f16)
    detail::fail("q: expected float16 or bfloat16 on the GPU, got ", dtype_name(dt));
  switch (hdim) {
    case 64: return bf ? fn.template operator()<__nv_bfloat16, 64>() : fn.template operator()<__half, 64>();
    case 128: return bf ? fn.template operator()<__nv_bfloat16, 128>() : fn.template operator()<__half, 128>();
    case 256: return bf ? fn.template operator()<__nv_bfloat16, 256>() : fn.template operator()<__half, 256>();
  }
  detail::fail("q: expected hdim 64, 128 or 256 on the GPU, got ", hdim);
}

// The device's L2 size in bytes, looked up once per device.
double l2_bytes(int device) {
  static std::atomic<int> known[64];
  int bytes = device >= 0 && device < 64 ? known[device].load() : 0;
  if (bytes == 0) {
    FK_CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrL2CacheSize, device));
    if (device >= 0 && device < 64) known[device].store(bytes);
  }
  return bytes;
}

struct CtasPerSm {
  template <class T, int D>
  int operator()() const { return KernelSet<T, D>::ctas_per_sm(); }
};

struct TmaBox {
  const DecodePlan& plan;
  template <class T, int D>
  int operator()() const {
    return KernelSet<T, D>::tma_box(plan.problem.paged, plan.problem.page_size, plan.lean_tile);
  }
};

struct Launch {
  const decoding::DecodeParams& p;
  DecodeSchedule schedule;
  cudaStream_t stream;
  template <class T, int D>
  void operator()() const { KernelSet<T, D>::launch(p, schedule, stream); }
};

}  // namespace

DeviceInfo decode_device_info(const DecodeProblem& problem, int device) {
  int sms = 0, current = 0;
  FK_CUDA_CHECK(cudaGetDevice(&current));
  FK_CUDA_CHECK(cudaSetDevice(device));
  FK_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  int ctas = 1;
  if ((problem.dtype == DType::bf16 || problem.dtype == DType::f16) &&
      (problem.hdim == 64 || problem.hdim == 128 || problem.hdim == 256))
    ctas = with_kernels(problem.dtype, problem.hdim, CtasPerSm{});
  // A/B knob: FLASHKIT_DECODE_CTAS_PER_SM=n plans for at most n CTAs a SM (Lean's grid, the
  // split rule's capacity); the hardware may still co-schedule more split-KV CTAs.
  if (const int n = env_int("FLASHKIT_DECODE_CTAS_PER_SM", 0); n > 0) ctas = std::min(ctas, n);
  FK_CUDA_CHECK(cudaSetDevice(current));
  return DeviceInfo{sms, ctas};
}

void decode(const TensorView& q, const TensorView& k, const TensorView& v,
            const TensorView& seqlens, const TensorView& table, const TensorView& out,
            const TensorView& lse, const DecodePlan& plan, const DecodeScores& scores,
            Stream stream, const Workspace& ws) {
  int device = 0;
  FK_CUDA_CHECK(cudaGetDevice(&device));
  if (device != q.device_id)
    detail::fail("q: is on cuda:", q.device_id, " but the current CUDA device is ", device);
  const DecodeProblem& pr = plan.problem;
  if (plan.schedule == DecodeSchedule::lean) {
    // Spin-waits end only if every CTA of the grid can be resident at once.
    int sms = 0;
    FK_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    const int per_sm = with_kernels(pr.dtype, pr.hdim, CtasPerSm{});
    if (static_cast<int64_t>(sms) * per_sm < plan.grid)
      detail::fail("plan: its Lean grid of ", plan.grid, " CTAs exceeds the ", sms * per_sm,
                   " this GPU runs at once (", sms, " SMs x ", per_sm, "); plan with decode_device_info");
  }
  const decoding::PlanOnDevice dp = decoding::plan_on_device(plan, device, stream);
  const size_t bytes = decode_workspace_bytes(plan);
  float* part = static_cast<float*>(workspace(ws, bytes, stream, "decode"));

  decoding::DecodeParams p{};
  p.q = q.data;
  p.q_sb = q.stride[0], p.q_st = q.stride[1], p.q_sh = q.stride[2];
  p.k = k.data;
  p.v = v.data;
  p.k_so = k.stride[0], p.k_st = k.stride[1], p.k_sh = k.stride[2];
  p.v_so = v.stride[0], p.v_st = v.stride[1], p.v_sh = v.stride[2];
  p.block_table = table.ptr<const int32_t>();
  p.bt_s0 = table.data ? table.stride[0] : 0;
  p.bt_s1 = table.data ? table.stride[1] : 0;
  p.page_size = pr.paged ? pr.page_size : 1;
  p.seqlens = seqlens.ptr<const int32_t>();
  p.seqlens_s = seqlens.stride[0];
  p.out = out.data;
  p.o_sb = out.stride[0], p.o_st = out.stride[1], p.o_sh = out.stride[2];
  p.lse = lse.ptr<float>();
  p.l_sb = lse.stride[0], p.l_sh = lse.stride[1], p.l_st = lse.stride[2];
  p.scale = scores.scale;
  p.softcap = scores.softcap;
  p.softcap_in = scores.softcap > 0.f ? scores.scale / scores.softcap : 0.f;
  p.window_left = scores.window_left;
  p.q_len = pr.q_len, p.group = pr.group(), p.rows = pr.rows(), p.num_q_heads = pr.num_q_heads;
  p.batch = pr.batch, p.lean_tile = plan.lean_tile;
  p.num_kv_heads = pr.num_kv_heads, p.row_blocks = plan.row_blocks;
  p.tiles = dp.tiles, p.ctas = dp.ctas, p.splits = dp.splits, p.kv_lengths = dp.kv_lengths;
  p.num_splits = plan.num_splits, p.grid = plan.grid;
  p.merge_in_kernel = plan.schedule == DecodeSchedule::split_kv;
  // FLASHKIT_DECODE_SPLIT_ORDER=1: split_kv's CTAs split-major (an A/B knob); flash_decoding
  // always keeps FA2's order.
  p.split_major = env_int("FLASHKIT_DECODE_SPLIT_ORDER", 0) == 1 && plan.schedule == DecodeSchedule::split_kv;
  p.flags = dp.flags, p.epoch = dp.epoch, p.arrived = dp.arrived;
  const int64_t part_rows = plan.schedule == DecodeSchedule::lean
                                ? int64_t{plan.num_partial_slots} * kDecodeRowsPerBlock
                                : int64_t{plan.num_splits} * pr.batch * pr.q_len * pr.num_q_heads;
  p.part_o = part;
  p.part_lse = part ? part + part_rows * pr.hdim : nullptr;

  // sm_90: K/V by cp.async (kv_box 0), or by tensor-map boxes where the plan streams faster by
  // boxes (decode_prefers_cp_async false, plan.h: short hdim 64 streams, 16-token pages at hdim
  // 256) and the cache layout allows them.
  // K/V lines are marked evict-first when one CTA reads each (one row block per KV head); with
  // several row blocks their CTAs read the same K/V side by side and should find it in L2.
  // A/B knobs: FLASHKIT_DECODE_TMA=0 / 1 forces cp.async / TMA (where the layout allows);
  // FLASHKIT_DECODE_EVICT_FIRST=0 gives the TMA boxes normal L2 priority; FLASHKIT_DECODE_L2_PROMO
  // (0, 64, 128, 256 bytes) overrides the maps' L2 fill size (tensor_maps.h);
  // FLASHKIT_DECODE_L2_PREFETCH=n prefetches each segment's chunks n stages ahead of the ring into
  // L2 (attend.h).
  const int tma_env = env_int("FLASHKIT_DECODE_TMA", -1);
  const bool tma_allowed = tma_env < 0 ? !decode_prefers_cp_async(plan) : tma_env != 0;
  const int box = tma_allowed ? with_kernels(pr.dtype, pr.hdim, TmaBox{plan}) : 0;
  p.kv_box = decoding::encode_kv_maps(p, k, v, box, env_int("FLASHKIT_DECODE_L2_PROMO", -1)) ? box : 0;
  // Evict-first where it measured faster (bench/NOTES-decode.md, session 18, H200): a head's
  // token rows 256 bytes or wider (hdim 128: 471 vs 530 us at b1 h56 64k), a head's tokens
  // adjacent (head-major caches), or K/V of at most four L2s (hdim 64 b1 h56 8k: 42.4 vs 45.2 us;
  // the L2's dirty lines stay out of the call). Longer hdim-64 streams of rows strided over the
  // heads are 3-10% faster with normal priority (64k 233 vs 247, b3 h40 16k 133 vs 140).
  // FLASHKIT_DECODE_EVICT_FIRST=0 / 1 forces it off / on.
  const bool rows_wide = pr.hdim * 2 >= 256;
  const bool head_contiguous = k.stride[1] == pr.hdim && v.stride[1] == pr.hdim;
  const double kv_bytes = 4.0 * plan.total_iters * plan.lean_tile * pr.hdim;  // K and V, 2 B each
  const bool short_stream = kv_bytes <= 4.0 * l2_bytes(device);
  const int evict_env = env_int("FLASHKIT_DECODE_EVICT_FIRST", -1);
  p.kv_evict_first =
      plan.row_blocks == 1 &&
      (evict_env < 0 ? rows_wide || head_contiguous || short_stream : evict_env != 0);
  p.l2_prefetch = env_int("FLASHKIT_DECODE_L2_PREFETCH", 0);

  with_kernels(pr.dtype, pr.hdim, Launch{p, plan.schedule, stream});
  if (plan.schedule == DecodeSchedule::flash_decoding && plan.num_splits > 1) {
    // FlashDecoding's second kernel: merge_states over the partials [P, batch, q_len, heads]
    // into out [batch, q_len, heads, hdim] and lse, viewed as [batch, q_len, heads].
    const int64_t np = plan.num_splits, b = pr.batch, t = pr.q_len, h = pr.num_q_heads, d = pr.hdim;
    const TensorView o_parts =
        TensorView::of(p.part_o, DType::f32, {np, b, t, h, d}, Device::cuda, device);
    const TensorView lse_parts =
        TensorView::of(p.part_lse, DType::f32, {np, b, t, h}, Device::cuda, device);
    const TensorView lse_bth = TensorView::strided(lse.data, DType::f32, {b, t, h},
                                                   {lse.stride[0], lse.stride[2], lse.stride[1]},
                                                   Device::cuda, device);
    cuda::merge_states(o_parts, lse_parts, out, lse_bth, stream);  // no re-validation: built here
  }
}

}  // namespace flashkit::cuda
