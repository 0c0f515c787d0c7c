// The K/V tensor maps of the sm_90 decode loads (TMA): how many cache rows one box holds for a
// cache layout, and the maps themselves, encoded on the host per call (no device work, so a run
// stays capturable in a CUDA graph) and passed to the kernel inside its __grid_constant__ params.
#pragma once
#include "cuda/decode/params.h"
#include "flashkit/tensor.h"

namespace flashkit::cuda::decoding {

// Tokens per TMA box, or 0 where the boxes cannot follow the cache and the cp.async path runs.
// Dense: a whole stage. Paged: min(stage, page) when that divides the stage, the page and the
// LeanTile (every chunk then starts on a box boundary inside one page) and is a multiple of 8
// (a whole number of 128-byte-swizzle atoms, so each box lands 1024-byte aligned).
int tma_box_tokens(bool paged, int page_size, int stage_tokens, int lean_tile);

// Encodes p.k_map / p.v_map over [outer, token, head, dim] of k / v with boxes of `box` tokens x 64
// dims and 128-byte swizzle; false (maps unusable) if the driver refuses the layout. L2 fills are
// one head's row (128 B at hdim 64, else 256 B) unless l2_promo is 0, 64, 128 or 256 (bytes).
bool encode_kv_maps(DecodeParams& p, const TensorView& k, const TensorView& v, int box,
                    int l2_promo = -1);

}  // namespace flashkit::cuda::decoding
