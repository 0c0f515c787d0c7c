#!/usr/bin/env bash
# What session 10 left GPU-unverified (its closing note): the MAS GPU tests with the new
# MasGpuSmall.EarlyZerosPathKernel under memcheck/racecheck (and the path-warp rule refined after
# the last call), the torch attention and decode tests on CUDA (eager decode without the custom
# op, no materialised lse gradient, CUDA-graph capture), and the host time per call. Minimal build.
# usage: OUT=/some/dir bench/gpu-verify-s10.sh   (.carry and .whl carried)
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
mas_tests minimal 420
timeout 150 python3 -m pytest -q tests/python/test_torch_attention.py tests/python/test_torch_decode.py \
  >"$log/pytest.log" 2>&1
stamp "pytest rc=$? $(tail -1 "$log/pytest.log")"
grep -E "FAILED|Error" "$log/pytest.log" | head -10
timeout 60 python3 bench/host_overhead.py 2>&1 | tail -8
(cd "$out" && tar czf logs.tgz t && rm -rf t)
