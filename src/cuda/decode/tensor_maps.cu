// tensor_maps.h: cuTensorMapEncodeTiled reached through the runtime's driver entry point (so the
// library needs no -lcuda link), looked up once per process.
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include "cuda/decode/tensor_maps.h"

namespace flashkit::cuda::decoding {

namespace {

PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      f = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

bool encode(CUtensorMap* map, const TensorView& t, int box, int l2_promo) {
  const PFN_cuTensorMapEncodeTiled_v12000 fn = encode_fn();
  if (!fn || t.stride[3] != 1) return false;
  const cuuint64_t es = 2;  // bf16 / fp16
  // Innermost first: dim, head, token, outer (batch, or page when paged).
  const cuuint64_t dims[4] = {
      static_cast<cuuint64_t>(t.shape[3]), static_cast<cuuint64_t>(t.shape[2]),
      static_cast<cuuint64_t>(t.shape[1]), static_cast<cuuint64_t>(t.shape[0])};
  const cuuint64_t strides[3] = {static_cast<cuuint64_t>(t.stride[2]) * es,
                                 static_cast<cuuint64_t>(t.stride[1]) * es,
                                 static_cast<cuuint64_t>(t.stride[0]) * es};
  const cuuint32_t boxes[4] = {64, 1, static_cast<cuuint32_t>(box), 1};
  const cuuint32_t steps[4] = {1, 1, 1, 1};
  const CUtensorMapDataType type =
      t.dtype == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  // L2 fills no wider than a token's row of one head: at hdim 64 (128-byte rows, the next head's
  // row beside it) 256-byte promotion would fetch twice the bytes the CTA reads.
  CUtensorMapL2promotion promote =
      t.shape[3] * es >= 256 ? CU_TENSOR_MAP_L2_PROMOTION_L2_256B : CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
  switch (l2_promo) {  // an override for A/B runs; anything else keeps the rule above
    case 0: promote = CU_TENSOR_MAP_L2_PROMOTION_NONE; break;
    case 64: promote = CU_TENSOR_MAP_L2_PROMOTION_L2_64B; break;
    case 128: promote = CU_TENSOR_MAP_L2_PROMOTION_L2_128B; break;
    case 256: promote = CU_TENSOR_MAP_L2_PROMOTION_L2_256B; break;
  }
  // Out-of-bounds rows (past the cache's capacity) arrive as zeros.
  return fn(map, type, 4, t.data, dims, strides, boxes, steps, CU_TENSOR_MAP_INTERLEAVE_NONE,
            CU_TENSOR_MAP_SWIZZLE_128B, promote,
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace

int tma_box_tokens(bool paged, int page_size, int stage_tokens, int lean_tile) {
  if (!paged) return stage_tokens;
  const int box = page_size < stage_tokens ? page_size : stage_tokens;
  const bool fits =
      box % 8 == 0 && stage_tokens % box == 0 && page_size % box == 0 && lean_tile % box == 0;
  return fits ? box : 0;
}

bool encode_kv_maps(DecodeParams& p, const TensorView& k, const TensorView& v, int box,
                    int l2_promo) {
  return box > 0 && encode(&p.k_map, k, box, l2_promo) && encode(&p.v_map, v, box, l2_promo);
}

}  // namespace flashkit::cuda::decoding
