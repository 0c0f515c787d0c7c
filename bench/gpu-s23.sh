#!/usr/bin/env bash
# Session 23's GPU calls (bench/NOTES-attention.md "sm90 forward v9: the pipeline carried across
# tiles"; bench/NOTES-mas.md "Super-MAS's own timing"). The library comes built from the CPU
# machine in .ab/lib.tgz (bench/gpu-library.sh says how); the base build (session 22's python
# package, main at c5a568b) in .ab/base23.tgz.
# PART=carry: every attention gtest, memcheck / racecheck on the small sm90 tests, then per-kernel
# times (bench/kernel_breakdown.py) of the base and the new build in turn: hdim 128 plain 8k / 2k,
# causal 8k / 2k, block-sparse 0.1, window, dropout; hdim 64 block-sparse 0.1.
# PART=quick: the sm90 and block-mask tests, and a subset of carry's kernel times.
# PART=issue8: bench/attention.py forward + backward, flashkit / flash / cuDNN, hdim 128, 64, 256.
# PART=bt: the one-lane backtrack with its loads a step ahead (bench/NOTES-mas.md session 23): MAS
# gtests, memcheck / racecheck on the small band / staged tests, GPU time of a call base / new.
# PART=issue3: bench/attention.py, the sm80-class path against torch flash (FA2), hdim 128 and 64.
# PART=trace: the forward A/B harness (bench/sm90_fwd_ab.sh 'trace=-DFLASHKIT_SM90_FWD_TRACE'
# 'plain=') at 2k and 8k: CTA 0's clock at each phase of its tiles (fwd_mainloop.h FK_FWD_STAMP).
# PART=sched: the forward schedulers' divisions by launch-time constants (FastDiv): tests,
# sanitizers, kernel times base / new in two rounds, the trace harness.
# PART=stsm: the epilogue's O staging by stmatrix: forward + fp8 tests, sanitizers, kernel times
# against v9b's build (tar xzf .ab/v9b.tgz -C .ab first).
# PART=mas: bench/mas.py (Super-MAS's own timing beside ours) with the base package.
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
masknobs)  # GPU time of a drop-in call at T = 128 / 256 under the MAS knobs, two rounds
  export PYTHONPATH=.ab/old:$PYTHONPATH
  for round in 1 2; do
    for kn in "" FLASHKIT_MAS_BAND_WARPS=2 FLASHKIT_MAS_PATH_KERNEL=1 FLASHKIT_MAS_BAND_BULK=0 \
        ${KNOBS:-}; do
      stamp "mas_overhead.py $kn"
      env $kn timeout 60 python3 bench/mas_overhead.py --Ts 128,256 --reps 30 2>&1 | grep -E "T=" | cut -c1-110
    done
  done
  ;;
issue8)  # forward and backward against cuDNN and flash in one process on main's build (base package;
  # NEW=1: the carried library's package instead)
  [ -z "${NEW:-}" ] && export PYTHONPATH=.ab/old:$PYTHONPATH
  issue8_table "attention-s23${NEW:+-v9b}"
  ;;
bt)  # the backtrack with its loads a step ahead: MAS tests, sanitizers, GPU time base / new
  gtest mas 'MasGpu*' 300
  SAN_EACH=${SAN_EACH:-120} sanitize "$bin" 'MasGpuSmall.BandKernelShapes:MasGpuSmall.NanAndInfCells:MasGpuSmall.StagedRowsEachDtype:MasGpuSmall.RandomTieHeavyAndInfEachNeg'
  for round in 1 2; do
    for v in base new; do
      stamp "mas_overhead.py $v"
      if [ "$v" = base ]; then pp=.ab/old:$PYTHONPATH; else pp=$PYTHONPATH; fi
      PYTHONPATH=$pp timeout 90 python3 bench/mas_overhead.py --Ts 128,256,1024 --reps 30 2>&1 \
        | grep -E "T=" | cut -c1-110
    done
  done
  ;;
