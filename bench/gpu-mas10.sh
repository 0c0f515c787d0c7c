#!/usr/bin/env bash
# Knob sweep for the T >= 1024 MAS kernels on the GPU at hand (bench/NOTES-mas.md "long texts on
# the H200"): the path written by the forward kernel's path warp (paced or not) instead of the
# path kernel after the DP, the shared-memory stage, the L2 prefetch depth; default twice.
# Build only (the code is the one call 5 of session 7 tested).
# usage: OUT=/some/dir bench/gpu-mas10.sh   (.carry and .whl carried)
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
stamp "build"
timeout 300 tests/gpu/run --kernels noattention --no-tests --out "$log" >"$log/run.txt" 2>&1
stamp "build rc=$?"
for knobs in "" "FLASHKIT_MAS_PATH_KERNEL=0" "FLASHKIT_MAS_PATH_KERNEL=0,FLASHKIT_MAS_PACE=0" \
  "FLASHKIT_MAS_STAGE=1" "FLASHKIT_MAS_L2=0,1" "FLASHKIT_MAS_L2=2,2" "FLASHKIT_MAS_L2=4,4" ""; do
  env ${knobs//,FLASHKIT/ FLASHKIT} timeout 60 python3 bench/profile_mas.py --reps 7 --Ts 1024,2048 \
    >"$log/p.log" 2>&1
  grep -E "drop-in|kernels" "$log/p.log" | sed "s/^/[${knobs:-default}] /"
done
(cd "$out" && tar czf logs.tgz t && rm -rf t)
