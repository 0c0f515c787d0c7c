#!/usr/bin/env bash
# Session 20's GPU calls (bench/NOTES-mas.md "v19"). The library comes built from the CPU machine
# in .ab/lib.tgz (bench/gpu-library.sh says how); the previous build's python package in
# .ab/old/flashkit (the A/B's base); .carry/peers and .whl carried for bench/mas.py.
# PART=mas: the MAS GPU tests, memcheck / racecheck on the small band ones, the band kernel's phase
# clocks (FLASHKIT_MAS_TRACE) and the GPU time of a call (bench/mas_overhead.py) for the base and
# the new build in alternation (ROUNDS), then bench/mas.py's sweep (SWEEP=1).
# usage: tar xzf .ab/lib.tgz && OUT=/some/dir PART=mas bench/gpu-s20.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
carried_library  # the GPU's name in $log/gpu.txt, bin=the carried test binary, gtest()
# $1 = base | new[:ENV=VALUE,...]: the python package it runs (base: .ab/old) and knobs.
pkg() { [ "${1%%:*}" = base ] && echo .ab/old || echo python; }
knobs() { case "$1" in *:*) echo "${1#*:}" | tr ',' ' ';; esac; }
ab() {  # phase clocks (warm, then from a flushed L2) and GPU time of a call at TS, VARIANTS in turn
  for r in ${ROUNDS:-1 2}; do
    for v in ${VARIANTS:-base new}; do
      env PYTHONPATH=$(pkg $v) FLASHKIT_MAS_TRACE=1 $(knobs $v) timeout 60 python3 \
        bench/profile_mas.py --once --Ts ${TS:-128,256} 2>&1 | grep "band trace" | sed "s/^/[r$r $v] /"
      env PYTHONPATH=$(pkg $v) $(knobs $v) timeout 90 python3 bench/mas_overhead.py \
        --Ts ${TS:-128,256} 2>&1 | grep "T=" | sed "s/^/[r$r $v] /"
    done
  done
}
case "${PART:?set PART}" in
mas)
  gtest mas 'MasGpu*' 240
  SAN_EACH=${SAN_EACH:-90} sanitize "$bin" 'MasGpuSmall.BandKernelShapes:MasGpuSmall.NanAndInfCells:MasGpuSmall.NonDensePathAndDurationsOnly'
  ab
  [ "${SWEEP:-1}" = 1 ] && mas_sweep 120
  ;;
ab)
  ab
  [ "${SWEEP:-0}" = 1 ] && mas_sweep 120
  ;;
ncu)  # stall reasons per SASS line of the band kernel at T = NCU_T (its LAUNCH-th launch)
  for t in ${NCU_T:-256}; do
    stamp "ncu T=$t ${ENVS:-}"
    env ${ENVS:-} timeout 120 ncu --kernel-name regex:mas_forward_band --launch-skip ${LAUNCH:-0} \
      --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SourceCounters \
      --import-source yes -o "$log/band$t" python3 bench/profile_mas.py --once --Ts $t \
      >"$log/ncu$t.log" 2>&1
    stamp "rc=$?"
    ncu_unpack band$t sass
    grep -E "Duration|Elapsed Cycles|Warp Cycles Per Issued|Issued Ipc" "$log/band$t-details.txt" | head
  done
  ;;
esac
(cd "$out" && tar czf logs.tgz t && rm -rf t)