issue3)  # the sm80-class path against FA2 (torch flash) in one process, forward and backward
  export PYTHONPATH=.ab/old:$PYTHONPATH
  stamp "bench/attention.py sm80"
  timeout "$(left)" python3 bench/attention.py --out "$out" --methods flashkit-sm80,flash --no-memory \
    --hdims 128,64 --seqlens 2048,4096,8192,16384 --name attention-sm80-s23 >"$log/attn.log" 2>&1
  stamp "rc=$?"
  tail -24 "$log/attn.log"
  ;;
trace)  # the forward's per-tile phases (A/B harness with FLASHKIT_SM90_FWD_TRACE) beside the plain harness
  for v in plain trace; do
    stamp "harness $v"
    timeout 120 ".ab/$v" "$v" 2048 8192 2>&1 | grep -v "^check" | head -40
  done
  if [ -n "${EPI:-}" ]; then  # the per-warpgroup epilogue against all consumers', two rounds
    for r in 1 2; do
      for e in 0 1; do
        stamp "harness plain, FLASHKIT_SM90_FWD_WG_EPI=$e"
        FLASHKIT_SM90_FWD_WG_EPI=$e timeout 120 .ab/plain "epi$e" 2048 4096 8192 2>&1 | grep -v "^check"
      done
    done
    stamp "trace, FLASHKIT_SM90_FWD_WG_EPI=1"
    FLASHKIT_SM90_FWD_WG_EPI=1 timeout 120 .ab/trace trace-epi1 2048 2>&1 | grep "mean\|trace d"
  fi
  ;;
sched)  # scheduler v9b (FastDiv): forward tests, sanitizers, kernel times base / new, the trace
  gtest fwd 'AttentionGpuSm90*:AttentionGpuSmall.Sm90*:AttentionGpuBlockSparse*:AttentionGpu/AttentionGpuVariants*:AttentionGpu.*' 300
  SAN_EACH=${SAN_EACH:-80} sanitize "$bin" 'AttentionGpuSmall.Sm90AndSm80Paths:AttentionGpuSmall.Sm90AndSm80PathsVariants'
  for r in 1 2; do
    ab_times 128 "--seqlen 2048" "--seqlen 2048 --causal" "--causal"
    ab_times 64 "--seqlen 2048" "--seqlen 2048 --causal"
  done
  [ -x .ab/trace ] && timeout 60 .ab/trace trace 2048 2>&1 | grep "mean\|trace d"
  ;;
stsm)  # the forward epilogue's O staging by stmatrix: forward tests, sanitizers, kernel times
  gtest fwd 'AttentionGpuSm90*:AttentionGpuSmall.Sm90*:AttentionGpuSmall.Fp8*:AttentionGpuFp8*:AttentionGpuBlockSparse*:AttentionGpu/AttentionGpuVariants*:AttentionGpu.*' 300
  SAN_EACH=${SAN_EACH:-80} sanitize "$bin" 'AttentionGpuSmall.Sm90AndSm80Paths:AttentionGpuSmall.Sm90PaddedBuckets:AttentionGpuSmall.Fp8Forward'
  # against v9b's build (.ab/v9b.tgz: the same python files, v9b's extension), two rounds
  for r in 1 2; do
    for args in "--hdim 128 --seqlen 2048" "--hdim 128 --seqlen 2048 --causal" "--hdim 128" \
        "--hdim 64 --seqlen 2048" "--hdim 64 --seqlen 2048 --causal"; do
      stamp "breakdown v9b $args"
      PYTHONPATH=bench:.ab/v9b bd $args | grep -E "Kernel<|us per" | grep -v Bwd
      stamp "breakdown new $args"
      bd $args | grep -E "Kernel<|us per" | grep -v Bwd
    done
  done
  ;;
mas)  # bench/mas.py on main's build (the base package: no MAS code changed), both timings
  export PYTHONPATH=.ab/old:$PYTHONPATH
  mas_sweep 150
  ;;
esac
stamp "done"
