#!/usr/bin/env bash
# Session 28's GPU calls (bench/NOTES-attention.md "Backward v13": the dQ accumulator zeroed one
# group ahead by the main kernel). The library comes built from the CPU machine in .ab/lib.tgz
# (bench/gpu-library.sh says how).
# PART=checks: the zero-ahead gtests (a workspace of NaN bytes), every `Attention*` gtest,
#   memcheck and racecheck on the small zero-ahead and two-path tests, the torch attention tests.
# PART=ab: bench/bwd_tail.py with FLASHKIT_BWD_ZERO_AHEAD=0 / 1 in alternating processes (ROUNDS
#   rounds; SHAPES as bwd_tail.py takes them), each backward's time and kernel timeline.
# PART=table: bench/attention.py flashkit / cuDNN / flash, hdim 128 and 64, in the time left.
# Calls (one H200 each): 1 PART="checks ab" on v13, 2 the same on v13b, 3 PART=ab then PART=checks
# on v13c, 4 PART=table, 5 PART=table three times (FLASHKIT_BWD_ZERO_AHEAD unset / 0 / unset), 6 the
# zero-ahead gtests alone, 7 bench/bwd_tail.py 128:2048 128:4096 with FLASHKIT_BWD_ZERO_AHEAD
# 0 / unset / 20 / 1 in two rounds.
# usage: tar xzf .ab/lib.tgz && OUT=/some/dir PART=checks bench/gpu-s28.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
carried_library
export PYTHONPATH=bench:$PYTHONPATH
small='AttentionGpuSmall.Sm90BackwardZeroAhead:AttentionGpuSmall.Sm90AndSm80Paths'
for part in ${PART:?set PART}; do
  case "$part" in
  checks)
    gtest zero 'AttentionGpuSm90.BackwardZeroAhead*:AttentionGpuSmall.Sm90BackwardZeroAhead' 120
    attention_checks "$(( $(left) - 260 ))" "$small"
    stamp "torch attention tests"
    timeout 120 python3 -m pytest -q -x tests/python/test_torch_attention.py >"$log/pytest.log" 2>&1
    stamp "rc=$?"
    tail -2 "$log/pytest.log"
    ;;
  ab)
    for r in $(seq "${ROUNDS:-2}"); do
      for z in 0 1; do
        stamp "bwd_tail FLASHKIT_BWD_ZERO_AHEAD=$z round $r"
        FLASHKIT_BWD_ZERO_AHEAD=$z timeout 150 python3 bench/bwd_tail.py \
          ${SHAPES:-128:2048 128:4096 128:8192 128:2048:causal 64:2048} >"$log/tail-$z-$r.log" 2>&1
        grep -E "^d|preprocess|run_kernel|convert" "$log/tail-$z-$r.log" | cut -c1-110
      done
    done
    ;;
  table)
    stamp "bench/attention.py ($(left) s left)"
    timeout "$(( $(left) - 5 ))" python3 bench/attention.py --out "$out" --methods flashkit,cudnn,flash \
      --no-memory --hdims 128,64 --seqlens 2048,4096,8192,16384 --name attention-s28 >"$log/attn.log" 2>&1
    stamp "rc=$?"
    tail -30 "$log/attn.log"
    ;;
  esac
done
stamp "done"
