#!/bin/bash
# Session 36's device calls (MAS, issue 5; one script, parts chosen by PARTS, each printing a short
# table last). The extensions and MAS test binaries come built on the CPU machine in .ab/lib.txz:
# python/flashkit/_C*.so (main's), .ab/var-<v>.so and .ab/mas_tests_<v> built from branch s36-mas-v22
# (bench/NOTES-mas.md v22; the variants' knobs exist only there).
#   test   the MAS gtests of each binary in TESTS ("v:knobs v:knobs ..", knobs = KEY=VAL,KEY=VAL or
#          -), then memcheck and racecheck of SAN ("v:knobs") on MasGpuSmall.BandKernelShapes
#   ab     GPU time of a drop-in call (bench/mas_overhead.py, graph from a flushed L2) and CTA 0's
#          phase clocks (FLASHKIT_MAS_TRACE) for each variant of VARS ("name=so:knobs", so = base
#          or a .ab/var-<so>.so), ROUNDS rounds (default 2), Ts (default 128,256)
#   prof   Nsight Compute (source counters, warp states) of the band kernel's first launches of
#          bench/profile_mas.py --once --Ts 128 for each variant of PROF ("name=so:knobs"):
#          $out/prof-<name>-details.txt and per-SASS-instruction samples prof-<name>-sass.csv.gz
#          (NCU_ARGS: more ncu options, e.g. --sampling-interval 0)
#   sweep  bench/mas.py (Super-MAS, its TorchScript, Cython to T = 256) with SWEEP_VAR ("so:knobs")
# usage: OUT=/some/dir PARTS="test ab" TESTS="tab:FLASHKIT_MAS_BAND_TABLE=1" VARS="..." bench/gpu-s36.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$log/gpu.txt"
python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall()" .ab/lib.txz
ext_save_base
envs() { [ "$1" = - ] && return 0; echo "$1" | tr ',' ' '; }
for part in ${PARTS:?set PARTS}; do
  case "$part" in
  test)
    for spec in ${TESTS:?}; do
      v=${spec%%:*}; k=${spec#*:}
      stamp "MAS gtests $v [$k]"
      env $(envs "$k") timeout 150 ".ab/mas_tests_$v" --gtest_filter='MasGpu*' >"$log/test-$v-$k.log" 2>&1
      stamp "rc=$?"; grep -E "^\[  FAILED|^\[  PASSED|differ" "$log/test-$v-$k.log" | head -8
    done
    if [ -n "${SAN:-}" ]; then
      v=${SAN%%:*}; k=${SAN#*:}
      for tool in memcheck racecheck; do
        stamp "$tool $v [$k] ($(left) s left)"
        env $(envs "$k") timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 ".ab/mas_tests_$v" \
          --gtest_filter='MasGpuSmall.BandKernelShapes:MasGpuSmall.NonDensePathAndDurationsOnly' >"$log/$tool-$v.log" 2>&1
        stamp "rc=$?"; grep -E "SUMMARY|PASSED|FAILED" "$log/$tool-$v.log" | head -4
      done
    fi
    ;;
  ab)
    for r in $(seq 1 "${ROUNDS:-2}"); do
      for spec in ${VARS:?}; do
        name=${spec%%=*}; rest=${spec#*=}; v=${rest%%:*}; k=${rest#*:}
        use_ext "$v"
        env $(envs "$k") timeout 90 python3 bench/mas_overhead.py --Ts "${Ts:-128,256}" --reps 30 \
          >"$log/ab-r$r-$name.log" 2>&1
        env $(envs "$k") FLASHKIT_MAS_TRACE=1 timeout 60 python3 bench/profile_mas.py --once --Ts "${Ts:-128,256}" \
          2>&1 | grep "band trace" >"$log/trace-r$r-$name.log"
      done
    done
    use_ext base
    stamp "ab done"
    for spec in ${VARS}; do
      name=${spec%%=*}
      for r in $(seq 1 "${ROUNDS:-2}"); do
        echo "== $name r$r"; grep -E "drop-in" "$log/ab-r$r-$name.log" | sed -E 's/ +/ /g'
        grep "warp 0" "$log/trace-r$r-$name.log" | sed -E 's/band trace //' | head -4
      done
    done | tee "$out/ab-table.txt"
    ;;
  prof)
    for spec in ${PROF:?}; do
      name=${spec%%=*}; rest=${spec#*=}; v=${rest%%:*}; k=${rest#*:}
      use_ext "$v"
      stamp "ncu $name ($(left) s left)"
      env $(envs "$k") timeout 120 ncu --kernel-name regex:mas_forward_band --launch-count 3 ${NCU_ARGS:-} \
        --section SourceCounters --section WarpStateStats --section SchedulerStats --section LaunchStats \
        -f -o "$log/prof-$name" python3 bench/profile_mas.py --once --Ts 128 >"$log/ncu-$name.log" 2>&1
      stamp "rc=$?"
      ncu_unpack "prof-$name" sass
      mv "$log/prof-$name-details.txt" "$out/"; gzip -c "$log/prof-$name-sass.csv" >"$out/prof-$name-sass.csv.gz"
      grep -E "Duration|Warp Cycles Per Issued|Issued Warp|No Eligible" "$out/prof-$name-details.txt" | head -12
    done
    use_ext base
    ;;
  sweep)
    v=${SWEEP_VAR%%:*}; k=${SWEEP_VAR#*:}
    use_ext "$v"
    stamp "bench/mas.py with $SWEEP_VAR ($(left) s left)"
    env $(envs "$k") timeout $(( $(left) - 10 )) python3 bench/mas.py --out "$out" --cython-max-t 256 --reps 7 \
      ${SWEEP_ARGS:-} >"$log/mas.log" 2>&1
    stamp "rc=$?"; grep -A9 "T  flashkit" "$log/mas.log"; tail -4 "$log/mas.log"
    use_ext base
    ;;
  *) echo "unknown part $part" ;;
  esac
done
(cd "$out" && tar czf logs.tgz t && rm -rf t)
