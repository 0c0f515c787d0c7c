#!/usr/bin/env bash
# Session 24's GPU calls (bench/NOTES-mas.md v21). The library comes built from the CPU machine in
# .ab/lib.tgz (bench/gpu-library.sh says how); the base build (main at 935ec40: the python package
# with its extension) in .ab/base24.tgz.
# PART=mas21: the MAS GPU tests (and the band tests with the old loads and walk), memcheck /
# racecheck on the small band / staged tests, then GPU time of a drop-in call (bench/mas_overhead.py)
# for base, new and new with FLASHKIT_MAS_WALK=0 (the old walk), two rounds, and
# CTA 0's phase clocks (FLASHKIT_MAS_TRACE) base / new.
# PART=mas: bench/mas.py (both timings) with the new package.
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
      if [ "$1" = base ]; then pp=.ab/old:$PYTHONPATH; else pp=$PYTHONPATH; fi
      shift
      PYTHONPATH=$pp env "$@" timeout 60 python3 bench/mas_overhead.py --Ts 128,256,1024 --reps 30 2>&1 \
        | grep -E "T=.*drop-in" | cut -c1-110
    done
  done
  for v in base new; do
    stamp "trace $v"
    if [ "$v" = base ]; then pp=.ab/old:$PYTHONPATH; else pp=$PYTHONPATH; fi
    PYTHONPATH=$pp FLASHKIT_MAS_TRACE=1 timeout 60 python3 bench/profile_mas.py --once --Ts 128,256 2>&1 \
      | grep -E "trace|T=" | head -24
  done
  ;;
mas)
  mas_sweep 150
  ;;
esac
stamp "done"
