#!/usr/bin/env bash
# Session 13 last call: the CLI after its refactor (shared GPU timer): minimal build, then
# `flashkit bench attention-fp8` at hdim 128 and `flashkit bench decode` on the default problem,
# and `flashkit check --device cuda`.
# usage: OUT=/some/dir bench/gpu-s13e.sh   (.carry carried)
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
stamp "build (minimal)"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHKIT_CUDA=ON -DFLASHKIT_CUDA_ARCHS=90a \
  -DFLASHKIT_KERNELS=minimal -DFLASHKIT_CUTLASS_DIR="$(realpath .carry/cutlass/include)" \
  -DFLASHKIT_GTEST_SRC="$(realpath .carry/googletest)" -DFLASHKIT_PYTHON=OFF >"$log/cmake.log" 2>&1
timeout 480 ninja -C build-gpu flashkit_cli >"$log/build.log" 2>&1
stamp "rc=$?"
ls build-gpu/flashkit* | head
timeout 60 build-gpu/flashkit bench attention-fp8 --hdim 128 --seqlen 8192,16384 --repeats 10 2>&1 | tail -8
timeout 30 build-gpu/flashkit bench decode 2>&1 | tail -4
timeout 60 build-gpu/flashkit check --device cuda 2>&1 | tail -12
(cd "$out" && tar czf logs.tgz t && rm -rf t)
