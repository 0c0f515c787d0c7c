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
mas2)  # v18b: tests (2 DP warps by default, then 1), sanitizers, band 2 / 1 warps vs staged, overhead
  gtest mas 'MasGpu*' 240
  ENVS=FLASHKIT_MAS_BAND_WARPS=1 gtest mas_w1 'MasGpuSmall.BandKernelShapes:MasGpuSmall.NanAndInfCells:MasGpuSmall.StagedRowsEachDtype' 90
  SAN_EACH=${SAN_EACH:-90} sanitize "$bin" 'MasGpuSmall.BandKernelShapes:MasGpuSmall.NanAndInfCells'
  for r in ${ROUNDS:-1 2}; do
    for knobs in "" "FLASHKIT_MAS_BAND_WARPS=1" "FLASHKIT_MAS_BAND=0"; do
      env $knobs timeout 60 python3 bench/profile_mas.py --reps 20 --Ts ${TS:-128,256} >"$log/p.log" 2>&1
      grep -E "drop-in|kernels|Error|error" "$log/p.log" | sed "s/^/[r$r ${knobs:-band 2 warps}] /"
    done
  done
  stamp "overhead"
  timeout 120 python3 bench/mas_overhead.py --Ts 128,256 >"$log/ovh.log" 2>&1
  stamp "rc=$?"; cat "$log/ovh.log" | tail -8
  [ "${SWEEP:-1}" = 1 ] && mas_sweep 120
  ;;
mas3)  # v18b fixed: tests, racecheck, phase clocks (FLASHKIT_MAS_TRACE), A/B
  gtest mas 'MasGpuSmall.BandKernelShapes:MasGpuSmall.NanAndInfCells:MasGpuSmall.StagedRowsEachDtype:MasGpuSmall.LongMelBitsInGlobalMemory:MasGpuSmall.NonDensePathAndDurationsOnly:MasGpuSmall.RandomTieHeavyAndInfEachNeg' 120
  SAN_EACH=60 sanitize "$bin" 'MasGpuSmall.BandKernelShapes'
  for knobs in "" "FLASHKIT_MAS_BAND_WARPS=1"; do
    env $knobs FLASHKIT_MAS_TRACE=1 timeout 60 python3 bench/profile_mas.py --once --Ts ${TS:-128,256} 2>&1 | \
      grep "band trace" | sed "s/^/[${knobs:-2 warps}] /"
  done
  for r in ${ROUNDS:-1}; do
    for knobs in "" "FLASHKIT_MAS_BAND_WARPS=1" "FLASHKIT_MAS_BAND=0"; do
      env $knobs timeout 60 python3 bench/profile_mas.py --reps 20 --Ts ${TS:-128,256} >"$log/p.log" 2>&1
      grep -E "drop-in|kernels|Error|error" "$log/p.log" | sed "s/^/[r$r ${knobs:-band 2 warps}] /"
    done
  done
  ;;
mas4)  # backtrack A/B (phase clocks), then band (1 warp) vs staged, ROUNDS rounds
  for knobs in "FLASHKIT_MAS_BAND_WARPS=1" "FLASHKIT_MAS_BAND_WARPS=1 FLASHKIT_MAS_BAND_BACKTRACK=0"; do
    env $knobs FLASHKIT_MAS_TRACE=1 timeout 60 python3 bench/profile_mas.py --once --Ts ${TS:-128,256} 2>&1 | \
      grep "band trace" | sed "s/^/[$knobs] /"
  done
  for r in ${ROUNDS:-1 2}; do
    for knobs in "FLASHKIT_MAS_BAND_WARPS=1" "FLASHKIT_MAS_BAND_WARPS=1 FLASHKIT_MAS_BAND_BACKTRACK=0" "FLASHKIT_MAS_BAND=0"; do
      env $knobs timeout 60 python3 bench/profile_mas.py --reps 20 --Ts ${TS:-128,256} >"$log/p.log" 2>&1
      grep -E "drop-in|kernels|Error|error" "$log/p.log" | sed "s/^/[r$r $knobs] /"
    done
  done
  ;;
