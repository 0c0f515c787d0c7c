// Backward epilogue, sm80-class: dK (times the softmax scale) and dV of one K/V block, staged
// through shared memory for 16-byte coalesced, row-predicated stores.
#pragma once
#include "cuda/attention/params.h"
#include "cuda/attention/seqlen.h"
#include "cuda/attention/sm80/tensor_ops.h"
#include "cuda/attention/tile_scheduler.h"

namespace flashkit::cuda::attn::sm80 {

template <class Mainloop>
struct BwdEpilogue {
  using Element = typename Mainloop::Element;
  static constexpr int kHeadDim = Mainloop::kHeadDim, kBlockN = Mainloop::kBlockN;
  using LayoutKV = typename Mainloop::LayoutKV;
  using Store = GmemStore<Element, Mainloop::kThreads, kHeadDim>;

  struct SharedStorage {
    alignas(128) Element dk[cosize_v<LayoutKV>];
    alignas(128) Element dv[cosize_v<LayoutKV>];
  };
  struct Params {
    Element *dk, *dv;
    Strides dk_stride, dv_stride;
    int head_dim;
    float scale;
  };
  static Params to_params(const AttnArguments& a) {
    return {static_cast<Element*>(a.dk), static_cast<Element*>(a.dv), a.dk_stride, a.dv_stride,
            a.head_dim, a.softmax_scale};
  }

  template <class Acc>
  __device__ static void store(const Params& p, SharedStorage& smem, const WorkTile& w,
                               const SeqBounds& sb, Acc& acc_dk, Acc& acc_dv, int tid) {
    typename Mainloop::MmaKV mma;
    CUTE_UNROLL
    for (int i = 0; i < size(acc_dk); ++i) acc_dk(i) *= p.scale;
    Tensor sdK = make_tensor(make_smem_ptr(smem.dk), LayoutKV{});
    Tensor sdV = make_tensor(make_smem_ptr(smem.dv), LayoutKV{});
    auto sts = make_tiled_copy_C(StsPair<Element>{}, mma);
    auto sts_thr = sts.get_thread_slice(tid);
    copy(sts, sts_thr.retile_S(convert<Element>(acc_dk)), sts_thr.partition_D(sdK));
    copy(sts, sts_thr.retile_S(convert<Element>(acc_dv)), sts_thr.partition_D(sdV));
    __syncthreads();

    auto tile = Shape<Int<kBlockN>, Int<kHeadDim>>{};
    const int rows = sb.seqlen_k - w.block * kBlockN;
    Store st;
    auto st_thr = st.get_thread_slice(tid);
    Tensor c = st_thr.partition_D(make_identity_tensor(tile));
    auto write = [&](Element* base, const Strides& s, auto& sX) {
      Tensor mX = make_tensor(make_gmem_ptr(base + sb.k_offset(s, w.batch, w.head)),
                              make_shape(sb.seqlen_k, Int<kHeadDim>{}), make_stride(s.row, _1{}));
      Tensor tXgX = st_thr.partition_D(local_tile(mX, tile, make_coord(w.block, 0)));
      Tensor tXrX = make_fragment_like(tXgX);
      copy(st, st_thr.partition_S(sX), tXrX);
      store_tile(st, tXrX, tXgX, c, rows, p.head_dim);
    };
    write(p.dk, p.dk_stride, sdK);
    write(p.dv, p.dv_stride, sdV);
  }
};

}  // namespace flashkit::cuda::attn::sm80
