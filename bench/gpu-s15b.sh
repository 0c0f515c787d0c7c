#!/usr/bin/env bash
# Session 15: main on the GPU after the backward's opaque thread index / dK-dV staging, with a
# test binary built beforehand on the CPU machine (the device's own minimal build needs ~600 s):
#   cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHKIT_CUDA=ON \
#     -DFLASHKIT_CUDA_ARCHS=90a -DFLASHKIT_KERNELS=minimal -DFLASHKIT_CUTLASS_DIR=... \
#     -DFLASHKIT_GTEST_SRC=... -DFLASHKIT_PYTHON=OFF && ninja -C build-dev flashkit_gpu_tests
# then `run` with carry ["build-dev/flashkit_gpu_tests"]. Runs the Hopper attention tests, then
# memcheck and racecheck on the small ones (SAN_EACH seconds each, default 90).
# usage: OUT=/some/dir [BIN=build-dev/flashkit_gpu_tests] bench/gpu-s15b.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
bin=${BIN:-build-dev/flashkit_gpu_tests}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$log/gpu.txt"
stamp "sm90 attention tests"
timeout 200 "$bin" --gtest_filter='AttentionGpuSm90*:AttentionGpuSmall.Sm90*' >"$log/tests.log" 2>&1
stamp "rc=$?"
grep -E "^\[  FAILED|^\[  PASSED|tests ran|SKIPPED \]" "$log/tests.log" | tail -12
for tool in memcheck racecheck; do
  stamp "$tool sm90 small ($(left) s left)"
  timeout "${SAN_EACH:-90}" compute-sanitizer --tool $tool --error-exitcode 9 "$bin" \
    --gtest_filter='AttentionGpuSmall.Sm90*' >"$log/$tool.log" 2>&1
  stamp "rc=$?"
  grep -E "SUMMARY|PASSED|FAILED" "$log/$tool.log"
done
(cd "$out" && tar czf logs.tgz t && rm -rf t)
