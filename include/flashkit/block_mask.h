// Builders for the common block-sparse patterns of attention_forward/backward's block_mask
// (AttentionOptions::block_mask: u8 [batch|1, heads|1, ceil(sq/block_q), ceil(sk/block_k)], 1 =
// compute the block, 0 = skip it). They fill a CPU u8 tensor of 2 to 4 dims; the last two are the
// (query block, key block) grid, every leading index gets the same pattern.
#pragma once
#include "flashkit/tensor.h"

namespace flashkit {

// Local + global (Longformer/BigBird style): query block i keeps key block j when j is within
// `local` blocks of i's diagonal (|j - (i + cols - rows)| < local, bottom-right aligned like
// causal), when j < global (global keys: the first blocks every query sees) or i < global (global
// queries see every key). causal also drops blocks wholly above the aligned diagonal.
void block_mask_local_global(const TensorView& mask, int local, int global, bool causal = false);

// Butterfly (Pixelated Butterfly, used in FlashAttention's block-sparse section): query block i
// keeps key block j when j == i or i XOR j is a power of two (log2 of the grid's blocks per row).
// Rows and cols are aligned at the top-left; requires a square grid.
void block_mask_butterfly(const TensorView& mask);

// Fraction of kept blocks in a mask (what a block-sparse run's time should scale with).
double block_mask_density(const TensorView& mask);

}  // namespace flashkit
