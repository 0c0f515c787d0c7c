#!/usr/bin/env bash
# Session 19's GPU calls (bench/NOTES-mas.md "v18"). The library comes built from the CPU machine
# in .ab/lib.tgz (bench/gpu-library.sh says how); .carry/peers and .whl carried for bench/mas.py.
# PART=mas: the decode tests added after session 18's last call, the MAS GPU tests (band kernel by
# default; its test also with FLASHKIT_MAS_BAND=0), memcheck / racecheck on the small ones,
# bench/profile_mas.py band vs staged interleaved (ROUNDS), then bench/mas.py's sweep (SWEEP=1).
# PART=ncu: stall samples per SASS line of the band kernel (NCU_T). PART=ab: band vs staged,
# bench/mas_overhead.py (host vs GPU time of a call) both ways, the sweep. PART=check: every MAS
# GPU test and the sanitizers. (Calls 5-9 ran intermediate parts, bench/NOTES-mas.md v18b-v18d.)
# usage: tar xzf .ab/lib.tgz && OUT=/some/dir PART=mas bench/gpu-s19.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
carried_library  # the GPU's name in $log/gpu.txt, bin=the carried test binary, gtest()
# bench/profile_mas.py at TS for each knob set in turn, ROUNDS times (the first set: "" = defaults).
profile_ab() {
  for r in ${ROUNDS:-1 2}; do
    for knobs in "$@"; do
      env $knobs timeout 60 python3 bench/profile_mas.py --reps 30 --Ts ${TS:-128,256} >"$log/p.log" 2>&1
      grep -E "drop-in|kernels|Error|error" "$log/p.log" | sed "s/^/[r$r ${knobs:-band}] /"
    done
  done
}
case "${PART:?set PART}" in
mas)
  gtest decode 'DecodeGpu.PagedPageSizes:DecodeGpu.CpAsyncLoader' 120
  gtest mas 'MasGpu*' 240
  ENVS=FLASHKIT_MAS_BAND=0 gtest mas_staged 'MasGpuSmall.BandKernelShapes' 60
  SAN_EACH=${SAN_EACH:-90} sanitize "$bin" 'MasGpuSmall.BandKernelShapes:MasGpuSmall.NanAndInfCells:MasGpuSmall.NonDensePathAndDurationsOnly'
  profile_ab "" "FLASHKIT_MAS_BAND=0"
  [ "${SWEEP:-1}" = 1 ] && mas_sweep 120
  ;;
ab)  # band (defaults) vs staged, ROUNDS rounds at TS, then the sweep (SWEEP=1)
  profile_ab "" "FLASHKIT_MAS_BAND=0"
  timeout 90 python3 bench/mas_overhead.py --Ts 128,256 >"$log/ovh.log" 2>&1; tail -4 "$log/ovh.log"
  FLASHKIT_MAS_BAND=0 timeout 90 python3 bench/mas_overhead.py --Ts 128,256 >"$log/ovh0.log" 2>&1; tail -4 "$log/ovh0.log" | sed "s/^/[staged] /"
  [ "${SWEEP:-1}" = 1 ] && mas_sweep 120
  ;;
check)  # the final build: every MAS GPU test, sanitizers on the small band ones
  gtest mas 'MasGpu*' 240
  SAN_EACH=90 sanitize "$bin" 'MasGpuSmall.BandKernelShapes:MasGpuSmall.NanAndInfCells:MasGpuSmall.NonDensePathAndDurationsOnly'
  ;;
decncu)  # decode hdim 128 b4 h32 128k: ncu stall samples per SASS line, split-KV and cuDNN's kernel
  stamp "ncu decode"
  timeout 300 ncu --profile-from-start off --section SpeedOfLight --section WarpStateStats \
    --section SourceCounters --section MemoryWorkloadAnalysis --import-source yes -o "$log/dec" \
    python3 bench/profile_decode.py --shapes 128,4,32,131072 --schedules split_kv --cudnn \
    >"$log/decncu.log" 2>&1
  stamp "rc=$?"
  ncu_unpack dec sass
  grep -E '^  [a-z_c].*\(|Duration|DRAM Throughput|Warp Cycles Per Issued|Issued Ipc' "$log/dec-details.txt" | head -20
  ;;
host)  # host time of the pieces of a maximum_path call (bench/mas_overhead.py --pieces)
  timeout 120 python3 bench/mas_overhead.py --Ts 128 --pieces 2>&1 | tail -12
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
