#!/usr/bin/env bash
# Session 31's GPU calls (bench/NOTES-decode.md "Session 31"). PART=stream: the K/V streaming
# micro-benchmark (.ab/stream, built here from bench/decode_stream_micro.cu) on STREAM_SHAPES with
# the configs in STREAM_RUNS, then bench/decode.py on SHAPES (the real kernels, torch flash and
# cuDNN in the same process, VARIANTS columns). The library comes built in .ab/lib.tgz.
# usage: OUT=/some/dir PART=stream bench/gpu-s31.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$log/gpu.txt"
[ -f .ab/lib.tgz ] && tar xzf .ab/lib.tgz
case "${PART:?set PART}" in
ncu)
  # Prepared for the next session (bench/NOTES-decode.md "Left after session 31", item 2): Nsight
  # Compute of hdim 64 split-KV at b1 h56 64k with each loader, next to the micro-benchmark's
  # cp.async stream of the same ring (.ab/stream built from bench/decode_stream_micro.cu), with
  # warp-state and shared-memory detail.
  secs="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section SchedulerStats --section MemoryWorkloadAnalysis --section SourceCounters"
  for tma in 0 1; do
    stamp "ncu kernel FLASHKIT_DECODE_TMA=$tma"
    FLASHKIT_DECODE_TMA=$tma timeout 150 ncu --profile-from-start off $secs python3 bench/profile_decode.py \
      --shapes 64,1,56,65536 --schedules split_kv >"$log/ncu-kernel-tma$tma.txt" 2>&1
    stamp "rc=$?"
  done
  stamp "ncu micro"
  timeout 120 ncu $secs --launch-skip 1 --launch-count 1 -k regex:stream_kernel .ab/stream --reps 1 \
    --shape 1,56,65536,64 cpm:s:2:64:4:4 >"$log/ncu-micro.txt" 2>&1
  stamp "rc=$?"
  grep -E "Duration|DRAM Throughput|Achieved Occupancy|Warp Cycles Per Issued|Stall|Registers Per" \
    "$log"/ncu-*.txt | cut -c1-200 | head -60
  ;;
ab)
  # Extensions in turn (ab_rounds, gpu_prelude.sh; variants as .ab/var-<name>.so), each timed by
  # bench/decode.py on SHAPES with VARIANTS columns; a table of every column last.
  ab_decode() {
    timeout 120 python3 bench/decode.py --out "$log/r$1-$2" --shapes $SHAPES --skip "${SKIP:-}" \
      --variants "${VARIANTS:-}"
  }
  ab_rounds ab_decode ${VARS:?}
  python3 bench/ab_decode_table.py "$log"/r*-* | tee "$out/ab-table.txt"
  SHAPES=  # the A/B was the bench
  ;;
dec)
  # The decode GPU tests (each of LOADERS: default, 0 / 1 = FLASHKIT_DECODE_TMA forced),
  # memcheck / racecheck on the small ones, the torch decode tests.
  for tma in ${LOADERS:-default 0 1}; do
    [ "$tma" = default ] && tma=""
    stamp "decode tests ${tma:+FLASHKIT_DECODE_TMA=$tma}"
    ${tma:+env FLASHKIT_DECODE_TMA=$tma} timeout 200 build-dev/flashkit_gpu_tests --gtest_filter='DecodeGpu*:MergeStates*' \
      >"$log/tests$tma.log" 2>&1
    stamp "rc=$?"
    grep -E "^\[  FAILED|^\[  PASSED|Failure" "$log/tests$tma.log" | tail -8
  done
  sanitize build-dev/flashkit_gpu_tests 'DecodeGpuSmall*'
  mkdir -p "$log/default"; mv "$log"/memcheck.log "$log"/racecheck.log "$log/default/" 2>/dev/null
  if [ -n "${SAN_CPASYNC-1}" ]; then
    FLASHKIT_DECODE_TMA=0 sanitize build-dev/flashkit_gpu_tests 'DecodeGpuSmall*'
    mkdir -p "$log/cpasync"; mv "$log"/memcheck.log "$log"/racecheck.log "$log/cpasync/" 2>/dev/null
  fi
  timeout 120 python3 -m pytest -q tests/python/test_torch_decode.py >"$log/pytest.log" 2>&1
  stamp "torch decode tests rc=$?"; tail -2 "$log/pytest.log"
  ;;
stream)
  # STREAM_RUNS: "shape=config,config,...;shape=..." (configs: bench/decode_stream_micro.cu)
  IFS=';' read -ra runs <<<"${STREAM_RUNS:?}"
  for r in "${runs[@]}"; do
    shape=${r%%=*}
    stamp "stream $shape"
    cfgs=${r#*=}
    timeout 150 .ab/stream --shape "$shape" ${cfgs//,/ } 2>&1 | tee "$out/stream-${shape//,/x}.txt"
  done
  ;;
esac
if [ -n "${SWEEP:-}" ]; then  # the full sweep (the README's plot), SWEEP names the result
  stamp "bench/decode.py sweep ($(left) s left)"
  timeout $(( $(left) - 5 )) python3 bench/decode.py --out "$out" --budget $(( $(left) - 30 )) >"$log/sweep.log" 2>&1
  stamp "rc=$?"
  grep -E "^d(64|128) " "$log/sweep.log" | cut -c1-400
fi
if [ -n "${SHAPES:-}" ]; then
  stamp "bench/decode.py ($(left) s left)"
  timeout $(( $(left) - 5 )) python3 bench/decode.py --out "$out" --shapes $SHAPES --skip "${SKIP:-}" \
    ${HEADMAJOR:+--headmajor} --variants "${VARIANTS:-}" >"$log/decode.log" 2>&1
  stamp "rc=$?"
  grep -E "^d(64|128) " "$log/decode.log" | cut -c1-1500
fi
(cd "$out" && tar czf logs.tgz t && rm -rf t)
