#!/usr/bin/env bash
# First call planned for session 8 (bench/NOTES-attention.md "sm90 forward v5"): minimal build with
# the warp-uniform warpgroup index (then a knob, the code since), the sm90 attention
# tests with sanitizers on the small sm90 case, then the forward against torch SDPA flash + cudnn
# in one process (compare flashkit/cuDNN ratios with session 7 call 4's, same protocol).
# usage: OUT=/some/dir bench/gpu-s8.sh   (.carry and .whl carried; ~500 s)
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
stamp "build + tests"
timeout 430 tests/gpu/run --kernels minimal \
  --filter 'AttentionGpuSm90.*:AttentionGpuSmall.Sm90*:AttentionGpu.DeterministicBitwiseEqual' \
  --sanitize-filter 'AttentionGpuSmall.Sm90AndSm80Paths' --out "$log" >"$log/run.txt" 2>&1
stamp "tests/gpu/run rc=$?"
grep -E "gpu tests|sanitizer|build" "$log/run.txt" | tail -4
grep -E "FAILED|Failure" "$log/gpu_tests.log" 2>/dev/null | head -20
fwd_vs_cudnn attention-fwd-v5
(cd "$out" && tar czf logs.tgz t && rm -rf t)
ls "$out"
