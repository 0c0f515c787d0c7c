#!/usr/bin/env bash
# Session 19's GPU calls (bench/NOTES-mas.md "v18"). The library comes built from the CPU machine
# in .ab/lib.tgz (bench/gpu-library.sh says how); .carry/peers and .whl carried for bench/mas.py.
# PART=mas: the decode tests added after session 18's last call, the MAS GPU tests (band kernel by
# default; its test also with FLASHKIT_MAS_BAND=0), memcheck / racecheck on the small ones,
# bench/profile_mas.py band vs staged interleaved (ROUNDS), then bench/mas.py's sweep (SWEEP=1).
# usage: tar xzf .ab/lib.tgz && OUT=/some/dir PART=mas bench/gpu-s19.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$log/gpu.txt"
bin=build-dev/flashkit_gpu_tests
gtest() {  # $1 log name, $2 filter, $3 seconds, env before
  stamp "tests $2 ${ENVS:-}"
  env ${ENVS:-} timeout "$3" "$bin" --gtest_filter="$2" >"$log/$1.log" 2>&1
  stamp "rc=$?"
  grep -E "^\[  FAILED|^\[  PASSED|Failure|differ" "$log/$1.log" | head -12
}
case "${PART:?set PART}" in
mas)
  gtest decode 'DecodeGpu.PagedPageSizes:DecodeGpu.CpAsyncLoader' 120
  gtest mas 'MasGpu*' 240
  ENVS=FLASHKIT_MAS_BAND=0 gtest mas_staged 'MasGpuSmall.BandKernelShapes' 60
  SAN_EACH=${SAN_EACH:-90} sanitize "$bin" 'MasGpuSmall.BandKernelShapes:MasGpuSmall.NanAndInfCells:MasGpuSmall.NonDensePathAndDurationsOnly'
  for r in ${ROUNDS:-1 2}; do
    for knobs in "" "FLASHKIT_MAS_BAND=0"; do
      env $knobs timeout 60 python3 bench/profile_mas.py --reps 20 --Ts ${TS:-128,256,512} >"$log/p.log" 2>&1
      grep -E "drop-in|kernels|Error|error" "$log/p.log" | sed "s/^/[r$r ${knobs:-band}] /"
    done
  done
  [ "${SWEEP:-1}" = 1 ] && mas_sweep 120
  ;;
esac
(cd "$out" && tar czf logs.tgz t && rm -rf t)
