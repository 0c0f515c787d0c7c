#!/usr/bin/env bash
# MAS-only GPU pass (a lighter tests/gpu/run): builds the minimal kernel set for sm_90a, runs the
# MAS GPU tests (a private test binary if the shared one does not build), bench/mas.py, then
# compute-sanitizer memcheck + racecheck on MasGpuSmall*; logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-build-gpu/out}; mkdir -p "$out"
t0=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHKIT_CUDA=ON -DFLASHKIT_CUDA_ARCHS=90a \
  -DFLASHKIT_KERNELS=minimal -DFLASHKIT_CUTLASS_DIR="$(realpath .carry/cutlass/include)" \
  -DFLASHKIT_GTEST_SRC="$(realpath .carry/googletest)" -DFLASHKIT_PYTHON=ON \
  -DPython_EXECUTABLE="$(command -v python3)" >"$out/cmake.log" 2>&1 || { tail -20 "$out/cmake.log"; exit 1; }
tests=build-gpu/flashkit_gpu_tests
if ! ninja -C build-gpu flashkit_gpu_tests _C >"$out/build.log" 2>&1; then
  grep -E "error" "$out/build.log" | head -10
  ninja -C build-gpu flashkit _C gtest_main >"$out/build2.log" 2>&1 || { grep -E "error" "$out/build2.log" | head -30; exit 1; }
  nvcc -std=c++20 -gencode=arch=compute_90a,code=sm_90a -O2 -Iinclude -Isrc -Itests/common \
    -I.carry/googletest/googletest/include -DFLASHKIT_WITH_CUDA=1 tests/gpu/test_mas.cu \
    build-gpu/libflashkit.a build-gpu/lib/libgtest_main.a build-gpu/lib/libgtest.a -lcuda \
    -Xcompiler -fopenmp -o build-gpu/mas_tests >"$out/build3.log" 2>&1 || { tail -20 "$out/build3.log"; exit 1; }
  tests=build-gpu/mas_tests
fi
echo "build ok in $(( $(date +%s) - t0 )) s ($tests)"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
timeout 200 $tests --gtest_filter='Mas*' >"$out/mas_tests.log" 2>&1
echo "gpu tests rc=$?"; grep -E "^\[       OK|^\[  FAILED|^\[  PASSED|Failure|Expected|Which is|differ" "$out/mas_tests.log" | head -40
[ "${BENCH:-1}" = 1 ] && PYTHONPATH=python PYTHONUNBUFFERED=1 timeout ${BENCH_TIMEOUT:-240} python3 bench/mas.py --out "$out" ${BENCH_ARGS:-} 2>&1 | tee "$out/bench_mas.log" | tail -45
for tool in memcheck racecheck; do
  timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 $tests --gtest_filter='MasGpuSmall*' \
    >"$out/sanitize_$tool.log" 2>&1
  echo "sanitizer $tool rc=$?"; grep -E "ERROR SUMMARY|=========.*(Invalid|Race|Error)" "$out/sanitize_$tool.log" | head -5
done
