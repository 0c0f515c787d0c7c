// CuTe building blocks of the sm90 (Hopper) attention kernels: GMMA-canonical swizzled shared
// memory tiles (what TMA writes and wgmma reads), the warpgroup MMAs for S = Q K^T (both operands
// in smem) and O += P V (P from registers, V read MN-major), and the accumulator views they need.
#pragma once
#include <type_traits>

#include <cute/tensor.hpp>
#include <cutlass/numeric_types.h>

namespace flashkit::cuda::attn::sm90 {

using namespace cute;

// The widest GMMA swizzle atom a row of kCols elements fills: 128-byte rows (every 16-bit tile,
// fp8 rows of 128 / 256), 64 (fp8 rows of 64 or 192) or 32 (fp8 V^T tiles of 224 keys).
template <class Element, int kCols>
using SwizzleAtom = std::conditional_t<
    (kCols * sizeof(Element)) % 128 == 0, GMMA::Layout_K_SW128_Atom<Element>,
    std::conditional_t<(kCols * sizeof(Element)) % 64 == 0, GMMA::Layout_K_SW64_Atom<Element>,
                       GMMA::Layout_K_SW32_Atom<Element>>>;
// A rows x cols tile (x stages), cols contiguous (K-major for wgmma) in swizzled rows: the one
// layout TMA writes, wgmma reads and the TMA store reads back.
template <class Element, int kRows, int kCols, int kStages = 1>
using SmemTiles = decltype(tile_to_shape(SwizzleAtom<Element, kCols>{},
                                         Shape<Int<kRows>, Int<kCols>, Int<kStages>>{}));
template <class Element, int kRows, int kCols>
using SmemTile = decltype(tile_to_shape(SwizzleAtom<Element, kCols>{},
                                        Shape<Int<kRows>, Int<kCols>>{}));

// The (cols, rows, stages) view of a staged tile: V as the B operand of O += P V, whose reduction
// dimension (keys) is then the strided one (MN-major), which wgmma reads for 16-bit types.
template <class Layout_, int kRows, int kCols, int kStages>
CUTE_HOST_DEVICE constexpr auto transposed_staged(Layout_ l) {
  return composition(l, make_ordered_layout(Shape<Int<kCols>, Int<kRows>, Int<kStages>>{},
                                            Step<_2, _1, _3>{}));
}

// kWarpgroups warpgroups stacked along M, each running 64-row wgmma atoms.
template <class Element, int kWarpgroups, int kM, int kN, int kK>
using TiledMmaSS = decltype(make_tiled_mma(
    GMMA::ss_op_selector<Element, Element, float, Shape<Int<kM / kWarpgroups>, Int<kN>, Int<kK>>>(),
    Layout<Shape<Int<kWarpgroups>, _1, _1>>{}));
// B is read MN-major (V as stored) by default; 8-bit types allow K-major only (the fp8
// forward's V^T).
template <class Element, int kWarpgroups, int kM, int kN, int kK,
          GMMA::Major kMajorB = GMMA::Major::MN>
using TiledMmaRS = decltype(make_tiled_mma(
    GMMA::rs_op_selector<Element, Element, float, Shape<Int<kM / kWarpgroups>, Int<kN>, Int<kK>>,
                         GMMA::Major::K, kMajorB>(),
    Layout<Shape<Int<kWarpgroups>, _1, _1>>{}));

// wgmma accumulator ((2 cols, 2 rows, N/8 col blocks), MMA_M, MMA_N) viewed as (rows, cols):
// ((2, MMA_M), (2, N/8, MMA_N)). A row lives in the 4 threads of a quad, as on sm80.
template <class Layout_>
CUTE_HOST_DEVICE constexpr auto rowcol(Layout_ l) {
  return make_layout(make_layout(get<0, 1>(l), get<1>(l)),
                     make_layout(get<0, 0>(l), get<0, 2>(l), get<2>(l)));
}
template <class T>
CUTE_HOST_DEVICE auto rowcol_view(T&& t) {
  return make_tensor(t.data(), rowcol(t.layout()));
}

// A score accumulator ((2,2,N/8), M, 1) holds, in the same registers, the A operand of the next
// wgmma over k = N: ((2,2,2), M, N/16), every two column blocks forming one 16-wide k slice.
template <class Layout_>
CUTE_HOST_DEVICE constexpr auto acc_as_a(Layout_ l) {
  auto v = logical_divide(get<0, 2>(l), _2{});  // (2, N/16)
  return make_layout(make_layout(get<0, 0>(l), get<0, 1>(l), get<0>(v)), get<1>(l),
                     coalesce(make_layout(get<1>(v), get<2>(l))));
}

// C (+)= A B on the tensor cores, issued by the whole warpgroup and committed as one batch; the
// caller waits with warpgroup_wait<N>() (and fences a register A operand around the call).
// kZeroInit starts C from zero instead of accumulating.
template <bool kZeroInit, class TiledMma, class FragA, class FragB, class Acc>
__device__ __forceinline__ void wgmma(TiledMma& mma, const FragA& a, const FragB& b, Acc& c) {
  warpgroup_fence_operand(c);
  warpgroup_arrive();
  mma.accumulate_ = kZeroInit ? GMMA::ScaleOut::Zero : GMMA::ScaleOut::One;
  CUTE_UNROLL
  for (int k = 0; k < size<2>(a); ++k) {
    gemm(mma, a(_, _, k), b(_, _, k), c);
    mma.accumulate_ = GMMA::ScaleOut::One;
  }
  warpgroup_commit_batch();
  warpgroup_fence_operand(c);
}

// Stores a tile from shared memory to global memory with 16-byte copies (kHeadDim / 8 threads a
// row, kThreads threads), skipping rows >= `rows` and columns >= `head_dim`: varlen tiles end
// inside their sequence, where a TMA store of the whole box would overwrite the next one's rows.
template <class Element, int kThreads, int kHeadDim, class Tile, class SmemTile, class GmemTile>
__device__ __forceinline__ void store_tile_rows(const SmemTile& s, GmemTile&& g, int rows,
                                                int head_dim, int tid) {
  using Threads =
      Layout<Shape<Int<kThreads * 8 / kHeadDim>, Int<kHeadDim / 8>>, Stride<Int<kHeadDim / 8>, _1>>;
  auto st = make_tiled_copy(Copy_Atom<UniversalCopy<uint128_t>, Element>{}, Threads{},
                            Layout<Shape<_1, _8>>{});
  auto st_thr = st.get_thread_slice(tid);
  Tensor ts = st_thr.partition_S(s);
  Tensor tg = st_thr.partition_D(g);
  Tensor tc = st_thr.partition_D(make_identity_tensor(Tile{}));
  CUTE_UNROLL
  for (int r = 0; r < size<1>(tg); ++r) {
    if (get<0>(tc(0, r, 0)) >= rows) continue;
    CUTE_UNROLL
    for (int c = 0; c < size<2>(tg); ++c)
      if (get<1>(tc(0, r, c)) < head_dim) copy(st, ts(_, r, c), tg(_, r, c));
  }
}

// Thread tid's part of a tiled MMA's C fragment, already in the 16-bit Element, into the swizzled
// shared-memory tile s by stmatrix (FA3's epilogue: 8x8 tiles of 16-byte rows a warp
// instruction). A plain copy through the swizzled pointer comes out as 4-byte generic stores with
// ~6 integer instructions of address arithmetic each (bench/NOTES-attention.md, session 40).
template <class Element, class TiledMma, class Frag, class STile>
__device__ __forceinline__ void stsm_tile(const TiledMma& mma, int tid, const Frag& frag,
                                          STile&& s) {
  auto stsm = make_tiled_copy_C(Copy_Atom<SM90_U32x4_STSM_N, Element>{}, mma);
  auto thr = stsm.get_thread_slice(tid);
  copy(stsm, thr.retile_S(frag), thr.partition_D(s));
}

}  // namespace flashkit::cuda::attn::sm90
