#!/usr/bin/env bash
# Session 31's GPU calls (its prepared PART=ncu ran in session 32: gpu-s32.sh) (bench/NOTES-decode.md "Session 31"). PART=stream: the K/V streaming
# micro-benchmark (.ab/stream, built here from bench/decode_stream_micro.cu) on STREAM_SHAPES with
# the configs in STREAM_RUNS, then bench/decode.py on SHAPES (the real kernels, torch flash and
# cuDNN in the same process, VARIANTS columns). The library comes built in .ab/lib.tgz.
# usage: OUT=/some/dir PART=stream bench/gpu-s31.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$log/gpu.txt"
[ -f .ab/lib.tgz ] && tar xzf .ab/lib.tgz
case "${PART:?set PART}" in
ab)
  # Extensions in turn (ab_rounds, gpu_prelude.sh; variants as .ab/var-<name>.so), each timed by
  # bench/decode.py on SHAPES with VARIANTS columns; a table of every column last.
  decode_ab ${VARS:?}
  SHAPES=  # the A/B was the bench
  ;;
dec)
  # The decode GPU tests (each of LOADERS: default, 0 / 1 = FLASHKIT_DECODE_TMA forced),
  # memcheck / racecheck on the small ones, the torch decode tests.
  decode_tests_each_loader
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
[ -n "${SWEEP:-}" ] && decode_sweep  # the full sweep (the README's plot)
if [ -n "${SHAPES:-}" ]; then
  stamp "bench/decode.py ($(left) s left)"
  timeout $(( $(left) - 5 )) python3 bench/decode.py --out "$out" --shapes $SHAPES --skip "${SKIP:-}" \
    ${HEADMAJOR:+--headmajor} --variants "${VARIANTS:-}" >"$log/decode.log" 2>&1
  stamp "rc=$?"
  grep -E "^d(64|128) " "$log/decode.log" | cut -c1-1500
fi
(cd "$out" && tar czf logs.tgz t && rm -rf t)
