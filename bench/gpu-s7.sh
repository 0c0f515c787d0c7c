#!/usr/bin/env bash
# Session 7's attention + MAS call: minimal build (sm_90a); the sm90 attention tests (forward:
# K released after the softmax's exponentials, NOTES-attention "sm90 forward v4") and the MAS
# tests, sanitizers on one small case each; the fused MAS rows-a-lane sweep
# (FLASHKIT_MAS_FUSED_K=1|2|4, NOTES-mas "v15c"); then the forward at hdim 64/128 against torch
# SDPA flash + cudnn in one process (bench/attention.py --fwd-only).
# usage: OUT=/some/dir bench/gpu-s7.sh   (.carry and .whl carried; ~550 s)
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
stamp "build + tests"
timeout 420 tests/gpu/run --kernels minimal \
  --filter 'AttentionGpuSm90.*:AttentionGpuSmall.Sm90*:AttentionGpuSmall.DenseCausalGqa:AttentionGpu.DeterministicBitwiseEqual:MasGpu*' \
  --sanitize-filter 'AttentionGpuSmall.Sm90AndSm80Paths:MasGpuSmall.FusedEqualsCpuFusedAndUnfused' \
  --out "$log" >"$log/run.txt" 2>&1
stamp "tests/gpu/run rc=$?"
grep -E "gpu tests|sanitizer|build" "$log/run.txt" | tail -4
grep -E "FAILED|Failure" "$log/gpu_tests.log" 2>/dev/null | head -20
for k in 1 2 4; do
  FLASHKIT_MAS_FUSED_K=$k timeout 60 python3 bench/profile_mas.py --fused --reps 5 \
    --Ts 128,512,1024,1536,2048 >"$log/fusedk$k.log" 2>&1
  grep "fused path" "$log/fusedk$k.log" | sed "s/^/K=$k /"
done
fwd_vs_cudnn attention-fwd-s7
(cd "$out" && tar czf logs.tgz t && rm -rf t)
ls "$out"
