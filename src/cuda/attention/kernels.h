// Declarations of the compiled attention kernels (explicit instantiations live in
// src/cuda/instantiations/, one small file per (pass, dtype, hdim bucket, score policy)), plus the
// backward's scratch layout. dispatch.cu includes only this, not the CuTe kernel headers.
#pragma once
#include <cuda_runtime.h>
#include <cutlass/numeric_types.h>

#include <cstddef>

#include "cuda/attention/params.h"

namespace flashkit::cuda::attn {

// Score policies (score_policy.h): PlainScores<causal> masks only; GeneralScores<kMods> adds the
// sliding window (run time, causal folded in) and the modifiers in kMods (ScoreMod bits).
template <bool kCausal>
struct PlainScores;
template <unsigned kMods>
struct GeneralScores;
// ScoreMod bits (score_policy.h), and the sets compiled: each modifier alone, or all together.
namespace mods {
constexpr unsigned kSoftcap = 1, kAlibi = 2, kDropout = 4, kBlockSparse = 8, kAll = 15;
}

template <class Element, int kHeadDim, class Policy>
void run_fwd_sm80(const AttnArguments& a, cudaStream_t stream);

// Hopper forward (sm90/): hdim 64 and 128 with every score policy, hdim 256 with the plain ones
// (PlainScores), window, ALiBi and bf16 softcap; dense or varlen batches.
template <class Element, int kHeadDim, class Policy>
void run_fwd_sm90(const AttnArguments& a, cudaStream_t stream);

template <class Element, int kHeadDim, class Policy>
void run_bwd_sm80(const AttnArguments& a, cudaStream_t stream);

// Hopper backward (sm90/): hdim 64 and 128 with every score policy, hdim 256 with plain scores;
// dense or varlen batches.
template <class Element, int kHeadDim, class Policy>
void run_bwd_sm90(const AttnArguments& a, cudaStream_t stream);

// The dropout keep bits of every (batch, head, row, col), masked or not: dropout_mask_out.
void write_dropout_mask(const AttnArguments& a, uint8_t* mask, const int64_t (&stride)[4],
                        cudaStream_t stream);

// Backward scratch, carved from one buffer: dq_accum fp32 (dQ summed over key blocks, in chunks
// of block_m rows: sm80/bwd_pre_post.h's dq_chunk), per-row D = rowsum(dO * O) and LSE in log2
// units, fp32 in the same chunks of block_m rows (row_chunk), and for deterministic runs one int
// per (batch, head, query block): how many key blocks have added into that dQ block.
struct BwdWorkspace {
  size_t dq_accum, dsum, lse_log2, semaphore, bytes;  // byte offsets and the total
};
BwdWorkspace bwd_workspace_layout(int batch, int heads, int64_t total_q, int seqlen_q,
                                  int hdim_bucket);

}  // namespace flashkit::cuda::attn
