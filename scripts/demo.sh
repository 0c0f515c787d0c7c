#!/usr/bin/env bash
# Installs what is missing, builds flashkit and runs `flashkit demo`: attention forward+backward,
# decode and MAS on the built-in default problem, on the GPU when there is one, else on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cuda=OFF
if command -v nvcc >/dev/null && nvidia-smi -L >/dev/null 2>&1; then cuda=ON; fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHKIT_CUDA=$cuda \
  -DFLASHKIT_KERNELS="${FLASHKIT_KERNELS:-all}" -DFLASHKIT_TESTS=OFF -DFLASHKIT_PYTHON=OFF >/dev/null
echo "[demo] building (CUDA kernels: $cuda) ..."
ninja -C build flashkit_cli
build/flashkit info
build/flashkit demo "$@"
