#!/usr/bin/env bash
# Session 23's GPU calls (bench/NOTES-attention.md "sm90 forward v9: the pipeline carried across
# tiles"; bench/NOTES-mas.md "Super-MAS's own timing"). The library comes built from the CPU
# machine in .ab/lib.tgz (bench/gpu-library.sh says how); the base build (session 22's python
# package, main at c5a568b) in .ab/base23.tgz.
# PART=carry: every attention gtest, memcheck / racecheck on the small sm90 tests, then per-kernel
# times (bench/kernel_breakdown.py) of the base and the new build in turn: hdim 128 plain 8k / 2k,
# causal 8k / 2k, block-sparse 0.1, window, dropout; hdim 64 block-sparse 0.1.
# PART=quick: the sm90 and block-mask tests, and a subset of carry's kernel times.
# PART=bench: bench/attention.py forward (flashkit, flash, cuDNN; hdim 128 and 64, 2k-16k), then
# bench/variants.py at hdim 128 and 64, then bench/mas.py (both timings).
# usage: tar xzf .ab/lib.tgz && tar xzf .ab/base23.tgz -C .ab && OUT=/some/dir PART=carry bench/gpu-s23.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
carried_library
export PYTHONPATH=bench:$PYTHONPATH
case "${PART:?set PART}" in
carry)
  gtest all 'Attention*' "${TEST_SECS:-300}"
  grep -E "tests ran|PASSED|FAILED" "$log/all.log" | tail -3
  SAN_EACH=${SAN_EACH:-80} sanitize "$bin" 'AttentionGpuSmall.Sm90AndSm80Paths:AttentionGpuSmall.Sm90AndSm80PathsVariants:AttentionGpuSmall.Sm90PaddedBuckets'
  ab_times 128 "" "--seqlen 2048" "--causal" "--seqlen 2048 --causal" "--density 0.1" \
    "--window 1024,1024" "--dropout 0.1"
  ab_times 64 "--density 0.1" "--seqlen 2048 --density 0.5"
  ;;
quick)  # a rebuilt carry: the sm90 / block-mask tests, then the kernel times that moved most
  gtest q 'AttentionGpuSm90*:AttentionGpuBlockSparse*:AttentionGpuSmall.Sm90*' 200
  ab_times 128 "" "--seqlen 2048" "--seqlen 2048 --causal" "--density 0.1" "--window 1024,1024"
  ab_times 64 "--density 0.1"
  ;;
bench)
  fwd_vs_cudnn "attention-fwd-s23"
  variants_both
  mas_sweep 150
  ;;
esac
stamp "done"
