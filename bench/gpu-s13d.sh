#!/usr/bin/env bash
# Session 13 call: the FP8 forward through the library. Minimal build (tests/gpu/run), the fp8
# tests and the Hopper attention tests, memcheck + racecheck on the small fp8 tests, then
# `flashkit bench attention-fp8` (fp8 vs bf16 forward, errors against the fp64 reference) in the
# time left; BENCH_ONLY=1 skips the build and tests (a warm machine keeps build-gpu/).
# usage: OUT=/some/dir [BENCH_ONLY=1] [NAME=suffix] bench/gpu-s13d.sh   (.carry carried)
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
if [ "${BENCH_ONLY:-0}" != 1 ]; then
  stamp "build (minimal) + fp8 and sm90 attention tests"
  timeout 440 tests/gpu/run --kernels minimal \
    --filter "${FILTER:-AttentionGpuFp8*:AttentionGpuSmall.Fp8*:AttentionGpuSm90*:AttentionGpuSmall.Sm90*}" \
    --no-sanitize --out "$log" >"$log/run.txt" 2>&1
  stamp "tests/gpu/run rc=$?"
  grep -E "PASSED|FAILED|SKIPPED|Failure|error|build" "$log/run.txt" "$log/gpu_tests.log" 2>/dev/null | head -16
  for tool in memcheck racecheck; do
    stamp "$tool fp8 small ($(left) s left)"
    timeout $(( $(left) > 100 ? 90 : $(left) - 10 )) compute-sanitizer --tool $tool --error-exitcode 9 \
      build-gpu/flashkit_gpu_tests --gtest_filter='AttentionGpuSmall.Fp8*' >"$log/$tool.log" 2>&1
    stamp "rc=$?"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$log/$tool.log"
  done
fi
gpu=h100; nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && gpu=h200
if [ "$(left)" -gt 60 ]; then
  stamp "flashkit bench attention-fp8 ($(left) s left)"
  timeout $(( $(left) - 10 )) build-gpu/flashkit bench attention-fp8 --repeats 20 \
    --json "$out/$(date +%Y-%m-%d)-$gpu-attention-fp8${NAME:-}.json" >"$log/bench.txt" 2>&1
  stamp "rc=$?"
  cat "$log/bench.txt"
fi
(cd "$out" && tar czf logs.tgz t && rm -rf t)
