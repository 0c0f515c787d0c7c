// decode / decode_workspace_bytes / decode_device_info (include/flashkit/decode.h): every check
// against the plan and the tensors, then dispatch to src/cpu or src/cuda/decode.
#include "flashkit/decode.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "api/validate.h"
#include "common/decode_scores.h"
#include "cpu/decode.h"
#ifdef FLASHKIT_WITH_CUDA
#include "cuda/decode/launch.h"
#endif

namespace flashkit {

using namespace detail;

namespace {

void check_plan(const DecodePlan& plan) {
  const DecodeProblem& p = plan.problem;
  if (plan.schedule == DecodeSchedule::automatic || plan.grid < 1 || p.batch < 1 ||
      plan.kv_lengths.size() != static_cast<size_t>(p.batch) ||
      plan.tiles.size() != static_cast<size_t>(p.batch) * p.num_kv_heads * plan.row_blocks)
    fail("plan: expected a plan made by make_decode_plan, got an inconsistent one (",
         plan.describe(), ")");
}

void check_cache(const TensorView& c, const char* name, const TensorView& q, const DecodePlan& plan) {
  const DecodeProblem& p = plan.problem;
  check_defined(c, name);
  check_ndim(c, name, 4);
  check_same_dtype(c, name, q, "q");
  check_same_device(c, name, q, "q");
  check_last_dim_contiguous(c, name);
  check_nonnegative_strides(c, name);
  if (c.shape[2] != p.num_kv_heads)
    fail(name, ": expected ", p.num_kv_heads, " kv heads like the plan, got ", c.shape[2]);
  if (c.shape[3] != p.hdim) fail(name, ": expected hdim ", p.hdim, " like the plan, got ", c.shape[3]);
  int max_len = *std::max_element(plan.kv_lengths.begin(), plan.kv_lengths.end());
  if (p.paged) {
    if (c.shape[1] != p.page_size)
      fail(name, ": expected page size ", p.page_size, " like the plan (dim 1), got ", c.shape[1]);
  } else {
    if (c.shape[0] != p.batch) fail(name, ": expected batch ", p.batch, " like the plan, got ", c.shape[0]);
    if (c.shape[1] < max_len)
      fail(name, ": expected room for the plan's longest sequence (", max_len, " tokens), got ",
           c.shape[1]);
  }
}

// Host-side values: only for CPU tensors (the GPU path never reads device memory on the host).
void check_values(const TensorView& seqlens, const TensorView& table, const TensorView& k,
                  const DecodePlan& plan) {
  const int32_t* len = seqlens.ptr<const int32_t>();
  for (int b = 0; b < plan.problem.batch; ++b) {
    int l = len[b * seqlens.stride[0]];
    if (l < 0 || l > plan.kv_lengths[b])
      fail("cache_seqlens: expected 0..", plan.kv_lengths[b], " (the plan's length) for sequence ",
           b, ", got ", l);
    if (!table.data) continue;
    const int ps = plan.problem.page_size;
    for (int j = 0; j < (l + ps - 1) / ps; ++j) {
      int page = table.ptr<const int32_t>()[b * table.stride[0] + j * table.stride[1]];
      if (page < 0 || page >= k.shape[0])
        fail("block_table: expected page indices in 0..", k.shape[0] - 1, ", got ", page,
             " at [", b, ", ", j, "]");
    }
  }
}

}  // namespace

void decode(const TensorView& q, const TensorView& k_cache, const TensorView& v_cache,
            const TensorView& cache_seqlens, const TensorView& block_table, const TensorView& out,
            const TensorView& lse, const DecodePlan& plan, const DecodeOptions& opts) {
  check_plan(plan);
  const DecodeProblem& p = plan.problem;
  check_defined(q, "q");
  check_ndim(q, "q", 4);
  check_dtype(q, "q", {DType::f32, DType::f16, DType::bf16});
  if (q.dtype != p.dtype)
    fail("q: expected dtype ", dtype_name(p.dtype), " like the plan, got ", dtype_name(q.dtype));
  if (q.shape[0] != p.batch) fail("q: expected batch ", p.batch, " like the plan, got ", q.shape[0]);
  if (q.shape[1] != p.q_len) fail("q: expected ", p.q_len, " tokens like the plan, got ", q.shape[1]);
  if (q.shape[2] != p.num_q_heads)
    fail("q: expected ", p.num_q_heads, " heads like the plan, got ", q.shape[2]);
  if (q.shape[3] != p.hdim) fail("q: expected hdim ", p.hdim, " like the plan, got ", q.shape[3]);
  check_last_dim_contiguous(q, "q");
  check_nonnegative_strides(q, "q");
  check_cache(k_cache, "k_cache", q, plan);
  check_cache(v_cache, "v_cache", q, plan);
  check_same_shape(v_cache, "v_cache", k_cache, "k_cache");

  check_defined(cache_seqlens, "cache_seqlens");
  check_dtype(cache_seqlens, "cache_seqlens", {DType::i32});
  check_shape(cache_seqlens, "cache_seqlens", {p.batch});
  check_same_device(cache_seqlens, "cache_seqlens", q, "q");
  if (p.paged) {
    if (!block_table.data)
      fail("block_table: expected int32 [batch, max_pages] for the plan's paged cache, got none");
    check_dtype(block_table, "block_table", {DType::i32});
    check_ndim(block_table, "block_table", 2);
    check_same_device(block_table, "block_table", q, "q");
    if (block_table.shape[0] != p.batch)
      fail("block_table: expected batch ", p.batch, " like the plan, got ", block_table.shape[0]);
    for (int b = 0; b < p.batch; ++b)
      if ((plan.kv_lengths[b] + p.page_size - 1) / p.page_size > block_table.shape[1])
        fail("block_table: expected at least ", (plan.kv_lengths[b] + p.page_size - 1) / p.page_size,
             " pages per sequence for the plan's lengths, got ", block_table.shape[1]);
  } else if (block_table.data) {
    fail("block_table: expected none for the plan's dense cache, got ", block_table.shape_str());
  }

  check_defined(out, "out");
  check_same_dtype(out, "out", q, "q");
  check_same_shape(out, "out", q, "q");
  check_same_device(out, "out", q, "q");
  check_last_dim_contiguous(out, "out");
  check_nonnegative_strides(out, "out");
  check_defined(lse, "lse");
  check_dtype(lse, "lse", {DType::f32});
  check_shape(lse, "lse", {p.batch, p.num_q_heads, p.q_len});
  check_same_device(lse, "lse", q, "q");
  for (const TensorView* o : {&out, &lse}) {
    const char* name = o == &out ? "out" : "lse";
    check_no_overlap(*o, name, q, "q");
    check_no_overlap(*o, name, k_cache, "k_cache");
    check_no_overlap(*o, name, v_cache, "v_cache");
    check_no_overlap(*o, name, cache_seqlens, "cache_seqlens");
    if (block_table.data) check_no_overlap(*o, name, block_table, "block_table");
  }
  check_no_overlap(lse, "lse", out, "out");
  if (!std::isfinite(opts.softmax_scale))
    fail("opts.softmax_scale: expected a finite value (0 for 1/sqrt(hdim)), got ", opts.softmax_scale);
  const float scale = opts.softmax_scale != 0.f ? opts.softmax_scale : 1.f / std::sqrt(static_cast<float>(p.hdim));
  if (!(opts.softcap >= 0.f && std::isfinite(opts.softcap)))
    fail("opts.softcap: expected a finite value >= 0 (0 = off), got ", opts.softcap);
  if (opts.window_left < -1)
    fail("opts.window_left: expected -1 (unbounded) or a number of keys >= 0, got ",
         opts.window_left);
  if (p.window_left >= 0 && opts.window_left != p.window_left)
    fail("opts.window_left: expected the plan's window ", p.window_left, ", got ",
         opts.window_left);
  // A window at least as long as every cache the plan serves hides no key: none (and no
  // arithmetic near INT_MIN for windows like INT_MAX).
  const int longest = *std::max_element(plan.kv_lengths.begin(), plan.kv_lengths.end());
  const DecodeScores scores{scale, opts.softcap, opts.window_left >= longest ? -1 : opts.window_left};

  if (q.device == Device::cpu) {
    if (opts.stream) fail("opts.stream: expected none for CPU tensors, got a CUDA stream");
    if (opts.workspace.data) fail("opts.workspace: expected none for CPU tensors (the CPU backend allocates its own)");
    check_values(cache_seqlens, block_table, k_cache, plan);
    cpu::decode(q, k_cache, v_cache, cache_seqlens, block_table, out, lse, plan, scores);
    return;
  }
#ifdef FLASHKIT_WITH_CUDA
  if (q.dtype == DType::f32) fail("q: expected float16 or bfloat16 on the GPU, got float32");
  if (p.hdim != 64 && p.hdim != 128 && p.hdim != 256)
    fail("q: expected hdim 64, 128 or 256 on the GPU, got ", p.hdim);
  // The kernel moves q/k/v in 16-byte pieces: 8 elements, so every row must start 16-byte aligned.
  for (const auto& [t, name] : {std::pair{&q, "q"}, {&k_cache, "k_cache"}, {&v_cache, "v_cache"}}) {
    check_aligned(*t, name, 16);
    for (int d = 0; d < 3; ++d)
      if (t->stride[d] % 8 != 0)
        fail(name, ": expected strides that are multiples of 8 elements on the GPU, got ", t->stride[d],
             " in dim ", d);
  }
  cuda::decode(q, k_cache, v_cache, cache_seqlens, block_table, out, lse, plan, scores, opts.stream,
               opts.workspace);
#else
  fail("q: is on cuda, but flashkit was built without CUDA");
#endif
}

size_t decode_workspace_bytes(const DecodePlan& plan) {
  const DecodeProblem& p = plan.problem;
  // Each partial row is O (hdim fp32) + its lse (fp32).
  const size_t row = static_cast<size_t>(p.hdim + 1) * sizeof(float);
  switch (plan.schedule) {
    case DecodeSchedule::lean:
      return static_cast<size_t>(plan.num_partial_slots) * kDecodeRowsPerBlock * row;
    case DecodeSchedule::split_kv:
    case DecodeSchedule::flash_decoding:
      return static_cast<size_t>(plan.num_splits) * p.batch * p.q_len * p.num_q_heads * row;
    default: return 0;
  }
}

DeviceInfo decode_device_info(const DecodeProblem& problem, Device device, int device_id) {
  if (device == Device::cpu) return DeviceInfo{omp_get_max_threads(), 1};
#ifdef FLASHKIT_WITH_CUDA
  return cuda::decode_device_info(problem, device_id);
#else
  (void)problem;
  (void)device_id;
  fail("device: cuda requested, but flashkit was built without CUDA");
#endif
}

}  // namespace flashkit