final)  # v18 as kept (one warp, T <= 128): tests, sanitizers, phase clocks, A/B, the sweep
  gtest mas 'MasGpu*' 240
  SAN_EACH=90 sanitize "$bin" 'MasGpuSmall.BandKernelShapes:MasGpuSmall.NanAndInfCells:MasGpuSmall.NonDensePathAndDurationsOnly'
  FLASHKIT_MAS_TRACE=1 timeout 60 python3 bench/profile_mas.py --once --Ts 32,64,128 2>&1 | grep "band trace"
  for r in ${ROUNDS:-1 2}; do
    for knobs in "" "FLASHKIT_MAS_BAND=0"; do
      env $knobs timeout 60 python3 bench/profile_mas.py --reps 30 --Ts ${TS:-32,64,128} >"$log/p.log" 2>&1
      grep -E "drop-in|kernels|Error|error" "$log/p.log" | sed "s/^/[r$r ${knobs:-band}] /"
    done
  done
  timeout 60 python3 bench/mas_overhead.py --Ts 128 >"$log/ovh.log" 2>&1; tail -3 "$log/ovh.log"
  mas_sweep 120
  ;;
w2)  # v18d: two DP warps past 128 rows: tests, racecheck, clocks, ncu of the 2-warp kernel, A/B
  gtest mas 'MasGpuSmall.BandKernelShapes:MasGpuSmall.NanAndInfCells:MasGpuSmall.StagedRowsEachDtype:MasGpuSmall.RandomTieHeavyAndInfEachNeg' 120
  ENVS=FLASHKIT_MAS_BAND_WARPS=2 gtest mas_w2 'MasGpuSmall.BandKernelShapes' 60
  SAN_EACH=60 sanitize "$bin" 'MasGpuSmall.BandKernelShapes'
  for knobs in "" "FLASHKIT_MAS_BAND_WARPS=2"; do
    env $knobs FLASHKIT_MAS_TRACE=1 timeout 60 python3 bench/profile_mas.py --once --Ts 128,256 2>&1 | \
      grep "band trace" | sed "s/^/[${knobs:-default}] /"
  done
  stamp "ncu T=256 durations"
  timeout 120 ncu --kernel-name regex:mas_forward_band --launch-skip 1 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SourceCounters \
    --import-source yes -o "$log/w2" python3 bench/profile_mas.py --once --Ts 256 >"$log/ncuw2.log" 2>&1
  stamp "rc=$?"
  ncu_unpack w2 sass
  for knobs in "" "FLASHKIT_MAS_BAND=0"; do
    env $knobs timeout 60 python3 bench/profile_mas.py --reps 30 --Ts 256 >"$log/p.log" 2>&1
    grep -E "drop-in|kernels|Error|error" "$log/p.log" | sed "s/^/[${knobs:-band}] /"
  done
  ;;
ab)  # band (defaults) vs staged, ROUNDS rounds at TS, then the sweep (SWEEP=1)
  for r in ${ROUNDS:-1 2}; do
    for knobs in "" "FLASHKIT_MAS_BAND=0"; do
      env $knobs timeout 60 python3 bench/profile_mas.py --reps 30 --Ts ${TS:-128,256} >"$log/p.log" 2>&1
      grep -E "drop-in|kernels|Error|error" "$log/p.log" | sed "s/^/[r$r ${knobs:-band}] /"
    done
  done
  timeout 90 python3 bench/mas_overhead.py --Ts 128,256 >"$log/ovh.log" 2>&1; tail -4 "$log/ovh.log"
  FLASHKIT_MAS_BAND=0 timeout 90 python3 bench/mas_overhead.py --Ts 128,256 >"$log/ovh0.log" 2>&1; tail -4 "$log/ovh0.log" | sed "s/^/[staged] /"
  [ "${SWEEP:-1}" = 1 ] && mas_sweep 120
  ;;
check)  # the final build: every MAS GPU test, sanitizers on the small band ones
  gtest mas 'MasGpu*' 240
  SAN_EACH=90 sanitize "$bin" 'MasGpuSmall.BandKernelShapes:MasGpuSmall.NanAndInfCells:MasGpuSmall.NonDensePathAndDurationsOnly'
  ;;
ncu)  # stall reasons per SASS line of the band kernel at T = NCU_T (one call, kernels with path)
  for t in ${NCU_T:-128}; do
    stamp "ncu T=$t ${ENVS:-}"
    env ${ENVS:-} timeout 120 ncu --kernel-name regex:${KERNEL:-mas_forward_band} --launch-count 1 \
      --section SpeedOfLight --section WarpStateStats --section SourceCounters --section LaunchStats \
      --section InstructionStats --import-source yes -o "$log/band$t" \
      python3 bench/profile_mas.py --once --Ts $t >"$log/ncu$t.log" 2>&1
    stamp "rc=$?"
    ncu_unpack band$t sass
    grep -E "Duration|Elapsed Cycles|Warp Cycles Per Issued|Issued Ipc|Executed Instructions  |Stall|No Instruction" "$log/band$t-details.txt" | head -30
  done
  ;;
esac
(cd "$out" && tar czf logs.tgz t && rm -rf t)
