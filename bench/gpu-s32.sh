#!/usr/bin/env bash
# Session 32's GPU calls (bench/NOTES-decode.md "Session 32"). The library comes built in
# .ab/lib.tgz (build-dev/flashkit_gpu_tests, python/flashkit/_C*.so, .ab/var-*.so variants).
# PARTS (any of, in order):
#   trace  bench/decode_trace.py with .ab/var-trace.so (decode built with -DFK_DECODE_TRACE) on
#          TRACE_SHAPES x TRACE_SCHEDULES, cuDNN beside each shape
#   ncu    Nsight Compute of hdim 64 split-KV at b1 h56 64k with each loader, next to the
#          micro-benchmark's cp.async stream of the same ring (.ab/stream)
#   ab     extensions in turn (ab_rounds; VARS, variants as .ab/var-<name>.so), each timed by
#          bench/decode.py on SHAPES with VARIANTS columns; a table of every column last
#   pyvar  the torch decode tests with each of PYVARS (.ab/var-<name>.so), cp.async forced too
#   dtypes bench/decode.py on SHAPES with bf16 and with fp16 caches, a table of both
#   steal  the decode tests, also with FLASHKIT_DECODE_STEAL=1 (sanitizers too), and a bench
#          (v12's knob; v12 was reverted after call 13, so this part records what ran)
#   dec    the decode GPU tests (each of LOADERS), sanitizers on the small ones, torch decode tests
# SWEEP=1 then runs bench/decode.py's full sweep into $OUT (the README's plot).
# usage: OUT=/some/dir PARTS="trace ncu" bench/gpu-s32.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
gpu_and_carried
for part in ${PARTS:?set PARTS}; do
  case "$part" in
  trace)
    mkdir -p "$log/trace_pkg" && cp .ab/var-trace.so "$log/trace_pkg/_C.cpython-312-x86_64-linux-gnu.so"
    stamp "trace"
    env ${TRACE_ENV:-} FLASHKIT_EXT_DIR="$log/trace_pkg" timeout 150 python3 bench/decode_trace.py --cudnn \
      --shapes ${TRACE_SHAPES:-128,1,56,65536 64,1,56,65536 128,4,32,131072 64,4,32,131072} \
      --schedules "${TRACE_SCHEDULES:-lean,split_kv}" >"$out/trace.txt" 2>&1
    stamp "rc=$?"
    sed -e 's/ (us)$//' "$out/trace.txt" | cut -c1-330
    ;;
  ncu)
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
    cp "$log"/ncu-*.txt "$out/"
    grep -E "Duration|DRAM Throughput|Achieved Occupancy|Warp Cycles Per Issued|Registers Per|Issued Warp" \
      "$log"/ncu-*.txt | cut -c1-160 | head -40
    ;;
  ab)
    decode_ab ${VARS:?}
    ;;
  pyvar)
    # The torch decode tests with each of PYVARS (.ab/var-<name>.so as the extension), with the
    # default loader and with cp.async forced; main's extension back afterwards.
    so=$(ls python/flashkit/_C*.so); cp "$so" "$log/base_C.so"
    for v in ${PYVARS:?}; do
      cp ".ab/var-$v.so" "$so"
      for tma in default 0; do
        [ "$tma" = default ] && tma=""
        timeout 120 env ${tma:+FLASHKIT_DECODE_TMA=$tma} python3 -m pytest -q tests/python/test_torch_decode.py \
          >"$log/pytest-$v$tma.log" 2>&1
        stamp "torch decode tests, $v ${tma:+FLASHKIT_DECODE_TMA=$tma}: rc=$?"; tail -1 "$log/pytest-$v$tma.log"
      done
    done
    cp "$log/base_C.so" "$so"
    ;;
  dtypes)
    # bench/decode.py on SHAPES (VARIANTS, SKIP) once with bf16 and once with fp16 caches
    for dt in bfloat16 float16; do
      stamp "decode.py $dt"
      timeout 150 python3 bench/decode.py --out "$log/$dt" --shapes $SHAPES --skip "${SKIP:-}" \
        --variants "${VARIANTS:-}" --dtype $dt >"$log/$dt.log" 2>&1
      stamp "rc=$?"
    done
    python3 bench/ab_decode_table.py "$log"/bfloat16 "$log"/float16 | tee "$out/dtypes-table.txt"
    ;;
  steal)
    # The decode tests with the default rule and with FLASHKIT_DECODE_STEAL=1, the sanitizers on
    # the small ones with it, then bench/decode.py on SHAPES (VARIANTS, SKIP).
    decode_tests_each_loader
    stamp "decode tests FLASHKIT_DECODE_STEAL=1"
    FLASHKIT_DECODE_STEAL=1 timeout 120 build-dev/flashkit_gpu_tests --gtest_filter='DecodeGpu*:MergeStates*' \
      >"$log/tests-steal.log" 2>&1
    stamp "rc=$?"
    grep -E "^\[  FAILED|^\[  PASSED|Failure" "$log/tests-steal.log" | tail -8
    SAN_EACH=40 FLASHKIT_DECODE_STEAL=1 sanitize build-dev/flashkit_gpu_tests 'DecodeGpuSmall*'
    stamp "decode.py"
    timeout 100 python3 bench/decode.py --out "$log/bench" --shapes $SHAPES --skip "${SKIP:-}" \
      --variants "${VARIANTS:-}" >"$log/bench.log" 2>&1
    stamp "rc=$?"
    python3 bench/ab_decode_table.py "$log"/bench | tee "$out/steal-table.txt"
    ;;
  dec)
    decode_tests_each_loader
    sanitize build-dev/flashkit_gpu_tests 'DecodeGpuSmall*'
    timeout 120 python3 -m pytest -q tests/python/test_torch_decode.py >"$log/pytest.log" 2>&1
    stamp "torch decode tests rc=$?"; tail -2 "$log/pytest.log"
    ;;
  esac
done
[ -n "${SWEEP:-}" ] && decode_sweep  # the full sweep (the README's plot)
(cd "$out" && tar czf logs.tgz t && rm -rf t)
