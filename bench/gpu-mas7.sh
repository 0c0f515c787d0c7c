#!/usr/bin/env bash
# One GPU call for MAS v14 (bench/NOTES-mas.md, "v14"): build (decode + MAS kernels), the MAS GPU
# tests with sanitizers as they stand, then the same tests with the register path's new cells
# (FLASHKIT_MAS_CELL=pred), with the lane-skewed loop
# (FLASHKIT_MAS_SKEW=1), alone and with every item of 64+ rows split over a cluster
# (FLASHKIT_MAS_SPLIT_ROWS=32), each under memcheck + racecheck on the small cases; the skew A/B
# and cell A/Bs (bench/profile_mas.py), bench/mas.py's full sweep as it stands and at T <= 512 with
# the skew on.
# usage: OUT=/some/dir bench/gpu-mas7.sh   (.carry and .whl carried)
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
stamp "build + tests"
timeout 330 tests/gpu/run --kernels noattention --filter 'MasGpu*' --sanitize-filter 'MasGpuSmall*' \
  --out "$log" >"$log/run.txt" 2>&1
stamp "tests/gpu/run rc=$?"
grep -E "gpu tests|sanitizer|build" "$log/run.txt" | tail -4
for knobs in "FLASHKIT_MAS_CELL=pred" "FLASHKIT_MAS_SKEW=1" \
  "FLASHKIT_MAS_SKEW=1 FLASHKIT_MAS_SPLIT_ROWS=32"; do
  tag=$(echo "$knobs" | tr ' =' '_-')
  env $knobs timeout 60 build-gpu/flashkit_gpu_tests --gtest_filter='MasGpu*' >"$log/$tag.log" 2>&1
  stamp "$knobs tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$log/$tag.log" | tr '\n' ' ')"
  [ "$knobs" = "FLASHKIT_MAS_CELL=pred" ] && continue  # same memory accesses as the default
  for tool in memcheck racecheck; do
    env $knobs timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 \
      build-gpu/flashkit_gpu_tests --gtest_filter='MasGpuSmall*' >"$log/$tag-$tool.log" 2>&1
    stamp "$knobs $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log/$tag-$tool.log" | tail -1)"
  done
done
profile() {  # name knobs Ts
  env ${2//,/ } timeout 60 python3 bench/profile_mas.py --Ts "$3" >"$log/profile-$1.log" 2>&1
  grep "path " "$log/profile-$1.log" | sed "s/^/$1 /"
}
profile auto "" 128,256,512,1024,2048
profile pred FLASHKIT_MAS_CELL=pred 1024,2048
profile skew FLASHKIT_MAS_SKEW=1 128,256,512
profile skew-s128 FLASHKIT_MAS_SKEW=1,FLASHKIT_MAS_SPLIT_ROWS=128 256,512
profile auto2 "" 128,256,512,1024,2048
profile pred2 FLASHKIT_MAS_CELL=pred 1024,2048
profile skew2 FLASHKIT_MAS_SKEW=1 128,256,512
stamp "bench/mas.py"
timeout 120 python3 bench/mas.py --out "$out" --cython-max-t 256 --reps 7 >"$log/mas.log" 2>&1
stamp "rc=$?"
grep -E "^T=|flashkit_gpu |super_mas" "$log/mas.log" | tail -18
mkdir -p "$out/skew"
stamp "bench/mas.py (skew on)"
FLASHKIT_MAS_SKEW=1 timeout 90 python3 bench/mas.py --out "$out/skew" --Ts 128,256,512 \
  --cython-max-t 256 --reps 7 >"$log/mas-skew.log" 2>&1
stamp "rc=$?"
grep -E "^T=|flashkit_gpu |super_mas" "$log/mas-skew.log" | tail -9
(cd "$out" && tar czf logs.tgz t && rm -rf t)
ls "$out"
