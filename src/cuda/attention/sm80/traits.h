// CuTe building blocks of the sm80-class attention kernels (mma.sync m16n8k16, cp.async,
// ldmatrix): MMA atoms per dtype, swizzled shared-memory tiles and the tiled copies that fill
// them. Included by the forward and backward mainloops/epilogues in this folder.
#pragma once
#include <cute/tensor.hpp>
#include <cutlass/numeric_types.h>

namespace flashkit::cuda::attn::sm80 {

using namespace cute;

template <class Element>
struct MmaAtomOf;
template <>
struct MmaAtomOf<cutlass::half_t> {
  using type = MMA_Atom<SM80_16x8x16_F32F16F16F32_TN>;
};
template <>
struct MmaAtomOf<cutlass::bfloat16_t> {
  using type = MMA_Atom<SM80_16x8x16_F32BF16BF16F32_TN>;
};

// kWarpsM x kWarpsN warps; each warp covers 16 x 16 of the output per step, so B operands load
// with ldmatrix.x4.
template <class Element, int kWarpsM, int kWarpsN>
using TiledMmaOf = TiledMMA<typename MmaAtomOf<Element>::type,
                            Layout<Shape<Int<kWarpsM>, Int<kWarpsN>, _1>>,
                            Tile<Int<16 * kWarpsM>, Int<16 * kWarpsN>, _16>>;

// Row width (elements) of one swizzle atom: 64 (128 bytes) where the tile allows, else 32.
constexpr int atom_cols(int cols) { return cols % 64 == 0 ? 64 : 32; }

// A rows x cols tile, cols contiguous, XOR-swizzled in 16-byte chunks so that cp.async writes and
// ldmatrix reads (8 rows of 16 bytes) hit distinct banks.
template <int kCols>
using SmemAtom = decltype(composition(
    Swizzle<(atom_cols(kCols) == 64 ? 3 : 2), 3, 3>{},
    Layout<Shape<_8, Int<atom_cols(kCols)>>, Stride<Int<atom_cols(kCols)>, _1>>{}));

template <int kRows, int kCols>
using SmemTile = decltype(tile_to_shape(SmemAtom<kCols>{}, Shape<Int<kRows>, Int<kCols>>{}));

// kStages tiles back to back (mode 2 picks the stage).
template <int kRows, int kCols, int kStages>
using SmemTiles =
    decltype(tile_to_shape(SmemAtom<kCols>{}, Shape<Int<kRows>, Int<kCols>, Int<kStages>>{}));

// The transpose (cols x rows [x stages]) of a SmemTile(s) layout, for operands read with ldmatrix.trans.
template <class Layout_, int kRows, int kCols>
CUTE_HOST_DEVICE constexpr auto transposed(Layout_ l) {
  return composition(l, make_layout(Shape<Int<kCols>, Int<kRows>>{}, GenRowMajor{}));
}
template <class Layout_, int kRows, int kCols, int kStages>
CUTE_HOST_DEVICE constexpr auto transposed_staged(Layout_ l) {
  return composition(l, Layout<Shape<Int<kCols>, Int<kRows>, Int<kStages>>,
                               Stride<Int<kRows>, _1, Int<kRows * kCols>>>{});
}

// Global -> shared: 16-byte cp.async per thread, rows of kCols elements spread over kCols/8 threads;
// the ZFILL form writes zeros where the predicate is false (rows/columns past the tensor's end).
template <class Element, int kThreads, int kCols>
using GmemLoad = decltype(make_tiled_copy(
    Copy_Atom<SM80_CP_ASYNC_CACHEGLOBAL_ZFILL<uint128_t>, Element>{},
    Layout<Shape<Int<kThreads / (atom_cols(kCols) / 8)>, Int<atom_cols(kCols) / 8>>,
           Stride<Int<atom_cols(kCols) / 8>, _1>>{},
    Layout<Shape<_1, _8>>{}));

// Shared -> global (16-byte stores) with the same thread arrangement.
template <class Element, int kThreads, int kCols>
using GmemStore = decltype(make_tiled_copy(
    Copy_Atom<UniversalCopy<uint128_t>, Element>{},
    Layout<Shape<Int<kThreads / (atom_cols(kCols) / 8)>, Int<atom_cols(kCols) / 8>>,
           Stride<Int<atom_cols(kCols) / 8>, _1>>{},
    Layout<Shape<_1, _8>>{}));

template <class Element>
using LdsmN = Copy_Atom<SM75_U32x4_LDSM_N, Element>;   // operand stored K-contiguous
template <class Element>
using LdsmT = Copy_Atom<SM75_U16x8_LDSM_T, Element>;   // operand stored MN-contiguous
template <class Element>
using StsPair = Copy_Atom<UniversalCopy<uint32_t>, Element>;  // accumulator pairs -> smem

}  // namespace flashkit::cuda::attn::sm80
