// Element offsets into a dense or paged KV cache, shared by the CPU decode and its fp64
// reference so both agree on the layout documented in include/flashkit/decode.h.
#pragma once
#include <cstdint>

#include "flashkit/tensor.h"

namespace flashkit::cpu {

struct KvLayout {
  int64_t s_outer = 0, s_token = 0, s_head = 0;  // cache strides: batch-or-page, token, head
  const int32_t* block_table = nullptr;          // null: dense
  int64_t bt_s0 = 0, bt_s1 = 0;
  int page_size = 1;

  KvLayout(const TensorView& cache, const TensorView& table)
      : s_outer(cache.stride[0]), s_token(cache.stride[1]), s_head(cache.stride[2]) {
    if (table.data) {
      block_table = table.ptr<const int32_t>();
      bt_s0 = table.stride[0];
      bt_s1 = table.stride[1];
      page_size = static_cast<int>(cache.shape[1]);
    }
  }
  // Offset of token j of sequence b, head h, dim 0.
  int64_t offset(int b, int64_t j, int h) const {
    if (!block_table) return b * s_outer + j * s_token + h * s_head;
    int64_t page = block_table[b * bt_s0 + (j / page_size) * bt_s1];
    return page * s_outer + (j % page_size) * s_token + h * s_head;
  }
};

}  // namespace flashkit::cpu
