#!/usr/bin/env bash
# Session 12 call 12 (branch h/d256-fwd-variants): the Hopper forward at hdim 256 with window and
# ALiBi (64-key tiles). Minimal build, the sm90 attention tests (their hdim 256 variant cases run
# the forward only: a minimal build has no sm80 hdim 256 backward), bench/variants.py forward-only
# at hdim 256 (plain, window, ALiBi; SDPA's efficient backend with the same masks as the peer),
# then memcheck and racecheck on AttentionGpuSmall.Sm90AndSm80PathsVariants.
# usage: OUT=/some/dir bench/gpu-s12f.sh   (.carry and .whl carried)
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
stamp "build (minimal) + sm90 attention tests"
timeout 430 tests/gpu/run --kernels minimal --filter 'AttentionGpuSm90*:AttentionGpuSmall.Sm90*' \
  --no-sanitize --out "$log" >"$log/run.txt" 2>&1
stamp "tests/gpu/run rc=$?"
grep -E "PASSED|FAILED|SKIPPED|Failure|error" "$log/run.txt" "$log/gpu_tests.log" 2>/dev/null | head -12
stamp "variants hdim 256 forward ($(left) s left)"
timeout 60 python3 bench/variants.py --out "$out" --hdim 256 --heads 8 --batch 2 --seqlen 8192 \
  --variants window,alibi --fwd-only >"$log/variants.log" 2>&1
stamp "rc=$?"
tail -8 "$log/variants.log"
t=AttentionGpuSmall.Sm90AndSm80PathsVariants
for tool in memcheck racecheck; do
  stamp "$tool ($(left) s left)"
  timeout $(( $(left) - 8 )) compute-sanitizer --tool $tool --error-exitcode 9 build-gpu/flashkit_gpu_tests \
    --gtest_filter="$t" >"$log/$tool.log" 2>&1
  stamp "rc=$?"
  grep -E "SUMMARY|PASSED|FAILED" "$log/$tool.log"
done
(cd "$out" && tar czf logs.tgz t && rm -rf t)
