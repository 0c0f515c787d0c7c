#!/usr/bin/env bash
# One GPU call for MAS v9 (bench/NOTES-mas.md "v9"): the read-pattern microbenchmark
# (bench/mas_read_pattern.cu), build + MAS GPU tests + memcheck/racecheck on MasGpuSmall*, the
# stage / path-kernel A/B (bench/profile_mas.py), ncu DRAM counters of the DP at T = 128 and 2048,
# then the side-by-side bench/mas.py while the call has time (BUDGET s, default 560). Run from the
# repo root on the device with .carry (CUTLASS, GoogleTest, peers) and .whl (Cython, nanobind)
# carried; KERNELS=noattention (default) builds no attention kernel (decode + MAS only).
#
# usage: OUT=/some/dir [BUDGET=560] [KERNELS=noattention] [SKIP_MICRO=1] [SKIP_NCU=1]
#        [PROFILES="name knob Ts;..."] bench/gpu-mas4.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:?set OUT}
budget=${BUDGET:-560}
kernels=${KERNELS:-noattention}
t0=$(date +%s)
log="$out/t"
mkdir -p "$log"
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a "$log/steps.txt"; }
left() { echo $(( budget - ($(date +%s) - t0) )); }
. bench/carried_wheels.sh
export PYTHONUNBUFFERED=1

if [ -z "${SKIP_MICRO:-}" ]; then
  stamp "read-pattern microbenchmark"
  nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a bench/mas_read_pattern.cu \
    -o "$log/mrp" && for T in 2048 1024 128; do timeout 60 "$log/mrp" $T 32; done | tee "$log/mrp.txt"
fi

stamp "build + tests ($kernels)"
timeout $(( budget - 200 )) tests/gpu/run --kernels "$kernels" --filter 'MasGpu*' \
  --sanitize-filter 'MasGpuSmall*' --out "$log" >"$log/run.txt" 2>&1
stamp "tests/gpu/run rc=$?"
grep -E "gpu tests|sanitizer|build" "$log/run.txt" | tail -5
export PYTHONPATH=python${PYTHONPATH:+:$PYTHONPATH}

profile() {  # name knob Ts
  [ "$(left)" -gt 30 ] || { stamp "skip profile $1"; return; }
  stamp "profile_mas $1"
  env ${2//,/ } timeout 60 python3 bench/profile_mas.py --Ts "$3" >"$log/profile-$1.log" 2>&1
  grep "us$" "$log/profile-$1.log" | sed "s/^/$1 /"
}
# PROFILES: "name knobs Ts" entries separated by ";" (knobs "-" for none, several joined by ",").
IFS=';' read -ra entries <<<"${PROFILES:-auto - 128,256,512,1024,2048;stage1 FLASHKIT_MAS_STAGE=1 1024,2048;pathkernel FLASHKIT_MAS_PATH_KERNEL=1 128,512,2048}"
for e in "${entries[@]}"; do
  read -r name knob ts <<<"$e"
  [ "$knob" = "-" ] && knob=""
  profile "$name" "$knob" "$ts"
done

if [ -z "${SKIP_NCU:-}" ] && command -v ncu >/dev/null && [ "$(left)" -gt 90 ]; then
  m=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
  m=$m,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct
  m=$m,sm__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum
  for T in 2048 128; do
    for knob in "" "FLASHKIT_MAS_STAGE=1"; do
      stamp "ncu T=$T $knob"
      env $knob timeout 60 ncu --clock-control none --kernel-name regex:mas_ --metrics $m \
        --csv python3 bench/profile_mas.py --Ts $T --once >"$log/ncu-$T-${knob:-auto}.csv" 2>&1
      grep -E '"(gpu__time|dram__bytes|dram__thr|lts__t_sector_hit)' "$log/ncu-$T-${knob:-auto}.csv" \
        | awk -F"\",\"" "{print \$1, substr(\$5,1,24), \$(NF-2), \$NF}" | sed "s/^/T=$T ${knob:-auto} /" | head -24
    done
  done
fi

if [ "$(left)" -gt 90 ]; then
  stamp "bench/mas.py"
  timeout $(( $(left) - 10 )) python3 bench/mas.py --out "$out" --cython-max-t 256 --reps 5 \
    >"$log/mas.log" 2>&1
  stamp "rc=$?"
  grep -E "^T=|flashkit_gpu |super_mas" "$log/mas.log" | tail -24
fi

(cd "$out" && tar czf logs.tgz t && rm -rf t)
ls "$out"
