#!/usr/bin/env bash
# Session 24's GPU calls (bench/NOTES-mas.md v21). The library comes built from the CPU machine in
# .ab/lib.tgz (bench/gpu-library.sh says how); the base build (main at 935ec40: the python package
# with its extension) in .ab/base24.tgz.
# PART=mas21 (ran on v21's builds; FLASHKIT_MAS_WALK went with v21): the MAS GPU tests (and the
# band tests with the old walk), memcheck / racecheck on the small band / staged tests, then GPU
# time of a drop-in call (bench/mas_overhead.py) for base, new and new with FLASHKIT_MAS_WALK=0,
# two rounds, and CTA 0's phase clocks (FLASHKIT_MAS_TRACE) base / new.
# PART=mas: bench/mas.py (both timings) with the new package.
# PART=epi: the hdim 128 (HD) forward against cuDNN, default epilogue / per-warpgroup epilogue forced
# on, two rounds.
# PART=epi2: forward tests, sanitizers and the forward base / new after the short-key default.
# PART=issue8: bench/attention.py forward + backward, flashkit / flash / cuDNN, hdim 128, 64, 256
# (NAME: the result file's name).
# The last call: ROUNDS=1 PART=epi2, then NAME=attention-s24 PART=issue8, one command.
# usage: tar xzf .ab/lib.tgz && tar xzf .ab/base24.tgz -C .ab && OUT=/some/dir PART=mas21 bench/gpu-s24.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
carried_library
export PYTHONPATH=bench:$PYTHONPATH
small='MasGpuSmall.BandKernelShapes:MasGpuSmall.NanAndInfCells:MasGpuSmall.StagedRowsEachDtype:MasGpuSmall.RandomTieHeavyAndInfEachNeg'
case "${PART:?set PART}" in
mas21)
  gtest mas 'MasGpu*' 200
  ENVS="FLASHKIT_MAS_WALK=0" gtest mas-old "$small" 100
  SAN_EACH=${SAN_EACH:-100} sanitize "$bin" "$small"
  for round in 1 2; do
    for v in base new "new FLASHKIT_MAS_WALK=0"; do
      set -- $v
      stamp "mas_overhead.py $v"
      pp=$(pp_of "$1")
      shift
      PYTHONPATH=$pp env "$@" timeout 60 python3 bench/mas_overhead.py --Ts 128,256,1024 --reps 30 2>&1 \
        | grep -E "T=.*drop-in" | cut -c1-110
    done
  done
  for v in base new; do
    stamp "trace $v"
    PYTHONPATH=$(pp_of $v) FLASHKIT_MAS_TRACE=1 timeout 60 python3 bench/profile_mas.py --once --Ts 128,256 2>&1 \
      | grep -E "trace|T=" | head -24
  done
  ;;
mas)
  mas_sweep 150
  ;;
epi)  # the forward at hdim 128 against cuDNN with each kernel's default epilogue and with the
  # per-warpgroup epilogue forced on (FLASHKIT_SM90_FWD_WG_EPI=1), two rounds, one process each
  for round in 1 2; do
    for e in default 1; do
      stamp "bench/attention.py fwd hdim ${HD:-128}, epilogue $e"
      if [ "$e" = default ]; then unset FLASHKIT_SM90_FWD_WG_EPI; else export FLASHKIT_SM90_FWD_WG_EPI=$e; fi
      timeout 150 python3 bench/attention.py --out "$out/r$round-$e" --fwd-only --methods flashkit,cudnn \
        --hdims "${HD:-128}" --seqlens 2048,4096,8192,16384 --name "epi-$e" >"$log/epi-$round-$e.log" 2>&1
      stamp "rc=$?"
      grep -E "^d[0-9]" "$log/epi-$round-$e.log" | tail -12
    done
  done
  unset FLASHKIT_SM90_FWD_WG_EPI
  ;;
epi2)  # the short-key default (fwd_epilogue.h default_per_wg): forward tests, sanitizers, then
  # the forward against cuDNN, base (main's package) / new, two rounds
  gtest fwd 'AttentionGpuSm90*:AttentionGpuSmall.Sm90*:AttentionGpuSmall.Fp8*:AttentionGpuFp8*:AttentionGpuBlockSparse*:AttentionGpu/AttentionGpuVariants*:AttentionGpu.*' 300
  SAN_EACH=${SAN_EACH:-80} sanitize "$bin" 'AttentionGpuSmall.Sm90AndSm80Paths:AttentionGpuSmall.Sm90PaddedBuckets'
  for round in $(seq 1 "${ROUNDS:-2}"); do
    for v in base new; do
      stamp "bench/attention.py fwd $v"
      PYTHONPATH=$(pp_of $v) timeout 150 python3 bench/attention.py --out "$out/r$round-$v" --fwd-only \
        --methods flashkit,cudnn --hdims 128,64 --seqlens 2048,4096,8192 --name "epi2-$v" \
        >"$log/epi2-$round-$v.log" 2>&1
      stamp "rc=$?"
      grep -E "^d[0-9]" "$log/epi2-$round-$v.log"
    done
  done
  ;;
issue8)  # forward and backward against cuDNN and flash in one process (the carried library)
  issue8_table "${NAME:-attention-s24}"
  ;;
esac
stamp "done"
