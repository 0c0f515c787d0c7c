#!/usr/bin/env bash
# Session 15: main on the GPU after the backward's opaque thread index / dK-dV staging. Minimal
# build (tests/gpu/run) with the Hopper attention tests, memcheck + racecheck on the small Hopper
# tests, then bench/attention.py in the time left (forward and backward, flashkit / flash / cudnn
# in one process, HDIMS default 128,64,256, 2k-16k).
# usage: OUT=/some/dir [BUILD_S=570] [BUILD_ONLY=1 | SKIP_BUILD=1] [HDIMS=..] [SAN_EACH=60] bench/gpu-s15b.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  stamp "build (minimal) + sm90 attention tests"
  timeout ${BUILD_S:-570} tests/gpu/run --kernels minimal --filter 'AttentionGpuSm90*:AttentionGpuSmall.Sm90*' \
    --no-sanitize --out "$log" >"$log/run.txt" 2>&1
  stamp "tests/gpu/run rc=$?"
  grep -E "PASSED|FAILED|SKIPPED|Failure|error" "$log/run.txt" "$log/gpu_tests.log" 2>/dev/null | head -16
fi
[ "${BUILD_ONLY:-0}" = 1 ] && { (cd "$out" && tar czf logs.tgz t && rm -rf t); exit 0; }
for tool in memcheck racecheck; do
  stamp "$tool sm90 small ($(left) s left)"
  timeout "${SAN_EACH:-60}" compute-sanitizer --tool $tool --error-exitcode 9 build-gpu/flashkit_gpu_tests \
    --gtest_filter='AttentionGpuSmall.Sm90*' >"$log/$tool.log" 2>&1
  stamp "rc=$?"
  grep -E "SUMMARY|PASSED|FAILED" "$log/$tool.log"
done
stamp "bench/attention.py ($(left) s left)"
timeout $(( $(left) - 10 )) python3 bench/attention.py --out "$out" --methods flashkit,flash,cudnn \
  --hdims "${HDIMS:-128,64,256}" --seqlens 2048,4096,8192,16384 --name attention-s15 >"$log/attn.log" 2>&1
stamp "rc=$?"
grep -E "^d|worst|hdim|causal" "$log/attn.log" | tail -60
(cd "$out" && tar czf logs.tgz t && rm -rf t)
