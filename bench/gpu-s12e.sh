#!/usr/bin/env bash
# Session 12 call 7: main with the hdim 256 dQ pass v2. Minimal build, the Hopper attention tests
# (AttentionGpuSm90*, AttentionGpuSmall.Sm90*), bench/attention.py at hdim 256 (flashkit, flash,
# cuDNN in one process), then compute-sanitizer: memcheck on the three small sm90 tests, racecheck
# on each of them in turn (each with its own time limit, so a slow one does not hide the others).
# Call 9 reran it after the column kernel's owners (NAME=owners: the result file's suffix).
# HDIMS=256,128,64 measures every bucket in the same process.
# usage: OUT=/some/dir [NAME=suffix] bench/gpu-s12e.sh   (.carry and .whl carried)
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
stamp "build (minimal) + sm90 attention tests"
timeout 420 tests/gpu/run --kernels minimal --filter 'AttentionGpuSm90*:AttentionGpuSmall.Sm90*' \
  --no-sanitize --out "$log" >"$log/run.txt" 2>&1
stamp "tests/gpu/run rc=$?"
grep -E "PASSED|FAILED|SKIPPED|Failure|error" "$log/run.txt" "$log/gpu_tests.log" 2>/dev/null | head -12
stamp "bench/attention.py hdim 256 ($(left) s left)"
timeout 150 python3 bench/attention.py --out "$out" --methods flashkit,flash,cudnn \
  --hdims ${HDIMS:-256} --seqlens 2048,4096,8192,16384 --name attention-s12-d256-${NAME:-v2} >"$log/attn.log" 2>&1
stamp "rc=$?"
tail -12 "$log/attn.log"
small='AttentionGpuSmall.Sm90AndSm80Paths:AttentionGpuSmall.Sm90PaddedBuckets:AttentionGpuSmall.Sm90AndSm80BackwardDeterministic'
stamp "memcheck"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 build-gpu/flashkit_gpu_tests \
  --gtest_filter="$small" >"$log/memcheck.log" 2>&1
stamp "rc=$?"
grep -E "ERROR SUMMARY|PASSED|FAILED" "$log/memcheck.log"
for t in Sm90PaddedBuckets Sm90AndSm80BackwardDeterministic Sm90AndSm80Paths; do
  stamp "racecheck $t ($(left) s left)"
  timeout $(( $(left) - 8 )) compute-sanitizer --tool racecheck --error-exitcode 9 build-gpu/flashkit_gpu_tests \
    --gtest_filter="AttentionGpuSmall.$t" >"$log/racecheck-$t.log" 2>&1
  stamp "rc=$?"
  grep -E "RACECHECK SUMMARY|PASSED|FAILED" "$log/racecheck-$t.log"
done
(cd "$out" && tar czf logs.tgz t && rm -rf t)
