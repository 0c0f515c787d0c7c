#!/usr/bin/env bash
# Session 16: the library on the GPU after the forward's counter-drawn causal tiles (v8), with the
# test binary and the Python extension built beforehand on the CPU machine (see gpu-s15b.sh and
# gpu-s15c.sh for the builds; carry ["build-dev/flashkit_gpu_tests",
# "python/flashkit/_C.cpython-312-x86_64-linux-gnu.so"]). Runs the Hopper attention tests, memcheck
# and racecheck on the small sm90 ones, the torch attention tests on the GPU (CUDA-graph replays
# of counter-drawn tiles among them), then bench/attention.py (forward, backward, memory;
# flashkit / flash / cudnn in one process). usage: OUT=/some/dir [NAME=attention-s16] bench/gpu-s16b.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
bin=${BIN:-build-dev/flashkit_gpu_tests}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$log/gpu.txt"
stamp "sm90 + fp8 + small attention tests"
timeout 200 "$bin" --gtest_filter='AttentionGpuSm90*:AttentionGpuSmall.*:AttentionGpuFp8*' >"$log/tests.log" 2>&1
stamp "rc=$?"
grep -E "^\[  FAILED|^\[  PASSED|tests ran|SKIPPED \]" "$log/tests.log" | tail -12
for tool in memcheck racecheck; do
  stamp "$tool sm90 small ($(left) s left)"
  timeout "${SAN_EACH:-60}" compute-sanitizer --tool $tool --error-exitcode 9 "$bin" \
    --gtest_filter='AttentionGpuSmall.Sm90AndSm80Paths:AttentionGpuSmall.Fp8Forward' >"$log/$tool.log" 2>&1
  stamp "rc=$?"
  grep -E "SUMMARY|PASSED|FAILED" "$log/$tool.log"
done
stamp "torch attention tests"
timeout 120 python3 -m pytest -q -x tests/python/test_torch_attention.py >"$log/pytest.log" 2>&1
stamp "rc=$?"
tail -3 "$log/pytest.log"
stamp "bench/attention.py ($(left) s left)"
timeout $(( $(left) - 10 )) python3 bench/attention.py --out "$out" --methods flashkit,flash,cudnn \
  --hdims 128,64,256 --seqlens 2048,4096,8192,16384 --name "${NAME:-attention-s16}" >"$log/attn.log" 2>&1
stamp "rc=$?"
tail -45 "$log/attn.log"
(cd "$out" && tar czf logs.tgz t && rm -rf t)
