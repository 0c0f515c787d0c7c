#!/usr/bin/env bash
# One GPU call for MAS v8 (bench/NOTES-mas.md "v8"): build + MAS GPU tests + memcheck/racecheck
# on MasGpuSmall*, bench/profile_mas.py once per knob setting (v8 stage vs v7 register loads),
# then the side-by-side bench/mas.py. Run from the repo root of the staged tree on the device;
# writes <= 7 files under $OUT (logs tarred).
#
# usage: OUT=/some/dir bench/gpu-mas3.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:?set OUT}
[ -e .carry ] || { [ -e ../../.carry ] && ln -sfn ../../.carry .carry; }
t0=$(date +%s)
log="$out/t"
mkdir -p "$log"
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a "$log/steps.txt"; }

stamp "build + tests"
timeout 330 tests/gpu/run --kernels minimal --filter 'MasGpu*' --sanitize-filter 'MasGpuSmall*' \
  --out "$log" >"$log/run.txt" 2>&1
stamp "tests/gpu/run rc=$?"
tail -12 "$log/run.txt"

# Knobs (read once per process): "" = v8 defaults (shared-memory stage), FLASHKIT_MAS_STAGE=0 =
# v7's register loads in the same build.
for knob in "" "FLASHKIT_MAS_STAGE=0"; do
  name=${knob:-default}
  stamp "profile_mas $name"
  env $knob PYTHONPATH=python PYTHONUNBUFFERED=1 timeout 45 python3 bench/profile_mas.py \
    --Ts 128,256,512,2048 >"$log/profile-$name.log" 2>&1
  stamp "rc=$?"
  cat "$log/profile-$name.log" | grep "us$"
done

stamp "bench/mas.py"
PYTHONPATH=python PYTHONUNBUFFERED=1 timeout 170 python3 bench/mas.py --out "$out" \
  --cython-max-t 256 >"$log/mas.log" 2>&1
stamp "rc=$?"
tail -20 "$log/mas.log"

(cd "$out" && tar czf logs.tgz t && rm -rf t)
ls "$out"
