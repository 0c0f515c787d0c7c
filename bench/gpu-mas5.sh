#!/usr/bin/env bash
# MAS source-level profile (v9 -> v10): ncu's warp-state samples per SASS instruction of the DP
# kernel at T = 128 (and 2048's durations-only kernel), for bench/mas_stalls.py to fold into the
# kernel's regions. Builds decode + MAS only (noattention) unless BUILD=0 finds build-gpu ready.
# usage: OUT=/some/dir [TS="128 2048"] bench/gpu-mas5.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:?set OUT}
log="$out/t"
mkdir -p "$log"
. bench/carried_wheels.sh
if [ "${BUILD:-1}" = 1 ]; then
  tests/gpu/run --kernels "${KERNELS:-noattention}" --filter 'MasGpu*' --no-sanitize --out "$log" \
    >"$log/run.txt" 2>&1
  grep -E "gpu tests|build" "$log/run.txt" | tail -3
fi
export PYTHONPATH=python${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
for T in ${TS:-128 2048}; do
  skip=0; [ "$T" -ge 1024 ] && skip=1  # T >= 1024: the durations-only kernel (no path kernel)
  timeout 120 ncu --clock-control none --kernel-name regex:mas_forward --launch-skip $skip \
    --launch-count 1 --section SourceCounters --section WarpStateStats --section SpeedOfLight \
    --section LaunchStats --import-source yes -o "$log/mas$T" \
    python3 bench/profile_mas.py --Ts $T --once >"$log/ncu$T.log" 2>&1
  ncu -i "$log/mas$T.ncu-rep" --page details >"$log/mas$T-details.txt" 2>&1
  ncu -i "$log/mas$T.ncu-rep" --page source --csv --print-source sass >"$log/mas$T-sass.csv" 2>&1
  rm -f "$log/mas$T.ncu-rep"
  grep -E "Duration|Elapsed Cycles|SM Frequency|Registers|Warp Cycles Per Issued" "$log/mas$T-details.txt"
done
(cd "$out" && tar czf logs.tgz t && rm -rf t)
ls -la "$out"
