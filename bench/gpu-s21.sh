#!/usr/bin/env bash
# Session 21's GPU calls (bench/NOTES-attention.md "Block-sparse v4"). The library comes built from
# the CPU machine in .ab/lib.tgz (bench/gpu-library.sh says how).
# PART=diag: per-kernel GPU time (bench/kernel_breakdown.py, torch.profiler) of the forward and
# backward at hdim 128 and 64, 8k: plain, and block masks of density 1.0 / 0.5 / 0.25 / 0.1; then
# ncu (speed of light, memory, warp states) of the hdim 128 forward kernel, plain and 0.5.
# PART=ab: the block-sparse and variant tests (both paths), memcheck / racecheck on the small
# variants test, then the breakdown above for the base build (.ab/old, session 20's) and this one
# in turn (DENS densities, HDIMS head dims).
# PART=bench: bench/variants.py at hdim 128 / 64, ncu source counters of the 0.1 forward.
# PART=epi: v5's per-warpgroup epilogue on / off (tests, sanitizers, kernel times).
# PART=final: tests, sanitizers and bench/variants.py on the landed build.
# PART=win64: v6 (hdim 64 windows on three warpgroups): variant tests, sanitizers, kernel times
# against the base build.
# usage: tar xzf .ab/lib.tgz && tar xzf .ab/base21.tgz -C .ab && OUT=/some/dir PART=ab bench/gpu-s21.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
carried_library
export PYTHONPATH=bench:$PYTHONPATH
case "${PART:?set PART}" in
diag)
  for d in 128 64; do
    for dens in 0 1.0 0.5 0.25 0.1; do
      stamp "breakdown hdim $d density $dens"
      bd --hdim $d --density $dens
    done
  done
  for dens in 0 0.5; do
    stamp "ncu fwd hdim 128 density $dens"
    timeout 90 ncu --kernel-name regex:run_kernel_sm90 --launch-count 1 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
      --section SchedulerStats --section LaunchStats -o "$log/fwd$dens" \
      python3 bench/kernel_breakdown.py --backend flashkit --seqlen 8192 --hdim 128 \
      --density $dens --calls 1 >"$log/ncu$dens.log" 2>&1
    stamp "rc=$?"
    ncu_unpack fwd$dens
    grep -E "Duration|Elapsed Cycles|Warp Cycles Per Issued|Issued Ipc|L2 Hit|DRAM Throughput|Compute \(SM\) Th|Memory Throughput|Stall|No Eligible|Registers" "$log/fwd$dens-details.txt" | head -24
  done
  ;;
ab)
  gtest sparse 'AttentionGpuBlockSparse*:AttentionGpu/AttentionGpuVariants*:AttentionGpuSm90.VariantsBothPaths:AttentionGpuSmall.Sm90AndSm80PathsVariants' 300
  SAN_EACH=${SAN_EACH:-90} sanitize "$bin" 'AttentionGpuSmall.Sm90AndSm80PathsVariants'
  for d in ${HDIMS:-128 64}; do
    for dens in ${DENS:-0 1.0 0.5 0.25 0.1}; do
      for v in base new; do
        stamp "breakdown $v hdim $d density $dens"
        bd_of $v --hdim $d --density $dens
      done
    done
  done
  for v in base new; do  # a window at hdim 64: the backward's per-block mask branch (v4)
    stamp "breakdown $v hdim 64 window 1024,1024"
    bd_of $v --hdim 64 --window 1024,1024
  done
  ;;
bench)  # bench/variants.py at hdim 128 (every variant) and 64, then ncu of the 0.1 forward
  variants_both
  stamp "ncu fwd hdim 128 density 0.1 (source)"
  timeout 120 ncu --kernel-name regex:run_kernel_sm90 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SourceCounters --import-source yes \
    -o "$log/bs01" python3 bench/kernel_breakdown.py --backend flashkit --seqlen 8192 --hdim 128 \
    --density 0.1 --calls 1 >"$log/ncu01.log" 2>&1
  stamp "rc=$?"
  ncu_unpack bs01 sass
  grep -E "Duration|Warp Cycles Per Issued|Issued Ipc" "$log/bs01-details.txt" | head
  ;;
epi)  # the per-warpgroup epilogue (v5): tests in both modes, sanitizers forced on, then A/B
  T='AttentionGpuSm90*:AttentionGpuSmall.Sm90*:AttentionGpuBlockSparse*:AttentionGpuFp8*:AttentionGpu.*'
  gtest epi_default "$T" 240
  ENVS=FLASHKIT_SM90_FWD_WG_EPI=1 gtest epi_on "$T" 240
  export FLASHKIT_SM90_FWD_WG_EPI=1
  SAN_EACH=${SAN_EACH:-60} sanitize "$bin" 'AttentionGpuSmall.Sm90AndSm80Paths:AttentionGpuSmall.Sm90AndSm80PathsVariants'
  unset FLASHKIT_SM90_FWD_WG_EPI
  for r in 1 2; do
    for c in "128" "128 --causal" "128 --density 0.5" "128 --density 0.1" "128 --window 1024,1024" \
             "128 --causal --window 1024,0" "64" "64 --density 0.1" "64 --window 1024,1024"; do
      for e in 0 1; do
        stamp "r$r epi=$e hdim $c"
        ENVS=FLASHKIT_SM90_FWD_WG_EPI=$e bd --hdim $c | grep -E "FwdKernel"
      done
    done
  done
  ;;
final)  # the landed build: tests, sanitizers on the small variants test, bench/variants.py
  gtest final 'AttentionGpuSm90*:AttentionGpuSmall.Sm90*:AttentionGpuBlockSparse*:AttentionGpu/AttentionGpuVariants*' 200
  SAN_EACH=${SAN_EACH:-60} sanitize "$bin" 'AttentionGpuSmall.Sm90AndSm80PathsVariants'
  variants_both
  ;;
win64)  # v6: hdim 64 window tests, then the forward kernel, base (session 20) and v6 in turn
  gtest win 'AttentionGpuSm90.VariantsBothPaths:AttentionGpuSm90.VarlenVariantsBothPaths:AttentionGpuVariantsShapes*:AttentionGpu/AttentionGpuVariants*:AttentionGpuSmall.Sm90AndSm80PathsVariants' 150
  SAN_EACH=${SAN_EACH:-40} sanitize "$bin" 'AttentionGpuSmall.Sm90AndSm80PathsVariants'
  for r in 1 2; do
    ab_times 64 "--window 1024,1024" "--causal --window 1024,0"
  done
  ;;
esac
(cd "$out" && tar czf logs.tgz t && rm -rf t)
