#!/usr/bin/env bash
# Session 25's GPU calls (bench/NOTES-attention.md "Backward v11"). The library comes built from
# the CPU machine in .ab/lib.tgz (bench/gpu-library.sh says how); the base build (main at 1c4b919:
# the python package with its extension) in .ab/base25.tgz.
# PART=fold: the attention gtests, memcheck / racecheck on the small two-path ones, then the
# kernels of one backward at 2k (hdim 128 / 64, dense / causal), base / new. Run on v11 and v11b.
# PART=modes: the same tests, then one backward's kernels for FLASHKIT_SM90_DQ_FOLD=0..3, a knob
# that exists only in v11c's commit (the fold was shelved; main has the separate conversion); mode 4
# (counts, no conversions: dQ wrong, a diagnostic) was added for call 8 only. NOTEST=1 skips the
# tests; MODES and ARGS (e.g. "128 128_--causal") narrow the loops.
# PART=ab: bench/attention.py forward + backward against cuDNN, hdim 128 / 64 at 2k-8k, base / new
# in separate processes, ROUNDS rounds (default 2). Run once (call 2, ROUNDS=1): v11b's list
# overflow stopped its new half.
# PART=checks: the attention gtests and the sanitizers alone (main after the fold was shelved).
# PART=issue8: bench/attention.py forward + backward, flashkit / flash / cuDNN, hdim 128, 64, 256
# (NAME: the result file's name). Calls 6-7 ran its bench/attention.py command directly (call 6
# with --hdims 128,64) on main's build.
# usage: tar xzf .ab/lib.tgz && tar xzf .ab/base25.tgz -C .ab && OUT=/some/dir PART=fold bench/gpu-s25.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
carried_library
export PYTHONPATH=bench:$PYTHONPATH
small='AttentionGpuSmall.Sm90AndSm80Paths:AttentionGpuSmall.Sm90AndSm80BackwardDeterministic:AttentionGpuSmall.Sm90AndSm80VarlenVariants:AttentionGpuSmall.DenseCausalGqa'
case "${PART:?set PART}" in
fold)
  attention_checks "${TEST_S:-300}" "$small"
  for d in 128 64; do
    for c in "" --causal; do
      for v in base new; do
        stamp "breakdown $v hdim $d 2k $c"
        if [ "$v" = base ]; then PYTHONPATH=bench:.ab/old bd --hdim "$d" --seqlen 2048 $c; else bd --hdim "$d" --seqlen 2048 $c; fi \
          | cut -c1-90 | head -5
      done
    done
  done
  ;;
modes)  # FLASHKIT_SM90_DQ_FOLD 0-3 (bwd_mainloop.h dq_fold_env) on one build: tests on the default,
  # then the kernels of one backward at 2k for each mode
  [ -n "${NOTEST:-}" ] || attention_checks "${TEST_S:-300}" "$small"
  for args in ${ARGS:-128 128_--causal 64}; do
    set -- ${args//_/ }
    for mode in ${MODES:-0 1 2 3}; do
      stamp "breakdown hdim $args 2k, FLASHKIT_SM90_DQ_FOLD=$mode"
      ENVS="FLASHKIT_SM90_DQ_FOLD=$mode" bd --hdim "$1" --seqlen 2048 ${2:-} | grep -v "^#" | cut -c1-60 | head -4
    done
  done
  ;;
ab)
  for round in $(seq 1 "${ROUNDS:-2}"); do
    for v in base new; do
      stamp "bench/attention.py $v"
      PYTHONPATH=$(pp_of $v) timeout 200 python3 bench/attention.py --out "$out/r$round-$v" --no-memory \
        --methods flashkit,cudnn --hdims 128,64 --seqlens "${SEQLENS:-2048,4096,8192}" --name "fold-$v" \
        >"$log/ab-$round-$v.log" 2>&1
      stamp "rc=$?"
      grep -E "^d[0-9]" "$log/ab-$round-$v.log"
    done
  done
  ;;
checks)
  attention_checks "${TEST_S:-300}" "$small"
  ;;
issue8)
  issue8_table "${NAME:-attention-s25}"
  ;;
esac
stamp "done"
