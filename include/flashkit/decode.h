// Decode attention (inference): a few new query tokens per sequence against a KV cache, run on a
// DecodePlan (plan.h) computed once on the host; and merge_states, the (O, LSE) combine that
// split-KV decoding, Lean's host-CTA reduction and multi-GPU attention use.
#pragma once
#include <vector>

#include "flashkit/common.h"
#include "flashkit/plan.h"
#include "flashkit/tensor.h"

namespace flashkit {

struct DecodeOptions {
  float softmax_scale = 0.f;  // 0 means 1/sqrt(hdim)
  // > 0: scores become softcap * tanh(scores / softcap) (Gemma-2), as in AttentionOptions.
  float softcap = 0.f;
  // Sliding window (Mistral, Gemma): query token i, at cache position p = len - q_len + i, sees
  // keys j with p - window_left <= j <= p; -1 means unbounded. Only the window's keys are read
  // (and those sharing its first 64-token chunk, which must be readable). On the GPU the CTAs of
  // a split_kv / flash_decoding plan share the window's keys among their splits; a lean plan's
  // CTAs keep their ranges of the whole cache. A plan made for the window
  // (DecodeProblem::window_left) is split_kv under `auto`, and needs this same window.
  int window_left = -1;
  Stream stream = nullptr;
  Workspace workspace;        // GPU: at least decode_workspace_bytes(plan); empty: cached buffer
};

// q      [batch, q_len, num_q_heads, hdim]  f32 (CPU only) / f16 / bf16, last dim contiguous
// k_cache, v_cache: dense [batch, ctx, num_kv_heads, hdim] or paged
//        [num_pages, page_size, num_kv_heads, hdim] (last dim contiguous), q's dtype
// cache_seqlens int32 [batch]: keys in the cache per sequence, 0 <= len <= plan.kv_lengths[b]
//        (checked on the CPU backend; the GPU reads min(len, plan length) without a host sync)
// block_table: empty (dense) or int32 [batch, max_pages]: page j of sequence b holds its tokens
//        [j*page_size, (j+1)*page_size); only pages below the length are read
// out    [batch, q_len, num_q_heads, hdim] q's dtype; lse fp32 [batch, num_q_heads, q_len]
// The q tokens are the last q_len positions of each sequence, causal among themselves: token i
// sees keys j < len - q_len + i + 1 (and j >= len - q_len + i - opts.window_left with a window).
// A row that sees no key gets O = 0 and lse = -inf.
// The plan must match the tensors (batch, heads, hdim, q_len, dtype, dense/paged, page size).
void decode(const TensorView& q, const TensorView& k_cache, const TensorView& v_cache,
            const TensorView& cache_seqlens, const TensorView& block_table, const TensorView& out,
            const TensorView& lse, const DecodePlan& plan, const DecodeOptions& opts = {});

// Bytes of GPU scratch `decode` needs for this plan (its partials); 0 for the single schedule.
size_t decode_workspace_bytes(const DecodePlan& plan);

// The DeviceInfo to plan with: on the GPU its SM count and how many decode CTAs of this problem
// fit on one SM; on the CPU the OpenMP thread count and 1.
DeviceInfo decode_device_info(const DecodeProblem& problem, Device device, int device_id = 0);

// Combine P partial attention results over disjoint key sets into one:
//   o_parts   [P, d0, ..., dk, hdim]  f32 / f16 / bf16 (each part normalised: O_p = sum_p / l_p)
//   lse_parts [P, d0, ..., dk]        f32, natural-log logsumexp of each part (-inf: empty part)
//   out       [d0, ..., dk, hdim]     f32 / f16 / bf16;  lse [d0, ..., dk] f32 (may be empty)
// with 1 <= k+1 <= 4 leading dims (e.g. [P, n, heads, hdim] -> [n, heads, hdim]), any strides
// (hdim contiguous). out = sum_p exp(lse_p - lse) O_p, lse = log sum_p exp(lse_p); all parts
// empty gives O = 0, lse = -inf.
void merge_states(const TensorView& o_parts, const TensorView& lse_parts, const TensorView& out,
                  const TensorView& lse, Stream stream = nullptr);

}  // namespace flashkit
