#!/usr/bin/env bash
# The library on the GPU without building it there (the device's own minimal build needs ~600 s,
# more than a call): the test binary and the Python extension are built on the CPU machine,
#   cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHKIT_CUDA=ON \
#     -DFLASHKIT_CUDA_ARCHS=90a -DFLASHKIT_KERNELS=minimal -DFLASHKIT_CUTLASS_DIR=... \
#     -DFLASHKIT_GTEST_SRC=... -DFLASHKIT_PYTHON=ON -DPython_EXECUTABLE=<a python 3.12 with
#     nanobind> && ninja -C build-dev flashkit_gpu_tests _C
# (the device's Python is 3.12), then carried: ["build-dev/flashkit_gpu_tests",
# "python/flashkit/_C.cpython-312-x86_64-linux-gnu.so"]. Runs the Hopper, fp8 and small attention
# tests, the torch attention tests on the GPU (CUDA-graph replays of counter-drawn causal tiles
# among them), bench/attention.py (forward, backward, memory; flashkit / flash / cudnn in one
# process), then memcheck and racecheck on two small tests (SAN_EACH seconds each).
# usage: OUT=/some/dir [NAME=attention-s16] [BIN=build-dev/flashkit_gpu_tests] bench/gpu-library.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
bin=${BIN:-build-dev/flashkit_gpu_tests}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$log/gpu.txt"
library_tests "$bin" 'AttentionGpuSm90*:AttentionGpuSmall.*:AttentionGpuFp8*' 200
stamp "bench/attention.py ($(left) s left)"
timeout $(( $(left) - 2 * ${SAN_EACH:-60} - 10 )) python3 bench/attention.py --out "$out" --methods flashkit,flash,cudnn \
  --hdims 128,64,256 --seqlens 2048,4096,8192,16384 --name "${NAME:-attention-s16}" >"$log/attn.log" 2>&1
stamp "rc=$?"
tail -45 "$log/attn.log"
sanitize "$bin" 'AttentionGpuSmall.Sm90AndSm80Paths:AttentionGpuSmall.Fp8Forward'
(cd "$out" && tar czf logs.tgz t && rm -rf t)
