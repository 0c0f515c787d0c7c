#!/usr/bin/env bash
# Session 10, after the eager-autograd change (python/flashkit/torch_ops.py): minimal build, the
# torch attention tests on the GPU (eager vs compiled, CUDA graphs, no host sync, dropout and
# block masks against the CPU), host time per call (bench/host_overhead.py), then
# bench/variants.py (batched timing) again.
# usage: OUT=/some/dir bench/gpu-s10c.sh   (.carry and .whl carried)
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
stamp "build"
timeout 420 tests/gpu/run --kernels minimal --no-tests --out "$log" >"$log/run.txt" 2>&1
stamp "build rc=$?"
timeout 120 python3 -m pytest -q tests/python/test_torch_attention.py >"$log/pytest.log" 2>&1
stamp "pytest rc=$? $(tail -1 "$log/pytest.log")"
grep -E "FAILED|Error" "$log/pytest.log" | head -10
timeout 60 python3 bench/host_overhead.py 2>&1 | tail -8
stamp "bench/variants.py"
timeout 150 python3 bench/variants.py --out "$out" >"$log/variants.log" 2>&1
stamp "rc=$?"
tail -18 "$log/variants.log"
(cd "$out" && tar czf logs.tgz t && rm -rf t)
ls "$out"
