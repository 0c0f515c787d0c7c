// Tile sizes of the attention kernels: one constexpr function of (pass, hdim bucket, dtype,
// causal), read by the sm80 launchers (sm80/*_launch.h), and the Hopper forward's (sm90/). The numbers
// are chosen for H100/H200 (228 KB smem, 64K registers per SM); see bench/NOTES-attention.md.
#pragma once
#include "flashkit/tensor.h"

namespace flashkit::cuda::attn {

enum class Pass { fwd, bwd };

struct TileConfig {
  int block_m;  // query rows per CTA (fwd) / per inner step (bwd)
  int block_n;  // key rows per inner step (fwd) / per CTA (bwd)
  int warps;
  // sm80-class forward: K/V buffers of each kind (2: a ring; 1: FA2's one K and one V buffer).
  int stages = 2;
};

// Head-dim buckets: every multiple of 8 in [32, 256] runs in the smallest bucket that holds it,
// the tail zero-padded in shared memory.
constexpr int hdim_bucket(int d) {
  return d <= 32 ? 32 : d <= 64 ? 64 : d <= 96 ? 96 : d <= 128 ? 128 : d <= 192 ? 192 : 256;
}

constexpr TileConfig tile_config(Pass pass, int hdim, DType dtype, bool causal) {
  (void)dtype;   // fp16 and bf16 share tile sizes on sm80-class MMA
  (void)causal;  // causal skips tiles but wants the same shapes
  if (pass == Pass::fwd) {
    // Split-Q: 4 warps of 16-row MMA tiles own block_m/4 rows each; 8 warps past hdim 128 keep the
    // O accumulator (block_m * hdim / threads floats) near 128 registers per thread.
    if (hdim <= 64) return {128, 128, 4};
    if (hdim <= 128) return {128, 64, 4};
    return {128, 64, 8};
  }
  // Backward: one CTA per K/V block of block_n rows; dK and dV (2 * block_n * hdim fp32) live in
  // registers of 8 warps, so the block shrinks with the head dim.
  if (hdim <= 64) return {128, 128, 8};
  if (hdim <= 128) return {64, 128, 8};
  return {64, 64, 8};
}

// The sm80-class forward's tile: tile_config's, except plain scores (causal or not) at hdim 256,
// which take FlashAttention-2's shape there: 64 x 64 on 4 warps with one K and one V buffer
// (96 KB, two CTAs an SM; sm80/fwd_mainloop.h), +5-10% over 128 x 64 on 8 warps with two stages
// (bench/NOTES-attention.md, session 35). The score modifiers keep the 8-warp tile.
constexpr TileConfig sm80_fwd_tile(int hdim, DType dtype, bool causal, bool plain) {
  if (hdim > 192 && plain) return {64, 64, 4, 1};
  return tile_config(Pass::fwd, hdim, dtype, causal);
}

// The Hopper forward (sm90/): block_m / 64 consumer warpgroups of 64 query rows each, key tiles
// of block_n rows in a TMA ring `stages` deep (smem: Q, O and 2 * stages K/V tiles; at hdim 128
// and 2 stages 192 KB of the 227 KB), GEMMs issued in turns between the warpgroups (`pingpong`).
// hdim 64 with plain scores, causal or not, takes 3 warpgroups (192 rows, 160 registers a
// thread): its softmax weighs more per FLOP (dense measured +16-19%; bench/NOTES-attention.md).
// hdim 256 (plain scores only) stages O in Q's buffer (`o_in_q`): Q 64 KB + 2 stages of 80-key
// K and V tiles 160 KB = 224 KB, where a separate O tile (64 KB more) would not fit.
struct Sm90FwdTiles {
  int block_m, block_n, stages;
  bool pingpong;
  bool o_in_q = false;
};
// Score modifiers (`plain` false: GeneralScores) take 128 rows at hdim 64 too: 160 registers a
// thread leave them no room, and block masks need tiles inside one 128 x 128 mask block. A window
// alone, softcap alone or ALiBi alone (`slim`: no per-score state carried across scores) takes
// plain's 192 rows (bench/NOTES-attention.md: window 104 B of spills, forward 12% faster than on
// 128, "Window v6"; softcap 104 B, -9%, "Softcap v8"; ALiBi 152 B, -20%, "ALiBi v9").
constexpr Sm90FwdTiles sm90_fwd_tiles(int hdim, bool plain, bool slim) {
  if (hdim <= 64)
    return plain || slim ? Sm90FwdTiles{192, 128, 3, true} : Sm90FwdTiles{128, 128, 3, true};
  if (hdim <= 128) return {128, 128, 2, true};
  // hdim 256: score modifiers (window, ALiBi) take 64-key tiles: at 80 their state spills.
  return plain ? Sm90FwdTiles{128, 80, 2, true, true} : Sm90FwdTiles{128, 64, 2, true, true};
}

// The FP8 forward (plain scores): half the bytes of a 16-bit tile, so deeper rings fit beside the
// bf16 O tile. hdim 64: 192 x 128 x 3 stages (Q 12 + K/V 48 + O 24 KB). hdim 128, by measurement
// (bench/NOTES-attention.md "FP8"; the fp8 GEMMs are half as long as bf16's, so a warpgroup's
// softmax hides less well under the others'): dense takes three consumer warpgroups on 96-key
// tiles (each softmax hides under two GEMMs; 24 + 4 x 2 x 12 + 48 = 168 KB), causal two on 192-key
// tiles (16 + 3 x 2 x 24 + 32 = 192 KB), where three lose on the diagonal tiles. hdim 256:
// 128 x 128 x 2 (32 + 128 + 64 = 224 KB).
constexpr Sm90FwdTiles sm90_fwd_tiles_fp8(int hdim, bool causal) {
  if (hdim <= 64) return {192, 128, 3, true};
#ifdef AB_FP8_BM  // A/B harness: the dense hdim 128 tile
  if (hdim <= 128 && !causal) return Sm90FwdTiles{AB_FP8_BM, AB_FP8_BN, AB_FP8_ST, true};
#endif
  if (hdim <= 128) return causal ? Sm90FwdTiles{128, 192, 3, true} : Sm90FwdTiles{192, 96, 4, true};
  return {128, 128, 2, true};
}

// The Hopper backward (sm90/bwd_*.h): key blocks of 128 rows (64 per consumer warpgroup), query
// blocks streamed `stages` deep. block_m is the sm80 backward's, so both share the scratch
// layout (dq_chunk / row_chunk blocks) and the dQ conversion. Smem: K, V, 2 stages of Q and
// dO, two dS^T buffers and one staged fp32 dQ block: 192 KB at hdim 128 (block_m 64), 192 KB
// at hdim 64 (block_m 128). hdim 256: 64-key blocks shared by both warpgroups, one owning dV and
// one dK (128 accumulator registers each; 128 keys would need 256), K, V, 2 stages of Q and dO and
// two P^T hand-over buffers: 208 KB; dQ comes from a separate row-parallel pass (sm90/bwd_dq.h).
struct Sm90BwdTiles {
  int block_m, block_n, stages;
};
constexpr Sm90BwdTiles sm90_bwd_tiles(int hdim) {
  return {tile_config(Pass::bwd, hdim, DType::bf16, false).block_m, hdim <= 128 ? 128 : 64, 2};
}

}  // namespace flashkit::cuda::attn
