#!/usr/bin/env bash
# Session 22's GPU calls (bench/NOTES-attention.md "Dropout v7"). The library comes built from
# the CPU machine in .ab/lib.tgz (bench/gpu-library.sh says how); the base build (session 21's
# python package) in .ab/base22.tgz.
# PART=ab: the dropout and variant tests (both paths), memcheck / racecheck on the small variants
# test, then per-kernel times (bench/kernel_breakdown.py) of the base and the new build in turn:
# plain and dropout 0.1 (CAUSAL=1: causal dropout too) at hdim 128 and 64, 8k; the torch
# dropout tests.
# PART=v8: the variant tests, sanitizers, and hdim 64 kernel times of plain, dropout (v7c) and
# softcap (v8: three warpgroups), base and new.
# PART=bench: bench/variants.py at hdim 128 (every variant) and 64.
# PART=final: every attention gtest, and a second round of the hdim 128 bench.
# PART=decode: decode v8 (no CTA barrier in the TMA mainloop): DecodeGpu tests, sanitizers, and
# bench/decode.py on the bar's shapes, base and new in two rounds.
# PART=v7d: dropout v7d (producer warps draw 3/4 of the bits): tests, sanitizers, kernel times.
# PART=pre: the backward preprocess that zeroes the dQ accumulator itself (no memset): every
# attention gtest, sanitizers, per-kernel times base / new.
# PART=alibi64: v9, hdim 64 ALiBi on three warpgroups: variant tests, sanitizers, kernel times.
# PART=review: the review's build: dropout / variant tests, sanitizers, dropout kernel times.
# usage: tar xzf .ab/lib.tgz && tar xzf .ab/base22.tgz -C .ab && OUT=/some/dir PART=ab bench/gpu-s22.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
carried_library
export PYTHONPATH=bench:$PYTHONPATH
# The dropout / variant gtests (both paths), then memcheck / racecheck on the small variants test.
drop_tests() {
  gtest drop 'AttentionGpuDropout*:AttentionGpu/AttentionGpuVariants*:AttentionGpuSm90.*Variants*:AttentionGpuSmall.Sm90AndSm80*Variants*' 300
  SAN_EACH=${SAN_EACH:-90} sanitize "$bin" 'AttentionGpuSmall.Sm90AndSm80PathsVariants'
}
case "${PART:?set PART}" in
ab)
  drop_tests
  stamp "torch dropout tests"
  timeout 120 python3 -m pytest -q -x tests/python/test_torch_attention.py -k dropout >"$log/pytest.log" 2>&1
  stamp "rc=$?"; tail -2 "$log/pytest.log"
  for d in ${HDIMS:-128 64}; do
    ab_times "$d" "" "--dropout 0.1" ${CAUSAL:+"--dropout 0.1 --causal"}
  done
  ;;
v8)  # dropout (v7c) and softcap (v8) at hdim 64: kernel times, base and new
  gtest var 'AttentionGpu/AttentionGpuVariants*:AttentionGpuSm90.*Variants*:AttentionGpuSmall.Sm90AndSm80PathsVariants' 200
  SAN_EACH=${SAN_EACH:-90} sanitize "$bin" 'AttentionGpuSmall.Sm90AndSm80PathsVariants'
  ab_times 64 "" "--dropout 0.1" "--softcap 30" "--softcap 30 --causal"
  ;;
bench)
  variants_both
  ;;
review)  # the review's build (keep_bits refactor: SASS not identical): dropout tests, kernel times
  drop_tests
  for d in 128 64; do
    stamp "breakdown new hdim $d --dropout 0.1"
    bd_of new --hdim $d --dropout 0.1
  done
  ;;
decode)  # decode v8: tests, sanitizers, decode.py base / new / base / new on the bar's shapes
  gtest dec 'DecodeGpu*' 300
  SAN_EACH=${SAN_EACH:-60} sanitize "$bin" 'DecodeGpuSmall*'
  shapes="128,4,32,131072 128,1,56,65536 128,1,128,32768 128,9,32,16384 128,1,56,8192 64,1,56,65536 64,1,56,8192 64,4,32,131072"
  for round in 1 2; do
    for v in base new; do
      stamp "decode.py $v round $round"
      if [ "$v" = base ]; then export FLASHKIT_EXT_DIR=$PWD/.ab/old/flashkit; else unset FLASHKIT_EXT_DIR; fi
      timeout 150 python3 bench/decode.py --out "$out/$v$round" --skip single,flash_decoding,torch_flash,torch_efficient \
        --shapes $shapes >"$log/dec_$v$round.log" 2>&1
      stamp "rc=$?"; grep -E "^d(64|128)" "$log/dec_$v$round.log" | sed 's/max_diff.*//' | cut -c1-150
    done
  done
  unset FLASHKIT_EXT_DIR
  ;;
v7d)  # dropout v7d: tests, sanitizers, kernel times base / new (hdim 128, 64; dense, causal)
  drop_tests
  for d in 128 64; do
    ab_times "$d" "--dropout 0.1" "--dropout 0.1 --causal"
  done
  ;;
pre)  # backward preprocess v2 (zeroes dQ itself): every attention gtest, sanitizers, kernel times
  gtest all 'Attention*' 420
  grep -E "tests ran|PASSED|FAILED" "$log/all.log" | tail -3
  SAN_EACH=${SAN_EACH:-100} sanitize "$bin" 'AttentionGpuSmall.DenseCausalGqa:AttentionGpuSmall.Sm90AndSm80Paths'
  for args in "" "--seqlen 2048" "--density 0.1" "--seqlen 2048 --causal" "--hdim 64 --seqlen 2048"; do
    for v in base new; do
      stamp "breakdown $v $args"
      if [ "$v" = base ]; then PYTHONPATH=bench:.ab/old bd $args; else bd $args; fi | grep -v "^#" | cut -c1-120
    done
  done
  ;;
alibi64)  # v9: hdim 64 ALiBi on three warpgroups: variant tests, sanitizers, kernel times
  gtest var 'AttentionGpu/AttentionGpuVariants*:AttentionGpuSm90.*Variants*:AttentionGpuSmall.Sm90AndSm80PathsVariants' 200
  SAN_EACH=${SAN_EACH:-90} sanitize "$bin" 'AttentionGpuSmall.Sm90AndSm80PathsVariants'
  ab_times 64 "" "--alibi" "--alibi --causal"
  ;;
final)  # every attention gtest on the landed build, then a second round of the hdim 128 bench
  gtest all 'Attention*' 420
  grep -E "tests ran|PASSED|FAILED" "$log/all.log" | tail -3
  stamp "variants hdim 128 (round 2)"
  timeout 100 python3 bench/variants.py --out "$out/r2" --hdim 128 >"$log/var128b.log" 2>&1
  stamp "rc=$?"; tail -17 "$log/var128b.log"
  ;;
esac
stamp "done"
