// The attention problem as the CUDA kernels see it: raw pointers, element strides and sizes,
// filled once on the host by dispatch.cu from the validated API arguments. Mainloops, epilogues
// and schedulers (sm80/ now, sm90/ later) build their own Params from this one Arguments struct.
#pragma once
#include <cstdint>

namespace flashkit::cuda::attn {

// Strides of a [batch, seqlen, heads, hdim] (or varlen [tokens, heads, hdim]) tensor; hdim is
// contiguous. Varlen tensors ignore `batch` and start each sequence at cu_seqlens[b] rows.
struct Strides {
  int64_t batch = 0, row = 0, head = 0;
};

// The fp8 forward's V^T (sm90/fp8.h): keys rounded up to whole 128-key tiles, and its bytes for
// a dense problem.
constexpr int64_t fp8_vt_keys(int64_t seqlen_k) { return (seqlen_k + 127) / 128 * 128; }
// Varlen: one [kv_heads, head_dim, cols] V^T for all sequences; sequence b's keys start at
// column fp8_vt_start(b, cu_seqlens_k[b]) (a multiple of 128, each sequence's columns a whole
// number of 128-key blocks apart, the transposer zeroing every column a key tile of the
// sequence reads past its end).
__host__ __device__ constexpr int64_t fp8_vt_start(int b, int64_t k_start) {
  return 128 * (int64_t(b) + k_start / 128);
}
// Blocks of 128 columns a sequence's V^T reaches past fp8_vt_keys(its length): up to 2 to the
// next sequence's start, 3 for the last sequence, whose key tiles read up to ~192 columns past
// its end (k may hold rows past cu_seqlens_k[batch], whose columns are never written).
inline constexpr int kFp8VtTailBlocks = 3;
constexpr int64_t fp8_vt_varlen_cols(int batch, int64_t total_k) {
  return fp8_vt_start(batch, total_k) + 128;
}
// V^T's columns per (batch, kv head) row: dense fp8_vt_keys(seqlen_k), varlen all of them.
constexpr int64_t fp8_vt_cols(bool varlen, int batch, int seqlen_k, int64_t total_k) {
  return varlen ? fp8_vt_varlen_cols(batch, total_k) : fp8_vt_keys(seqlen_k);
}
constexpr int64_t fp8_vt_bytes(bool varlen, int batch, int kv_heads, int head_dim, int seqlen_k,
                               int64_t total_k) {
  return (varlen ? 1 : int64_t(batch)) * kv_heads * head_dim *
         fp8_vt_cols(varlen, batch, seqlen_k, total_k);
}

// An fp8 descale factor on the device: at p[b * batch_stride + kv_head * head_stride] (strides
// 0 for one per tensor); p null means 1.
struct Descale {
  const float* p = nullptr;
  int64_t batch_stride = 0, head_stride = 0;
  __host__ __device__ float at(int b, int kv_head) const {
    return p ? p[b * batch_stride + kv_head * head_stride] : 1.f;
  }
};

struct AttnArguments {
  // Forward inputs/outputs (the backward reads q, k, v, o, lse too).
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  float* lse = nullptr;  // [batch, heads, seqlen_q] or varlen [heads, total_q]
  Strides q_stride, k_stride, v_stride, o_stride;
  int64_t lse_batch_stride = 0, lse_head_stride = 0, lse_row_stride = 1;

  const int* cu_seqlens_q = nullptr;  // int32 [batch+1] on the device; null = dense
  const int* cu_seqlens_k = nullptr;
  int batch = 0, heads = 0, kv_heads = 0;
  int seqlen_q = 0, seqlen_k = 0;  // dense: the lengths; varlen: upper bounds (grid size)
  int total_q = 0;                 // rows of q in memory (dense: batch * seqlen_q)
  int total_k = 0;                 // rows of k and v in memory (dense: batch * seqlen_k)
  int head_dim = 0;
  float softmax_scale = 0.f;
  bool causal = false;
  // Score variants (score_policy.h's GeneralScores): window bounds (-1 = unbounded, causal not yet
  // folded in), softcap (0 = off), ALiBi slopes fp32 (null = off) at b * batch + h * head stride.
  int window_left = -1, window_right = -1;
  float softcap = 0.f;
  const float* alibi_slopes = nullptr;
  int64_t alibi_batch_stride = 0, alibi_head_stride = 0;
  // Block mask u8 [b|1, h|1, nq, nk] (null = off); a size-1 dim has stride 0 here.
  const uint8_t* block_mask = nullptr;
  int64_t bm_batch_stride = 0, bm_head_stride = 0, bm_row_stride = 0, bm_col_stride = 0;
  int bm_block_q = 128, bm_block_k = 128;
  // Dropout (common/philox.h): 8-bit threshold = round(p * 256), 0 = off; kept P scaled by
  // keep_scale = 256 / (256 - threshold), 1 / (1 - p) of the quantised p.
  uint64_t dropout_seed = 0, dropout_offset = 0;
  uint32_t dropout_threshold = 0;
  float dropout_keep_scale = 1.f;
  // FP8 (e4m3) forward: descale factors (fp32 on the device, the real q is q * q_descale), one
  // per tensor or one per (batch, KV head), and V^T in sm90/fp8.h's layout, written by the
  // launcher into scratch.
  Descale q_descale, k_descale, v_descale;
  const void* vt = nullptr;  // fp8_vt_cols(...) columns
  // The Hopper forward takes causal tiles from a counter, longest first (sm90/fwd_scheduler.h);
  // set for an A/B against its fixed order.
  bool fixed_tile_order = false;

  // Backward only.
  const void* dout = nullptr;
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
  Strides do_stride, dq_stride, dk_stride, dv_stride;
  bool deterministic = false;
  void* workspace = nullptr;  // attention_backward_workspace_bytes() of scratch
};

}  // namespace flashkit::cuda::attn
