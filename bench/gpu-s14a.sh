#!/usr/bin/env bash
# Session 14 call: main on the GPU after the fp8 changes (rescale skip, Python attention_fp8).
# Minimal build (tests/gpu/run), the fp8 and Hopper attention tests, memcheck + racecheck on the
# small fp8 tests, the Python fp8 tests on torch (CUDA and CPU), then `flashkit bench
# attention-fp8` in the time left (HDIMS, default 128,256,64).
# usage: OUT=/some/dir [HDIMS=128] [BUILD_S=440] [BUILD_ONLY=1 | SKIP_BUILD=1] bench/gpu-s14a.sh
#   (.carry carried; SKIP_BUILD=1 on a warm machine that kept build-gpu/)
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
if [ "${SKIP_BUILD:-0}" != 1 ]; then
stamp "build (minimal) + fp8 and sm90 attention tests"
timeout ${BUILD_S:-440} tests/gpu/run --kernels minimal \
  --filter "AttentionGpuFp8*:AttentionGpuSmall.Fp8*:AttentionGpuSm90*:AttentionGpuSmall.Sm90*" \
  --no-sanitize --out "$log" >"$log/run.txt" 2>&1
stamp "tests/gpu/run rc=$?"
grep -E "PASSED|FAILED|SKIPPED|Failure|error|build" "$log/run.txt" "$log/gpu_tests.log" 2>/dev/null | head -16
fi
[ "${BUILD_ONLY:-0}" = 1 ] && { (cd "$out" && tar czf logs.tgz t && rm -rf t); exit 0; }
for tool in memcheck racecheck; do
  stamp "$tool fp8 small ($(left) s left)"
  timeout $(( $(left) > 100 ? 60 : $(left) - 10 )) compute-sanitizer --tool $tool --error-exitcode 9 \
    build-gpu/flashkit_gpu_tests --gtest_filter='AttentionGpuSmall.Fp8*' >"$log/$tool.log" 2>&1
  stamp "rc=$?"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$log/$tool.log"
done
stamp "pytest fp8 ($(left) s left)"
PYTHONPATH=python timeout 120 python3 -m pytest -q -k "fp8" tests/python/test_torch_attention.py \
  tests/python/test_attention.py >"$log/pytest.txt" 2>&1
stamp "rc=$?"
tail -15 "$log/pytest.txt"
gpu=h100; nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && gpu=h200
if [ "$(left)" -gt 40 ]; then
  stamp "flashkit bench attention-fp8 ($(left) s left)"
  timeout $(( $(left) - 10 )) build-gpu/flashkit bench attention-fp8 --hdim "${HDIMS:-128,256,64}" \
    --repeats 20 --json "$out/$(date +%Y-%m-%d)-$gpu-attention-fp8-s14.json" >"$log/bench.txt" 2>&1
  stamp "rc=$?"
  cat "$log/bench.txt"
fi
(cd "$out" && tar czf logs.tgz t && rm -rf t)
