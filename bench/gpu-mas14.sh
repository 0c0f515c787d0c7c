#!/usr/bin/env bash
# One GPU call for MAS v17 (bench/NOTES-mas.md "v17"): the separate path kernel zeroes the path
# beside the DP (programmatic dependent launch) instead of after it. Build, the MAS GPU tests with
# sanitizers, the A/B (bench/profile_mas.py, default vs FLASHKIT_MAS_EARLY_ZEROS=0, interleaved
# twice), then bench/mas.py's sweep with the time left.
# usage: OUT=/some/dir bench/gpu-mas14.sh   (.carry and .whl carried)
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
mas_tests noattention 330
FLASHKIT_MAS_EARLY_ZEROS=0 timeout 90 build-gpu/flashkit_gpu_tests --gtest_filter='MasGpu*' \
  >"$log/late.log" 2>&1
stamp "EARLY_ZEROS=0 tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$log/late.log" | tr '\n' ' ')"
for knobs in "" "FLASHKIT_MAS_EARLY_ZEROS=0" "" "FLASHKIT_MAS_EARLY_ZEROS=0"; do
  env $knobs timeout 60 python3 bench/profile_mas.py --reps 10 --Ts 1024,1536,2048 >"$log/p.log" 2>&1
  grep -E "drop-in|kernels" "$log/p.log" | sed "s/^/[${knobs:-early}] /"
done
mas_sweep 120
(cd "$out" && tar czf logs.tgz t && rm -rf t)
ls "$out"
