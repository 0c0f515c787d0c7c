// Tile schedulers shared by the attention kernels (FA3-style interface: grid_shape,
// initial_work, next_work), so persistent / LPT schedulers can replace the one-tile-per-CTA one
// without touching mainloops or epilogues.
#pragma once
#include <cuda_runtime.h>

namespace flashkit::cuda::attn {

struct WorkTile {
  int block, head, batch;
  bool valid;
};

// One CTA per (block, head, batch). With `reverse`, block indices run from the last one down:
// under a causal mask the last query blocks carry the most key tiles, so they start first and
// the short ones fill the tail of the wave.
struct SingleTileScheduler {
  struct Arguments {
    int num_blocks, heads, batch;
    bool reverse;
  };
  struct Params {
    int num_blocks, heads, batch;
    bool reverse;
  };
  static Params to_params(const Arguments& a) { return {a.num_blocks, a.heads, a.batch, a.reverse}; }
  static dim3 grid_shape(const Params& p) {
    return dim3(unsigned(p.num_blocks), unsigned(p.heads), unsigned(p.batch));
  }
  __device__ static WorkTile initial_work(const Params& p) {
    int blk = p.reverse ? p.num_blocks - 1 - int(blockIdx.x) : int(blockIdx.x);
    return {blk, int(blockIdx.y), int(blockIdx.z), true};
  }
  __device__ static WorkTile next_work(const Params&, const WorkTile&) { return {0, 0, 0, false}; }
};

}  // namespace flashkit::cuda::attn
