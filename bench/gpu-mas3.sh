#!/usr/bin/env bash
# One GPU call for MAS v8 (bench/NOTES-mas.md "v8"): build + MAS GPU tests + memcheck/racecheck
# on MasGpuSmall*, bench/profile_mas.py (v8 defaults, then v7's register loads), the side-by-side
# bench/mas.py, then, while the call has time (BUDGET s, default 560: under the 600 s a call may
# run; the build alone took 330 s in the lead's call 2), ncu source-level stalls at T = 128 and
# 2048 and the L2 prefetch shapes. Run from the repo root of the staged tree on the device;
# writes <= 7 files under $OUT (logs tarred).
#
# usage: OUT=/some/dir [BUDGET=560] bench/gpu-mas3.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:?set OUT}
budget=${BUDGET:-560}
[ -e .carry ] || { [ -e ../../.carry ] && ln -sfn ../../.carry .carry; }
t0=$(date +%s)
log="$out/t"
mkdir -p "$log"
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a "$log/steps.txt"; }
left() { echo $(( budget - ($(date +%s) - t0) )); }

stamp "build + tests"
timeout $(( budget - 120 )) tests/gpu/run --kernels minimal --filter 'MasGpu*' \
  --sanitize-filter 'MasGpuSmall*' --out "$log" >"$log/run.txt" 2>&1
stamp "tests/gpu/run rc=$?"
tail -12 "$log/run.txt"

# Knobs (read once per process): "" = v8 defaults (shared-memory stage), FLASHKIT_MAS_STAGE=0 =
# v7's register loads in the same build; FLASHKIT_MAS_L2 = the L2 prefetch shapes (T >= 512).
profile() {  # knob Ts
  local name=${1:-default}
  [ "$(left)" -gt 30 ] || { stamp "skip profile $name"; return; }
  stamp "profile_mas $name"
  env $1 PYTHONPATH=python PYTHONUNBUFFERED=1 timeout 45 python3 bench/profile_mas.py \
    --Ts "$2" >"$log/profile-$name.log" 2>&1
  stamp "rc=$?"
  grep "us$" "$log/profile-$name.log"
}
profile "" 128,256,512,2048
profile "FLASHKIT_MAS_STAGE=0" 128,256,512,2048

if [ "$(left)" -gt 60 ]; then
  stamp "bench/mas.py"
  PYTHONPATH=python PYTHONUNBUFFERED=1 timeout $(( $(left) - 10 )) python3 bench/mas.py \
    --out "$out" --cython-max-t 256 >"$log/mas.log" 2>&1
  stamp "rc=$?"
  tail -20 "$log/mas.log"
fi

# Source-level stalls of v8 (as the lead's d1 profile of v7).
if command -v ncu >/dev/null; then
  for T in 128 2048; do
    [ "$(left)" -gt 50 ] || break
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

profile "FLASHKIT_MAS_L2=0,1" 512,2048
profile "FLASHKIT_MAS_L2=2,2" 512,2048

(cd "$out" && tar czf logs.tgz t && rm -rf t)
ls "$out"
