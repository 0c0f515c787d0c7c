#!/usr/bin/env bash
# Session 26's GPU calls (bench/NOTES-attention.md "Backward v12"). The library comes built from
# the CPU machine in .ab/lib.tgz (bench/gpu-library.sh says how); the base build (main at 86bc7a4,
# whose source is 1c4b919's: the python package with its extension) in .ab/base25.tgz.
# PART=checks: the attention gtests (v12's default: the conversion behind the main kernel), the
#   sm80-class path's gtests, memcheck / racecheck on the small two-path tests.
# PART=ab: bench/attention.py forward + backward, flashkit and cuDNN in one process, for each of
#   base (main's package), off (this build, FLASHKIT_BWD_TAIL=0) and new (this build), ROUNDS
#   rounds (default 2), HDIMS (default 128,64,256), SEQLENS (default 2k-16k).
# PART=sm80: the same for the sm80-class path against torch's flash backend (issue 3): methods
#   flashkit-sm80,flash, hdim 128 / 64.
# What each call of the session ran (one H100 unless said): call 1 PART=checks then PART=ab
# ROUNDS=1 HDIMS=128 (v12); calls 2-3 `bench/bwd_tail.py` for off / new (and base in call 3)
# alternated (v12, v12b); call 4 bench/attention.py directly (issue 8's table twice, the
# sm80-class path once); calls 5-6 the torch attention tests and sanitizers; call 7 .ab/bwd_pre_ab
# (bench/bwd_pre_ab.cu); call 8 (one H200) and call 9 the v3 checks and bwd_tail.py with
# FLASHKIT_BWD_PRE_SMS=0 / default; call 10 the final build's checks.
# usage: tar xzf .ab/lib.tgz && tar xzf .ab/base25.tgz -C .ab && OUT=/some/dir PART=checks bench/gpu-s26.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
carried_library
export PYTHONPATH=bench:$PYTHONPATH
small='AttentionGpuSmall.Sm90AndSm80Paths:AttentionGpuSmall.Sm90AndSm80BackwardDeterministic:AttentionGpuSmall.Sm90AndSm80VarlenVariants:AttentionGpuSmall.DenseCausalGqa'
# $1: label, $2: methods, $3: head dims; base / off / new in separate processes, ROUNDS rounds.
ab_runs() {
  for round in $(seq 1 "${ROUNDS:-2}"); do
    for v in ${VARIANTS:-base off new}; do
      stamp "bench/attention.py $1 $v round $round"
      local pp=$PYTHONPATH envs=""
      [ "$v" = base ] && pp=$(pp_of base)
      [ "$v" = off ] && envs="FLASHKIT_BWD_TAIL=0"
      env $envs PYTHONPATH=$pp timeout 200 python3 bench/attention.py --out "$out/$1-r$round-$v" \
        --no-memory --methods "$2" --hdims "$3" --seqlens "${SEQLENS:-2048,4096,8192,16384}" \
        --name "$1-$v" >"$log/$1-$round-$v.log" 2>&1
      stamp "rc=$?"
      grep -E "^d[0-9]" "$log/$1-$round-$v.log"
    done
  done
}
case "${PART:?set PART}" in
checks)
  attention_checks "${TEST_S:-300}" "$small"
  ENVS="FLASHKIT_ATTENTION_PATH=sm80" gtest attn-sm80 'AttentionGpu.*' 200
  ;;
ab)
  ab_runs tail flashkit,cudnn "${HDIMS:-128,64,256}"
  python3 bench/ab_attention_table.py --pair=flashkit,cudnn "$out"/tail-r*-* >"$out/ab-table.txt"
  grep "ratio" "$out/ab-table.txt"
  ;;
sm80)
  ab_runs tail-sm80 flashkit-sm80,flash "${HDIMS:-128,64}"
  python3 bench/ab_attention_table.py "$out"/tail-sm80-r*-* >"$out/ab-sm80-table.txt"
  grep "ratio" "$out/ab-sm80-table.txt"
  ;;
esac
stamp "done"
