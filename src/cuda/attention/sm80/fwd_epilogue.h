// Forward epilogue, sm80-class: the one final rescale O / l, then O staged through shared
// memory for 16-byte coalesced stores, and the fp32 natural-log LSE of each row.
#pragma once
#include "cuda/attention/params.h"
#include "cuda/attention/seqlen.h"
#include "cuda/attention/sm80/tensor_ops.h"
#include "cuda/attention/tile_scheduler.h"

namespace flashkit::cuda::attn::sm80 {

template <class Mainloop>
struct FwdEpilogue {
  using Element = typename Mainloop::Element;
  static constexpr int kHeadDim = Mainloop::kHeadDim, kBlockM = Mainloop::kBlockM;
  static constexpr int kThreads = Mainloop::kThreads;
  using LayoutO = SmemTile<kBlockM, kHeadDim>;
  using Store = GmemStore<Element, kThreads, kHeadDim>;

  struct SharedStorage {
    alignas(128) Element o[cosize_v<LayoutO>];
  };
  struct Params {
    Element* o;
    Strides o_stride;
    float* lse;
    int64_t lse_batch_stride, lse_head_stride, lse_row_stride;
    int head_dim;
  };
  static Params to_params(const AttnArguments& a) {
    return {static_cast<Element*>(a.o), a.o_stride, a.lse, a.lse_batch_stride, a.lse_head_stride,
            a.lse_row_stride, a.head_dim};
  }

  // Needs the mainloop's shared memory to be free (its loop ends with a barrier).
  template <class AccO, class Softmax>
  __device__ static void store(const Params& p, SharedStorage& smem, const WorkTile& w,
                               const SeqBounds& sb, AccO& acc_o, Softmax& softmax, int tid) {
    typename Mainloop::TiledMma mma;
    auto thr_mma = mma.get_thread_slice(tid);
    Tensor o = rowcol_view(acc_o);
    softmax.finish(o);

    const int rows = sb.seqlen_q - w.block * kBlockM;
    Tensor tOc = rowcol_view(thr_mma.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kHeadDim>>{})));
    float* lse = p.lse + int64_t(w.batch) * p.lse_batch_stride + int64_t(w.head) * p.lse_head_stride +
                 (int64_t(sb.q_start) + int64_t(w.block) * kBlockM) * p.lse_row_stride;
    if (get<1>(tOc(0, 0)) == 0) {  // the quad's first thread writes its rows' LSE
      CUTE_UNROLL
      for (int r = 0; r < size<0>(o); ++r) {
        int row = get<0>(tOc(r, 0));
        if (row < rows) lse[row * p.lse_row_stride] = softmax.lse(r);
      }
    }

    Tensor rO = convert<Element>(acc_o);
    Tensor sO = make_tensor(make_smem_ptr(smem.o), LayoutO{});
    auto sts = make_tiled_copy_C(StsPair<Element>{}, mma);
    auto sts_thr = sts.get_thread_slice(tid);
    copy(sts, sts_thr.retile_S(rO), sts_thr.partition_D(sO));
    __syncthreads();

    Tensor mO = make_tensor(make_gmem_ptr(p.o + sb.q_offset(p.o_stride, w.batch, w.head)),
                            make_shape(sb.seqlen_q, Int<kHeadDim>{}), make_stride(p.o_stride.row, _1{}));
    Tensor gO = local_tile(mO, Shape<Int<kBlockM>, Int<kHeadDim>>{}, make_coord(w.block, 0));
    Store st;
    auto st_thr = st.get_thread_slice(tid);
    Tensor tOsO = st_thr.partition_S(sO);
    Tensor tOgO = st_thr.partition_D(gO);
    Tensor tOrO = make_fragment_like(tOgO);
    copy(st, tOsO, tOrO);
    store_tile(st, tOrO, tOgO, st_thr.partition_D(make_identity_tensor(Shape<Int<kBlockM>, Int<kHeadDim>>{})),
               rows, p.head_dim);
  }
};

}  // namespace flashkit::cuda::attn::sm80
