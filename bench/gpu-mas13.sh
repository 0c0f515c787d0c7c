#!/usr/bin/env bash
# Why v16's tiled kernel is slower than predicted (bench/NOTES-mas.md "v16 measured"): the small
# MAS tests with its knobs, the A/B of its knobs against the staged kernel (bench/profile_mas.py,
# interleaved twice), and ncu (stall reasons per SASS line, memory workload) of the tiled and the
# staged kernel at T = 128.
# usage: OUT=/some/dir bench/gpu-mas13.sh   (.carry and .whl carried)
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
stamp "build"
timeout 300 tests/gpu/run --kernels noattention --no-tests --out "$log" >"$log/run.txt" 2>&1
stamp "build rc=$?"
for knobs in "" "FLASHKIT_MAS_TILED_SLOTS=32 FLASHKIT_MAS_TILED_L2=1"; do
  env $knobs timeout 60 build-gpu/flashkit_gpu_tests --gtest_filter='MasGpuSmall*' >"$log/small.log" 2>&1
  stamp "[${knobs:-default}] small tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$log/small.log" | tr '\n' ' ')"
done
for rep in 1 2; do
  for knobs in "" "FLASHKIT_MAS_TILED_L2=1" "FLASHKIT_MAS_TILED_SLOTS=32" \
      "FLASHKIT_MAS_TILED_SLOTS=32,FLASHKIT_MAS_TILED_L2=1" "FLASHKIT_MAS_TILED=0"; do
    env ${knobs//,/ } timeout 60 python3 bench/profile_mas.py --reps 10 --Ts 128,256 >"$log/p.log" 2>&1
    grep -E "kernels" "$log/p.log" | sed "s/^/[${knobs:-tiled}] /"
  done
done
if command -v ncu >/dev/null; then
  for knobs in "" "FLASHKIT_MAS_TILED=0"; do
    [ "$(left)" -gt 60 ] || break
    name=ncu${knobs:+-staged}
    env $knobs timeout 50 ncu --kernel-name regex:mas_forward --launch-count 1 \
      --section SpeedOfLight --section WarpStateStats --section SourceCounters \
      --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section LaunchStats \
      --import-source yes -o "$log/$name" python3 bench/profile_mas.py --Ts 128 --once \
      >"$log/$name.log" 2>&1
    ncu_unpack "$name" sass
    stamp "$name"
    grep -E "Duration|Elapsed Cycles|DRAM Throughput|Memory Throughput|L2 Hit|Warp Cycles Per Issued|Issued Ipc" "$log/$name-details.txt" | head -12
  done
fi
(cd "$out" && tar czf logs.tgz t && rm -rf t)
ls "$out"
