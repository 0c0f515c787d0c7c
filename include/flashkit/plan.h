// DecodePlan: the host-computed schedule `decode` runs (plan -> run). make_decode_plan() turns a
// problem, the per-sequence KV lengths and the device's co-resident CTA count into one of four
// schedules: single (one CTA per output tile), split-KV (FlashDecoding's splits, merged in the
// kernel), FlashDecoding (the same splits and a separate merge kernel, the paper's baseline) or
// Lean (LeanAttention stream-K). A plan is plain data, reusable across layers and decode steps.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "flashkit/tensor.h"

namespace flashkit {

enum class DecodeSchedule : uint8_t {
  automatic,       // resolved by make_decode_plan to one of the four below
  single,          // one CTA per (sequence, KV head, row block) walking its whole cache
  split_kv,        // splits per sequence, merged by each tile's last split CTA; FA2's split rule,
                   // or one wave of two CTAs a SM where the kernel fits more (hdim 64)
  flash_decoding,  // FA2's splits, merged by a second launch (merge_states): FlashDecoding
  lean,            // LeanAttention: persistent stream-K over LeanTiles, host-CTA reduction
};
const char* schedule_name(DecodeSchedule s);
// split_kv and flash_decoding share their kernel and, at two CTAs a SM or fewer, their splits; the
// merge differs.
constexpr bool is_split_kv(DecodeSchedule s) {
  return s == DecodeSchedule::split_kv || s == DecodeSchedule::flash_decoding;
}
// "single" | "split_kv" | "split" | "flash_decoding" | "lean" | "auto"; anything else is an Error
// naming `what`.
DecodeSchedule parse_schedule(const std::string& name, const char* what = "schedule");

// The shape of a decode call (decode.h documents the tensors).
struct DecodeProblem {
  int batch = 0;
  int q_len = 1;         // query tokens per sequence, 1..16
  int num_q_heads = 0;
  int num_kv_heads = 0;  // divides num_q_heads (GQA/MQA)
  int hdim = 0;          // a multiple of 8, <= 256
  DType dtype = DType::bf16;
  bool paged = false;
  int page_size = 0;     // tokens per page when paged (>= 1)
  // The sliding window of the decodes this plan serves (DecodeOptions::window_left, which must
  // then be the same), -1 none. With a window `auto` plans split_kv, whose splits share the
  // window's keys at run time (a Lean plan's CTAs keep their ranges of the whole cache).
  int window_left = -1;

  int group() const { return num_kv_heads > 0 ? num_q_heads / num_kv_heads : 0; }
  // Rows of one (sequence, KV head): its query heads times its query tokens, computed together so
  // that K/V are read once per KV head.
  int rows() const { return group() * q_len; }
};

// What the schedule may assume about the machine: sm_count * ctas_per_sm CTAs run at once.
struct DeviceInfo {
  int sm_count = 1;
  int ctas_per_sm = 1;
};

// LeanTile width in tokens: the LeanAttention paper measured 256 at hdim 64 and 128 at hdim 128;
// 64 at hdim 256 keeps the bytes per LeanTile (K+V) the same.
constexpr int lean_tile_tokens(int hdim) { return hdim <= 64 ? 256 : hdim <= 128 ? 128 : 64; }

// Rows (query head x query token) one CTA computes at a time: one m16 tensor-core tile. A
// (sequence, KV head) with more rows is split into row blocks, each its own output tile.
constexpr int kDecodeRowsPerBlock = 16;

// One output tile: the rows [row_block*16, ...) of (seq, kv_head), its LeanTile iterations
// [first_iter, first_iter + num_iters) in the global stream-K order.
struct DecodeTile {
  int seq = 0;
  int kv_head = 0;
  int row_block = 0;
  int first_iter = 0;
  int num_iters = 0;  // ceil(kv_length / lean_tile), at least 1 (an empty sequence still writes)
  // Lean: the CTA holding the first LeanTile (it reduces and writes O, LSE) and the one holding
  // the last. CTAs host_cta+1 .. finishing_cta each leave one partial, in consecutive slots from
  // first_peer_slot. Single/split-KV: host_cta = finishing_cta = the tile's index, no peers.
  int host_cta = 0;
  int finishing_cta = 0;
  int first_peer_slot = -1;
};

// Lean: one CTA's contiguous range of LeanTile iterations [begin, end).
struct LeanCta {
  int begin = 0;
  int end = 0;
  int first_tile = 0;     // the tile holding iteration `begin`
  int partial_slot = -1;  // its first segment is not a tile start: the slot it writes, else -1
};

// Split-KV: a token range [begin, end) of one sequence (empty when the sequence is short).
struct KvSplit {
  int begin = 0;
  int end = 0;
};

namespace detail {
// The plan's device copy, filled lazily by the CUDA backend on first use. `copy` carries a
// deleter set by the CUDA code, so this header needs no CUDA include. Shared by copies of a plan.
struct PlanDeviceCache {
  std::mutex mutex;
  std::shared_ptr<void> copy;
  int device_id = -1;
};
}  // namespace detail

struct DecodePlan {
  DecodeProblem problem;
  DecodeSchedule schedule = DecodeSchedule::single;  // resolved: never automatic
  DecodeSchedule requested = DecodeSchedule::automatic;
  DeviceInfo device;
  // The KV lengths planned for. A run may use shorter cache_seqlens (masked), never longer, so
  // one plan (e.g. for lengths rounded up to a LeanTile) serves several decode steps.
  std::vector<int> kv_lengths;
  int lean_tile = 0;   // tokens per LeanTile
  int row_blocks = 0;  // ceil(rows / kDecodeRowsPerBlock)
  int grid = 0;        // CTAs of the one decode kernel launch

