#!/usr/bin/env bash
# Installs what is missing, builds flashkit with its tests (CUDA sources compiled when nvcc is
# present: on a machine without a GPU the `check` kernel set, which compile-checks every attention
# kernel template path and every decode/MAS kernel; with a GPU the minimal set, so the torch tests
# run on it), checks `pip install .`, and runs every CPU test (GoogleTest and pytest, through
# ctest). GPU tests run on a GPU machine with tests/gpu/run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs=${JOBS:-$(nproc)}
kernels=check
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then kernels=minimal; fi
cmake -S . -B build-test -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHKIT_KERNELS="${FLASHKIT_KERNELS:-$kernels}" -DFLASHKIT_CUDA_ARCHS="${FLASHKIT_CUDA_ARCHS:-90a}" \
  -DPython_EXECUTABLE="$(command -v python3)" >build-test.cmake.log
echo "[test] building ..."
ninja -C build-test -j "$jobs" >build-test.ninja.log 2>&1 || { tail -60 build-test.ninja.log; exit 1; }
echo "[test] pip install . (CPU build) into build-test/pip-target ..."
python3 -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps \
  --target build-test/pip-target --upgrade --config-settings=cmake.define.FLASHKIT_CUDA=OFF \
  --config-settings=build-dir=build-test/pip-build .
(cd /tmp && PYTHONPATH="$OLDPWD/build-test/pip-target" python3 -c \
  "import flashkit; print('[test] pip-installed flashkit', flashkit.__version__, flashkit.build_info())")
echo "[test] running the CPU tests ..."
cd build-test
# ctest's summary ("100% tests passed, 0 tests failed out of N") is the last line printed.
ctest --output-on-failure -j "$jobs" 2>&1 | grep -v '^Total Test time'
