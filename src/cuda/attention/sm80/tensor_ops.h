// Register-tile operations shared by the sm80 attention mainloops: MMA over operands streamed
// from shared memory with ldmatrix (one k-slice ahead), accumulator <-> (row, col) views,
// predicated cp.async tile loads, and dtype conversion of fragments.
#pragma once
#include <cutlass/numeric_conversion.h>

#include "cuda/attention/sm80/traits.h"

namespace flashkit::cuda::attn::sm80 {

// acc += A * B^T with both operands read from shared memory. tCrA/tCrB are the MMA fragments,
// tCsA/tCsB the ldmatrix-partitioned smem views; slice k+1 loads while slice k multiplies.
template <class TiledMma, class Acc, class FragA, class FragB, class SmemA, class SmemB,
          class CopyA, class CopyB>
__device__ __forceinline__ void gemm_ss(TiledMma& mma, Acc& acc, FragA& tCrA, FragB& tCrB,
                                        const SmemA& tCsA, const SmemB& tCsB, const CopyA& copy_a,
                                        const CopyB& copy_b) {
  auto tCrA_v = copy_a.get_slice(0).retile_D(tCrA);  // retile depends only on the layout
  auto tCrB_v = copy_b.get_slice(0).retile_D(tCrB);
  copy(copy_a, tCsA(_, _, 0), tCrA_v(_, _, 0));
  copy(copy_b, tCsB(_, _, 0), tCrB_v(_, _, 0));
  CUTE_UNROLL
  for (int k = 0; k < size<2>(tCrA); ++k) {
    if (k + 1 < size<2>(tCrA)) {
      copy(copy_a, tCsA(_, _, k + 1), tCrA_v(_, _, k + 1));
      copy(copy_b, tCsB(_, _, k + 1), tCrB_v(_, _, k + 1));
    }
    gemm(mma, tCrA(_, _, k), tCrB(_, _, k), acc);
  }
}

// acc += A * B^T with A already in registers (P in the forward pass).
template <class TiledMma, class Acc, class FragA, class FragB, class SmemB, class CopyB>
__device__ __forceinline__ void gemm_rs(TiledMma& mma, Acc& acc, const FragA& tCrA, FragB& tCrB,
                                        const SmemB& tCsB, const CopyB& copy_b) {
  auto tCrB_v = copy_b.get_slice(0).retile_D(tCrB);
  copy(copy_b, tCsB(_, _, 0), tCrB_v(_, _, 0));
  CUTE_UNROLL
  for (int k = 0; k < size<2>(tCrA); ++k) {
    if (k + 1 < size<2>(tCrA)) copy(copy_b, tCsB(_, _, k + 1), tCrB_v(_, _, k + 1));
    gemm(mma, tCrA(_, _, k), tCrB(_, _, k), acc);
  }
}

// m16n8 accumulator layout ((2 cols, 2 rows), MMA_M, MMA_N) viewed as (rows, cols):
// ((2, MMA_M), (2, MMA_N)). Each row of the tile is then spread over the 4 threads of a quad.
template <class Layout_>
CUTE_HOST_DEVICE constexpr auto rowcol(Layout_ l) {
  return make_layout(make_layout(get<0, 1>(l), get<1>(l)), make_layout(get<0, 0>(l), get<2>(l)));
}
template <class T>
CUTE_HOST_DEVICE auto rowcol_view(T&& t) {
  return make_tensor(t.data(), rowcol(t.layout()));
}

// Two adjacent m16n8 accumulator tiles hold exactly one m16k16 A-operand tile: reshape
// ((2,2), MMA_M, MMA_N) to ((2,2,2), MMA_M, MMA_N/2) so a score tile feeds the next MMA directly.
template <class Layout_>
CUTE_HOST_DEVICE constexpr auto acc_as_a(Layout_ l) {
  auto d = logical_divide(l, Shape<Underscore, Underscore, _2>{});  // ((2,2), M, (2, N/2))
  return make_layout(make_layout(get<0>(d), get<2, 0>(d)), get<1>(d), get<2, 1>(d));
}

// A register fragment converted as one array (cvt.rn.bf16x2.f32 / f16x2: two elements per
// instruction instead of a convert per element and a pack).
template <class To, class Frag>
__device__ __forceinline__ auto convert(const Frag& f) {
  using From = typename Frag::value_type;
  constexpr int N = decltype(size(f))::value;
  cutlass::NumericArrayConverter<To, From, N> conv;
  auto r = make_tensor<To>(f.layout());
  *reinterpret_cast<cutlass::Array<To, N>*>(r.data()) =
      conv(*reinterpret_cast<const cutlass::Array<From, N>*>(f.data()));
  return r;
}

// Predicated tile load: element (row, col) of the tile is copied when row < rows && col < cols,
// zero-filled otherwise. `coord` is the copy-partitioned identity tensor of the tile.
template <class TiledCopy, class Src, class Dst, class Coord>
__device__ __forceinline__ void load_tile(const TiledCopy& tc, const Src& src, Dst&& dst,
                                          const Coord& coord, int rows, int cols) {
  CUTE_UNROLL
  for (int m = 0; m < size<1>(src); ++m) {
    CUTE_UNROLL
    for (int k = 0; k < size<2>(src); ++k) {
      bool ok = get<0>(coord(0, m, k)) < rows && get<1>(coord(0, m, k)) < cols;
      copy(tc.with(ok), src(_, m, k), dst(_, m, k));
    }
  }
}

// Predicated store of a staged tile (smem -> gmem), skipping rows/cols past the tensor's end.
template <class TiledCopy, class Src, class Dst, class Coord>
__device__ __forceinline__ void store_tile(const TiledCopy& tc, const Src& src, Dst&& dst,
                                           const Coord& coord, int rows, int cols) {
  CUTE_UNROLL
  for (int m = 0; m < size<1>(src); ++m) {
    CUTE_UNROLL
    for (int k = 0; k < size<2>(src); ++k) {
      if (get<0>(coord(0, m, k)) < rows && get<1>(coord(0, m, k)) < cols)
        copy(tc, src(_, m, k), dst(_, m, k));
    }
  }
}

// Sum / max over the 4 threads of a quad (the threads sharing one accumulator row).
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

}  // namespace flashkit::cuda::attn::sm80
