#!/usr/bin/env bash
# Session 9: the library with the backward v8/v9 (two dS^T buffers, the dQ conversion through shared memory) built
# (minimal kernels) and tested on the GPU: every attention GPU test except the all-hdim suite
# (its other buckets are not in a minimal build; PaddedBuckets covers them on sm90), with
# memcheck + racecheck on the small sm90 cases. Leaves build-gpu for bench/gpu-s8g.sh.
# usage: OUT=/some/dir bench/gpu-s8f.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
stamp "build + tests"
timeout 560 tests/gpu/run --kernels minimal \
  --filter 'AttentionGpu*:-AttentionGpu/AttentionGpuHdim.*' \
  --sanitize-filter 'AttentionGpuSmall.Sm90AndSm80Paths:AttentionGpuSmall.Sm90AndSm80PathsVariants' \
  --out "$log" >"$log/run.txt" 2>&1
stamp "tests/gpu/run rc=$?"
grep -E "gpu tests|sanitizer|build" "$log/run.txt" | tail -5
grep -E "FAILED|Failure" "$log/gpu_tests.log" 2>/dev/null | head -20
(cd "$out" && tar czf logs.tgz t && rm -rf t)
