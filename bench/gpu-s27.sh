#!/usr/bin/env bash
# Session 27's GPU calls (bench/NOTES-attention.md "Forward v11": the dense forward's split tail).
# The library comes built from the CPU machine in .ab/lib.tgz (bench/gpu-library.sh says how).
# PART=checks: the split-tail gtests (split on and off against the reference), memcheck and
#   racecheck on the small split-tail and two-path tests, then every `Attention*` gtest.
# PART=ab: bench/fwd_split_ab.py (split / whole / cuDNN forward, interleaved, ROUNDS rounds; the
#   script and v11 are in commit 6d11348, removed after the measurement).
# Calls 1-2 (one H200) ran bench/wave_quant.py on main's build (the measurement before v11); call
# 3 PART=checks and call 4 PART=ab on v11's build (commit 6d11348: both parts need it; on main
# after v11's removal the split tests and the knob are gone); calls 5-6 per-kernel profiles of
# split / whole (a torch.profiler loop, kernel durations of 10 forwards, in the NOTES); calls 7-9
# bench/fwd_split_phases.py (on that branch) and the split gtests on builds of branch
# v11-split-tail; call 10 the backward's kernel span at 15.5 / 16 waves (main's backward; now
# `ROUNDS=3 PROFILE=1 bench/wave_quant.py 128:4096:4:16 128:4224:4:16 128:8192:2:16 128:8448:2:16`);
# call 11 that mended script (ROUNDS=2 PROFILE=1, two shapes) and its default mode at 2k.
# usage: tar xzf .ab/lib.tgz && OUT=/some/dir PART=checks bench/gpu-s27.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
carried_library
export PYTHONPATH=bench:$PYTHONPATH
small='AttentionGpuSmall.Sm90SplitTail:AttentionGpuSmall.Sm90AndSm80Paths'
case "${PART:?set PART}" in
checks)
  gtest split 'AttentionGpuSm90.SplitTail*:AttentionGpuSmall.Sm90SplitTail:AttentionGpuSm90.BothPathsMatchReference' 200
  SAN_EACH=${SAN_EACH:-90} sanitize "$bin" "$small"
  gtest attn 'Attention*' "$(( $(left) - 20 ))"
  grep -E "tests ran|PASSED|FAILED" "$log/attn.log" | tail -4
  ;;
ab)
  stamp "fwd_split_ab"
  timeout "$(left)" python3 bench/fwd_split_ab.py "${HDIMS:-128,256,64}" "${SEQLENS:-2048,4096,8192,16384}" \
    >"$log/ab.log" 2>&1
  stamp "rc=$?"
  grep -v Warn "$log/ab.log"
  ;;
esac
stamp "done"
