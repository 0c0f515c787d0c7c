#!/usr/bin/env bash
# Decode-only GPU pass (a lighter tests/gpu/run): builds the minimal kernel set for sm_90a, runs
# the decode GPU tests, compute-sanitizer memcheck + racecheck on DecodeGpuSmall*, `flashkit
# check --op decode`, a few `flashkit bench decode` shapes and bench/decode.py; logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-build-gpu/out}; mkdir -p "$out"
t0=$(date +%s)
# The tree arrives with its original mtimes: touch it so a warm machine rebuilds what changed.
find src include tools tests python/src -type f -exec touch {} +
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHKIT_CUDA=ON -DFLASHKIT_CUDA_ARCHS=90a \
  -DFLASHKIT_KERNELS=minimal -DFLASHKIT_CUTLASS_DIR="$(realpath .carry/cutlass/include)" \
  -DFLASHKIT_GTEST_SRC="$(realpath .carry/googletest)" -DFLASHKIT_PYTHON=ON \
  -DPython_EXECUTABLE="$(command -v python3)" >"$out/cmake.log" 2>&1 || { tail -20 "$out/cmake.log"; exit 1; }
ninja -C build-gpu flashkit_gpu_tests flashkit_cli _C >"$out/build.log" 2>&1 || { grep -E "error" "$out/build.log" | head -30; exit 1; }
echo "build ok in $(( $(date +%s) - t0 )) s"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
timeout 300 build-gpu/flashkit_gpu_tests --gtest_filter='DecodeGpu*' >"$out/decode_tests.log" 2>&1
echo "gpu tests rc=$?"; grep -E "^\[  FAILED|^\[  PASSED|Failure|error|Expected|Which is|describe|lean|split|single" "$out/decode_tests.log" | head -40
for tool in memcheck racecheck; do
  timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 build-gpu/flashkit_gpu_tests \
    --gtest_filter='DecodeGpuSmall*' >"$out/sanitize_$tool.log" 2>&1
  echo "sanitizer $tool rc=$?"; grep -E "ERROR SUMMARY|=========.*(Invalid|Race|Error)" "$out/sanitize_$tool.log" | head -5
done
build-gpu/flashkit check --device cuda --op decode 2>&1 | tail -6
build-gpu/flashkit demo --device cuda --op decode 2>&1 | tail -6
for s in single split_kv lean; do build-gpu/flashkit bench decode --device cuda --batch 1 --heads 56 --kv-heads 56 --hdim 64 --ctx 8192 --schedule $s 2>&1 | tail -1; done
for s in single split_kv lean; do build-gpu/flashkit bench decode --device cuda --batch 1 --heads 32 --kv-heads 32 --hdim 128 --ctx 131072 --schedule $s 2>&1 | tail -1; done
[ "${BENCH:-1}" = 1 ] && PYTHONPATH=python PYTHONUNBUFFERED=1 timeout 290 python3 bench/decode.py --out "$out" ${BENCH_ARGS:-} 2>&1 | tee "$out/bench_decode.log" | tail -40
