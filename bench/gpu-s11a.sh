#!/usr/bin/env bash
# Session 11 call 1: the Hopper backward at hdim 256 (64-key blocks shared by both consumer
# warpgroups; bench/NOTES-attention.md "sm90 backward at hdim 256"). Minimal build, the sm90
# attention tests (every 256 case now runs its backward too) with memcheck and racecheck on the
# small ones, then flashkit vs torch SDPA flash and cudnn at hdim 256, forward and backward.
# usage: OUT=/some/dir bench/gpu-s11a.sh   (.carry and .whl carried)
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
sm90_attention_tests minimal 440
stamp "racecheck MasGpuSmall.EarlyZerosPathKernel (session 10's check that timed out)"
timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 build-gpu/flashkit_gpu_tests \
  --gtest_filter='MasGpuSmall.EarlyZerosPathKernel' >"$log/race_mas.log" 2>&1
stamp "rc=$? $(grep -E 'ERROR SUMMARY|PASSED' "$log/race_mas.log" | tr '\n' ' ')"
stamp "bench/attention.py hdim 256 ($(left) s left)"
timeout $(( $(left) - 5 )) python3 bench/attention.py --out "$out" --methods flashkit,flash,cudnn \
  --hdims 256 --seqlens 2048,4096,8192,16384 --name attention-s11-d256 >"$log/attn.log" 2>&1
stamp "rc=$?"
tail -22 "$log/attn.log"
(cd "$out" && tar czf logs.tgz t && rm -rf t)
