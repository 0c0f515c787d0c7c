// The FP8 (e4m3) forward's two pieces outside the mainloop (bench/NOTES-attention.md "FP8
// forward"). wgmma reads 8-bit operands K-major only, so O += P V needs V^T (keys contiguous) as
// B and P as an A fragment in registers. P comes out of S = Q K^T as an fp32 accumulator whose
// columns a thread holds in a different order than the fp8 A fragment wants them; rather than
// shuffling P in registers, the key order inside every 32-key slice is permuted the same way in
// V^T (keys are summed over, so any order both operands share gives the same product):
// A-fragment position kappa = 16 h + 4 q + i (quad lane q, byte i of a register, half h) holds
// accumulator column 16 h + 8 (i / 2) + 2 q + i % 2 of that slice, and V^T's column kappa holds
// that key. transpose_v_fp8 writes this V^T once per call (b, kv_heads, hdim, keys rounded up to
// 128, zeros past the end so P = 0 never meets a NaN byte); its cost is one read and one write of
// V, ~2% of the forward at seqlen 8k.
#pragma once
#include <algorithm>
#include <cstdint>

#include <cuda_runtime.h>

#include <cute/tensor.hpp>

#include "cuda/attention/params.h"

namespace flashkit::cuda::attn::sm90 {

// The key held at V^T column `kappa` of a 32-key slice (see above).
__host__ __device__ constexpr int fp8_key_of(int kappa) {
  const int h = kappa / 16, q = (kappa / 4) % 4, i = kappa % 4;
  return 16 * h + 8 * (i / 2) + 2 * q + i % 2;
}
// Two fp32 to two e4m3 (round to nearest, saturating): `lo` in the low byte.
__device__ __forceinline__ uint32_t pack_e4m3x2(float lo, float hi) {
  uint16_t r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
}

// P (the S accumulator ((2, 2, BN / 8), 1, 1) of one thread, fp32) into the fp8 A fragment
// ((4, 2, 2), 1, BN / 32) of O += P V, in the permuted key order above: register r + 2 h of
// 32-key slice s holds accumulator columns (8 blocks) 4 s + 2 h and 4 s + 2 h + 1 of row half r.
template <class AccS, class FragA>
__device__ __forceinline__ void p_to_fp8_a(const AccS& acc, FragA& a) {
  constexpr int kSlices = decltype(cute::size(a))::value / 16;
  static_assert(decltype(cute::size(acc))::value == 16 * kSlices);
  uint32_t* reg = reinterpret_cast<uint32_t*>(cute::raw_pointer_cast(a.data()));
  CUTE_UNROLL
  for (int s = 0; s < kSlices; ++s) {
    CUTE_UNROLL
    for (int h = 0; h < 2; ++h) {
      CUTE_UNROLL
      for (int r = 0; r < 2; ++r) {
        const int c = 16 * s + 8 * h + 2 * r;  // (col 0, row half r, 8-block 4 s + 2 h)
        reg[4 * s + 2 * h + r] =
            pack_e4m3x2(acc(c), acc(c + 1)) | (pack_e4m3x2(acc(c + 4), acc(c + 5)) << 16);
      }
    }
  }
}

// V [b, sk, kv_heads, d] (8-bit, element strides, d contiguous) -> V^T [b, kv_heads, d, keys]
// (keys = fp8_vt_keys(sk)) in the permuted key order; varlen (cu_k set): V [total_k, kv_heads, d]
// -> V^T [kv_heads, d, keys = fp8_vt_varlen_cols] with sequence b's keys from column
// fp8_vt_start(b, cu_k[b]), every column up to the next sequence's start written (zeros past
// the end; the last sequence: kFp8VtTailBlocks past it, as far as its tiles read). One CTA per
// (128 keys, kv head, batch), 128 threads: the keys' rows into shared memory (16-byte loads, zeros past sk); then a thread
// takes 4 head-dim rows x 32 keys: 32 word reads (4 bytes of d each), 4 x 4 byte transposes with
// byte permutes (8 PRMT per 4 keys) and two 16-byte stores per V^T row. (v1 assembled bytes one
// at a time and ran ALU-bound at ~1.3 TB/s.)
template <int kHeadDim>
__global__ void __launch_bounds__(128) transpose_v_fp8(const uint8_t* __restrict__ v,
                                                       int64_t batch_stride, int64_t row_stride,
                                                       int64_t head_stride, int seqlen_k,
                                                       const int* __restrict__ cu_k, int batch,
                                                       int head_dim, uint8_t* __restrict__ vt,
                                                       int64_t keys) {
  constexpr int kKeys = 128, kRowWords = kHeadDim / 4 + 4;  // padded rows: fewer bank conflicts
  __shared__ uint32_t tile[kKeys * kRowWords];
  const int k0 = blockIdx.x * kKeys, h = blockIdx.y, b = blockIdx.z;
  const uint8_t* src = v + b * batch_stride + h * head_stride;
  uint8_t* dst = vt + ((int64_t(b) * gridDim.y + h) * head_dim) * keys + k0;
  if (cu_k) {  // varlen: this sequence's keys and its columns up to the next one's start
    const int start = cu_k[b];
    seqlen_k = cu_k[b + 1] - start;
    const int64_t col = fp8_vt_start(b, start);
    const int64_t next = b + 1 < batch
                             ? fp8_vt_start(b + 1, cu_k[b + 1])
                             : std::min(keys, col + 128 * (seqlen_k / 128 + kFp8VtTailBlocks));
    if (col + k0 >= next) return;
    src = v + int64_t(start) * row_stride + h * head_stride;
    dst = vt + int64_t(h) * head_dim * keys + col + k0;
  }
  constexpr int kPieces = kHeadDim / 16;
  for (int i = threadIdx.x; i < kKeys * kPieces; i += 128) {
    const int key = i / kPieces, piece = i % kPieces;
    uint4 x = make_uint4(0, 0, 0, 0);
    if (k0 + key < seqlen_k && piece * 16 < head_dim)
      x = *reinterpret_cast<const uint4*>(src + (k0 + key) * row_stride + piece * 16);
    *reinterpret_cast<uint4*>(tile + key * kRowWords + piece * 4) = x;
  }
  __syncthreads();
  const int quads = head_dim / 4;  // 4-row groups of d
  for (int task = threadIdx.x; task < quads * (kKeys / 32); task += 128) {
    const int d4 = task % quads, slice = task / quads;  // neighbours read neighbouring words
    uint32_t out[4][8];  // [d within the quad][word of the 32-key slice]
    CUTE_UNROLL
    for (int j = 0; j < 8; ++j) {  // keys 4 j .. 4 j + 3 of the slice (kappa order)
      uint32_t w[4];
      CUTE_UNROLL
      for (int t = 0; t < 4; ++t)
        w[t] = tile[(slice * 32 + fp8_key_of(4 * j + t)) * kRowWords + d4];
      const uint32_t x0 = __byte_perm(w[0], w[1], 0x5140), x1 = __byte_perm(w[0], w[1], 0x7362);
      const uint32_t y0 = __byte_perm(w[2], w[3], 0x5140), y1 = __byte_perm(w[2], w[3], 0x7362);
      out[0][j] = __byte_perm(x0, y0, 0x5410);
      out[1][j] = __byte_perm(x0, y0, 0x7632);
      out[2][j] = __byte_perm(x1, y1, 0x5410);
      out[3][j] = __byte_perm(x1, y1, 0x7632);
    }
    CUTE_UNROLL
    for (int r = 0; r < 4; ++r) {
      uint4* row = reinterpret_cast<uint4*>(dst + int64_t(4 * d4 + r) * keys + slice * 32);
      row[0] = make_uint4(out[r][0], out[r][1], out[r][2], out[r][3]);
      row[1] = make_uint4(out[r][4], out[r][5], out[r][6], out[r][7]);
    }
  }
}

// Launches transpose_v_fp8 for a problem's V into a.vt (varlen: a.seqlen_k the longest sequence;
// the grid covers it plus the gap blocks up to the next sequence's start).
template <int kHeadDim>
void transpose_v_fp8_launch(const AttnArguments& a, cudaStream_t stream) {
  const bool varlen = a.cu_seqlens_k != nullptr;
  const int64_t keys = fp8_vt_cols(varlen, a.batch, a.seqlen_k, a.total_k);
  const unsigned blocks = unsigned(fp8_vt_keys(a.seqlen_k) / 128) + (varlen ? kFp8VtTailBlocks : 0);
  transpose_v_fp8<kHeadDim><<<dim3(blocks, a.kv_heads, a.batch), 128, 0, stream>>>(
      static_cast<const uint8_t*>(a.v), a.v_stride.batch, a.v_stride.row, a.v_stride.head,
      a.seqlen_k, a.cu_seqlens_k, a.batch, a.head_dim,
      static_cast<uint8_t*>(const_cast<void*>(a.vt)), keys);
}

}  // namespace flashkit::cuda::attn::sm90
