#!/usr/bin/env bash
# One GPU call for MAS v13 (bench/NOTES-mas.md): build (decode + MAS kernels), the MAS GPU tests
# with sanitizers, the same tests again with every item of 64+ rows split over a cluster
# (FLASHKIT_MAS_SPLIT_ROWS=32: the cross-CTA ring under stress, memcheck + racecheck too), the
# split A/B (bench/profile_mas.py) and bench/mas.py at T <= 512 (Super-MAS alongside).
# usage: OUT=/some/dir bench/gpu-mas6.sh   (.carry and .whl carried)
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
stamp "build + tests"
timeout 330 tests/gpu/run --kernels noattention --filter 'MasGpu*' --sanitize-filter 'MasGpuSmall*' \
  --out "$log" >"$log/run.txt" 2>&1
stamp "tests/gpu/run rc=$?"
grep -E "gpu tests|sanitizer|build" "$log/run.txt" | tail -4
export FLASHKIT_MAS_SPLIT_ROWS=32
timeout 60 build-gpu/flashkit_gpu_tests --gtest_filter='MasGpu*' >"$log/split32.log" 2>&1
stamp "split32 tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$log/split32.log" | tr '\n' ' ')"
for tool in memcheck racecheck; do
  timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 build-gpu/flashkit_gpu_tests \
    --gtest_filter='MasGpuSmall.SplitItems*:MasGpuSmall.Staged*:MasGpuSmall.RandomTie*' \
    >"$log/split32-$tool.log" 2>&1
  stamp "split32 $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log/split32-$tool.log" | tail -1)"
done
unset FLASHKIT_MAS_SPLIT_ROWS
profile() {  # name knobs Ts
  env ${2//,/ } timeout 60 python3 bench/profile_mas.py --Ts "$3" >"$log/profile-$1.log" 2>&1
  grep "path " "$log/profile-$1.log" | sed "s/^/$1 /"
}
profile auto "" 128,256,512,1024,2048
profile s128 FLASHKIT_MAS_SPLIT_ROWS=128 256,512
profile s64 FLASHKIT_MAS_SPLIT_ROWS=64 128,256,512
profile s32k1 FLASHKIT_MAS_SPLIT_ROWS=32,FLASHKIT_MAS_K=1 128,256
profile auto2 "" 128,256,512
stamp "bench/mas.py"
timeout 80 python3 bench/mas.py --out "$out" --Ts 128,256,512 --cython-max-t 256 --reps 7 \
  >"$log/mas.log" 2>&1
stamp "rc=$?"
grep -E "^T=|flashkit_gpu |super_mas" "$log/mas.log" | tail -12
(cd "$out" && tar czf logs.tgz t && rm -rf t)
ls "$out"