  // Output tiles in (seq, kv_head, row_block) order, which is also the stream-K order (the GPU
  // kernel derives a tile's (seq, kv_head, row_block) from its index: keep this order).
  std::vector<DecodeTile> tiles;
  int total_iters = 0;  // sum of tiles' num_iters

  // split_kv / flash_decoding: every tile has num_splits partials; split s of sequence b is
  // splits[b*num_splits+s]. CTA index = tile * num_splits + split; its rows' partials land at
  // [split, b, token, head] of o_parts [P, batch, q_len, heads, hdim] / lse_parts
  // [P, batch, q_len, heads] (merge_states' layout, P = num_splits), which split_kv's last split
  // CTA of each tile folds in the kernel and flash_decoding's merge_states launch folds after it.
  // With num_splits 1 both write O directly (no partial, no merge).
  int num_splits = 0;
  std::vector<KvSplit> splits;

  // lean: per-CTA iteration ranges (sizes differ by <= 1) and the partial slots.
  std::vector<LeanCta> ctas;
  int num_partial_slots = 0;  // lean: CTAs with a partial; split_kv/flash_decoding: tiles * P

  std::shared_ptr<detail::PlanDeviceCache> device_cache = std::make_shared<detail::PlanDeviceCache>();

  std::string describe() const;  // one line: schedule, grid, splits/iters
};

// Whether the Hopper (sm_90) kernel streams this plan's K/V by cp.async rather than by tensor-map
// boxes. Measured on an H200 (bench/NOTES-decode.md, v10 / v10b): tensor-map boxes top out near
// 4.25 TB/s; the cp.async copies (set up once a segment, one add and one compare a copy; paged
// caches look the block table up once a chunk, or once a copy for pages under 64 tokens) are
// 1-10% faster at hdim 128 / 256, at hdim 64 where a CTA streams >= 4096 tokens on average, and
// on paged caches at every hdim and page size measured but pages of 16 tokens at hdim 256; boxes
// there, and for short hdim 64 streams (b1 h56 8k: 41.3 against 43.6 us). FLASHKIT_DECODE_TMA=0 /
// 1 overrides it at run time; other GPUs use cp.async throughout.
bool decode_prefers_cp_async(const DecodePlan& plan);

// Plan a decode of `problem` over caches of the given per-sequence lengths (size batch, each >= 0)
// on a device running dev.sm_count * dev.ctas_per_sm CTAs at once. Errors name the argument.
DecodePlan make_decode_plan(const DecodeProblem& problem, const std::vector<int>& kv_lengths,
                            DeviceInfo dev, DecodeSchedule schedule = DecodeSchedule::automatic);

}  // namespace flashkit
