#!/usr/bin/env bash
# One GPU call for MAS v15 and v15b (bench/NOTES-mas.md, "v15", "v15b"): build (decode + MAS kernels), the MAS GPU
# tests with sanitizers, the fused tests again with the old split rule (FLASHKIT_MAS_FUSED_SPLIT=0),
# the fused A/B (bench/profile_mas.py --fused, new rule and old, interleaved), then bench/mas.py's
# full sweep (its fused column is the new default).
# usage: OUT=/some/dir bench/gpu-mas8.sh   (.carry and .whl carried)
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
stamp "build + tests"
timeout 330 tests/gpu/run --kernels noattention --filter 'MasGpu*' --sanitize-filter 'MasGpuSmall*' \
  --out "$log" >"$log/run.txt" 2>&1
stamp "tests/gpu/run rc=$?"
grep -E "gpu tests|sanitizer|build" "$log/run.txt" | tail -4
FLASHKIT_MAS_FUSED_SPLIT=0 timeout 90 build-gpu/flashkit_gpu_tests --gtest_filter='MasGpu*Fused*' \
  >"$log/fused-old-rule.log" 2>&1
stamp "FUSED_SPLIT=0 fused tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$log/fused-old-rule.log" | tr '\n' ' ')"
profile() {  # name knobs Ts
  env ${2//,/ } timeout 90 python3 bench/profile_mas.py --fused --reps 5 --Ts "$3" \
    >"$log/profile-$1.log" 2>&1
  grep "fused " "$log/profile-$1.log" | sed "s/^/$1 /"
}
profile new "" 128,512,2048
profile old FLASHKIT_MAS_FUSED_SPLIT=0 128,512,2048
profile new2 "" 128,512,2048
stamp "bench/mas.py"
timeout 150 python3 bench/mas.py --out "$out" --cython-max-t 256 --reps 7 >"$log/mas.log" 2>&1
stamp "rc=$?"
grep -E "^T=|flashkit_gpu|super_mas" "$log/mas.log" | tail -30
(cd "$out" && tar czf logs.tgz t && rm -rf t)
ls "$out"
