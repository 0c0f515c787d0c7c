#!/usr/bin/env bash
# One GPU call for MAS v8 (bench/NOTES-mas.md "v8"): build + MAS GPU tests + memcheck/racecheck
# on MasGpuSmall*, bench/profile_mas.py once per knob setting (v8 stage vs v7 register loads),
# then the side-by-side bench/mas.py, then (while time is left: ~420 s in all) ncu source-level
# stalls at T = 128 and 2048 and the L2 prefetch shapes. Run from the repo root of the staged
# tree on the device; writes <= 7 files under $OUT (logs tarred).
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
# v7's register loads in the same build; the L2 prefetch shapes with the stage at T >= 512.
for knob in "" "FLASHKIT_MAS_STAGE=0"; do
  name=${knob:-default}
  Ts=128,256,512,2048
  case "$knob" in FLASHKIT_MAS_L2*) Ts=512,2048 ;; esac
  stamp "profile_mas $name"
  env $knob PYTHONPATH=python PYTHONUNBUFFERED=1 timeout 45 python3 bench/profile_mas.py \
    --Ts $Ts >"$log/profile-$name.log" 2>&1
  stamp "rc=$?"
  cat "$log/profile-$name.log" | grep "us$"
done

stamp "bench/mas.py"
PYTHONPATH=python PYTHONUNBUFFERED=1 timeout 170 python3 bench/mas.py --out "$out" \
  --cython-max-t 256 >"$log/mas.log" 2>&1
stamp "rc=$?"
tail -20 "$log/mas.log"

# Source-level stalls of v8 (as the lead's d1 profile of v7), if the call has time left.
if [ $(( $(date +%s) - t0 )) -lt 400 ] && command -v ncu >/dev/null; then
  for T in 128 2048; do
    [ $(( $(date +%s) - t0 )) -lt 420 ] || break
    stamp "ncu T=$T"
    PYTHONPATH=python timeout 40 ncu --kernel-name regex:mas_forward --launch-count 1 \
      --section SpeedOfLight --section WarpStateStats --section SourceCounters \
      --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy \
      --import-source yes -o "$log/mas$T" python3 bench/profile_mas.py --Ts $T --once \
      >"$log/ncu$T.log" 2>&1
    ncu -i "$log/mas$T.ncu-rep" --page details >"$log/mas$T-details.txt" 2>&1
    ncu -i "$log/mas$T.ncu-rep" --page source --csv --print-source sass >"$log/mas$T-sass.csv" 2>&1
    rm -f "$log/mas$T.ncu-rep"
    grep -E "Duration|Elapsed Cycles|SM Frequency" "$log/mas$T-details.txt"
  done
fi

# The L2 prefetch shapes with the stage at T >= 512 (last: only while the call has time).
for knob in "FLASHKIT_MAS_L2=0,1" "FLASHKIT_MAS_L2=2,2"; do
  [ $(( $(date +%s) - t0 )) -lt 440 ] || break
  name=${knob:-default}
  Ts=128,256,512,2048
  case "$knob" in FLASHKIT_MAS_L2*) Ts=512,2048 ;; esac
  stamp "profile_mas $name"
  env $knob PYTHONPATH=python PYTHONUNBUFFERED=1 timeout 45 python3 bench/profile_mas.py \
    --Ts $Ts >"$log/profile-$name.log" 2>&1
  stamp "rc=$?"
  cat "$log/profile-$name.log" | grep "us$"
done

(cd "$out" && tar czf logs.tgz t && rm -rf t)
ls "$out"
