#!/usr/bin/env bash
# Session 10: where the ~375 us of host time of a torch attention backward goes on the GPU
# machine (bench/NOTES-attention.md "Measured on the GPU"): minimal build, then
# bench/host_overhead.py --profile (cProfile of forward + backward, torch.profiler's CPU and CUDA
# events).
# usage: OUT=/some/dir bench/gpu-s10d.sh   (.carry and .whl carried)
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
stamp "build"
timeout 420 tests/gpu/run --kernels minimal --no-tests --out "$log" >"$log/run.txt" 2>&1
stamp "build rc=$?"
timeout 120 python3 bench/host_overhead.py --profile >"$log/host.log" 2>&1
stamp "rc=$?"
cat "$log/host.log" | cut -c1-180 | head -90
(cd "$out" && tar czf logs.tgz t && rm -rf t)
