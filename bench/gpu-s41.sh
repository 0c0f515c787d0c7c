#!/bin/bash
# Session 41's calls: the block-mask forward's tile boundary (bench/sm90_fwd_ab.cu built with
# -DAB_BLOCKMASK_DENSITY=0.1 by bench/sm90_fwd_ab.sh, so each query block keeps ~6 of 64 key blocks
# at 8k, bench/variants.py's rule). Binaries in .ab: bs128 / bs64 (base), bs128pf / bs64pf
# (FLASHKIT_SM90_FWD_MASK_PREFETCH=1), *t (with FLASHKIT_SM90_FWD_TRACE), p128t (plain, traced).
# PHASE=trace: the traced binaries at 8k and 2k, then AB_BINS (default bs128 bs128pf) in two
# interleaved rounds at 2k-16k, then memcheck / racecheck on SAN_BIN's reference checks.
# PHASE=seed: TRACE_BINS' traces (the first lines only: the call's file count), then AB_BINS in
# two interleaved rounds, then the sanitizers on each of SAN_BINS' reference checks.
# PHASE=words: as seed (defaults: traces bs128t bs128rt, A/B bs128 bs128r bs64 bs64r, sanitizers
# on bs128r bs64r), then the block-sparse gtests of main's test binary (.ab/tests.txz).
# usage: OUT=/some/dir PHASE=trace bench/gpu-s41.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$log/gpu.txt"
if [ "${PHASE:-trace}" = trace ]; then
  for b in ${TRACE_BINS:-bs128t bs128pft p128t}; do
    [ -x .ab/$b ] || continue
    stamp "trace $b"
    timeout 100 .ab/$b "$b" 8192 2048 >"$log/trace-$b.txt" 2>&1
    stamp "rc=$?"
    grep -E "FAILED|mean of" "$log/trace-$b.txt" | grep -v causal | sed "s/^/$b /"
    grep -E "mean of" "$log/trace-$b.txt" | grep causal | grep s8192 | sed "s/^/$b /"
  done
  for round in 1 2; do
    for b in ${AB_BINS:-bs128 bs128pf}; do
      stamp "$b round $round"
      timeout 100 .ab/$b "$b" 2048 4096 8192 16384 >"$log/ab-$b-r$round.txt" 2>&1
      stamp "rc=$?"
    done
  done
  grep -h "check" "$log"/ab-*-r1.txt | sort | uniq -c | head -20
  echo "== timing (variant d s ms TFLOP/s)"
  cat "$log"/ab-*.txt | grep -vE "check|trace" | sort -k3,3 -k4,4 -k1,1
  for tool in memcheck racecheck; do
    stamp "$tool ($(left) s left)"
    timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 .ab/${SAN_BIN:-bs128pf} san 0 \
      >"$log/$tool.log" 2>&1
    stamp "rc=$?"
    grep -E "SUMMARY|FAILED" "$log/$tool.log" | head -3
  done
fi
if [ "${PHASE:-}" = words ]; then
  PHASE=seed TRACE_BINS=${TRACE_BINS:-bs128t bs128rt} AB_BINS=${AB_BINS:-bs128 bs128r bs64 bs64r} \
    SAN_BINS=${SAN_BINS:-bs128r bs64r} DO_TESTS=1
fi
if [ "${PHASE:-}" = seed ]; then
  for b in ${TRACE_BINS:-bs128t bs128st}; do
    timeout 100 .ab/$b "$b" 8192 2048 2>&1 | grep -E "FAILED|mean of" | grep -E "full|s8192" | sed "s/^/$b /"
  done
  for round in 1 2; do
    for b in ${AB_BINS:-bs128 bs128w bs128s bs64 bs64s}; do
      timeout 100 .ab/$b "$b" 2048 4096 8192 16384 >"$log/ab-$b-r$round.txt" 2>&1
      echo "$b r$round rc=$?" >>"$log/steps.txt"
    done
  done
  grep -h "check" "$log"/ab-*-r1.txt | grep -v " ok" | head
  grep -hc " ok" "$log"/ab-*-r1.txt | tr '\n' ' '; echo " checks ok per binary"
  echo "== timing (variant d s ms TFLOP/s)"
  cat "$log"/ab-*.txt | grep -vE "check|trace" | sort -k2,2 -k3,3 -k4,4 -k1,1
  for b in ${SAN_BINS:-bs128s bs64s}; do
    for tool in memcheck racecheck; do
      timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 .ab/$b san 0 >"$log/$b-$tool.log" 2>&1
      echo "$b $tool rc=$? $(grep -E "SUMMARY" "$log/$b-$tool.log" | head -1)"
    done
  done
fi
if [ "${DO_TESTS:-0}" = 1 ]; then
  python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall('.ab')" .ab/tests.txz
  timeout 200 .ab/flashkit_gpu_tests --gtest_filter='AttentionGpuBlockSparse*' >"$log/tests.log" 2>&1
  echo "block-sparse gtests rc=$?"
  grep -E "^\[  FAILED|^\[  PASSED|^\[       OK|Failure" "$log/tests.log" | head -20
  timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 .ab/flashkit_gpu_tests \
    --gtest_filter='AttentionGpuBlockSparse.PerHeadMasksManyTilesPerCta' >"$log/tests-memcheck.log" 2>&1
  echo "memcheck rc=$? $(grep -E "SUMMARY" "$log/tests-memcheck.log" | head -1)"
fi
# PHASE=d256: the finer walk stamps (bs128t2, p128t2: traces at 8k / 2k), then the hdim 256
# backward harness, main (d256) against the direct dK / dV epilogue (d256d), two interleaved
# rounds at 2k-16k, then memcheck / racecheck on d256d's reference checks.
if [ "${PHASE:-}" = d256 ]; then
  for b in bs128t2 p128t2; do
    timeout 100 .ab/$b "$b" 8192 2048 2>&1 | grep -E "FAILED|mean of" | grep -E "full" | sed "s/^/$b /"
  done
  for round in 1 2; do
    for b in d256 d256d; do
      timeout 150 .ab/$b "$b" 2048 4096 8192 16384 >"$log/ab-$b-r$round.txt" 2>&1
      echo "$b r$round rc=$?"
    done
  done
  grep -h "check" "$log"/ab-d256d-r1.txt | head -12
  echo "== timing (variant d s ms TFLOP/s)"
  cat "$log"/ab-d256*.txt | grep -vE "check|trace|^#" | sort -k2,2 -k3,3 -k4,4 -k1,1
  for tool in memcheck racecheck; do
    timeout 170 compute-sanitizer --tool $tool --error-exitcode 9 .ab/d256d san 0 >"$log/san-$tool.log" 2>&1
    echo "d256d $tool rc=$? $(grep -E "SUMMARY" "$log/san-$tool.log" | head -1)"
  done
fi
