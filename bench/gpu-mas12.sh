#!/usr/bin/env bash
# One GPU call for MAS v16, the tiled kernel for texts up to 256 rows (bench/NOTES-mas.md "v16"):
# build, the MAS GPU tests with sanitizers (tiled kernel on by default), the small tests again with
# FLASHKIT_MAS_TILED=0 (the staged kernel), the A/B (bench/profile_mas.py, default vs TILED=0,
# interleaved), then bench/mas.py's sweep with the time left.
# usage: OUT=/some/dir bench/gpu-mas12.sh   (.carry and .whl carried)
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
stamp "build + tests"
timeout 330 tests/gpu/run --kernels noattention --filter 'MasGpu*' --sanitize-filter 'MasGpuSmall*' \
  --out "$log" >"$log/run.txt" 2>&1
stamp "tests/gpu/run rc=$?"
grep -E "gpu tests|sanitizer|build|FAILED|Failure|differ" "$log/run.txt" | head -20
FLASHKIT_MAS_TILED=0 timeout 60 build-gpu/flashkit_gpu_tests --gtest_filter='MasGpuSmall*' \
  >"$log/staged.log" 2>&1
stamp "TILED=0 small tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$log/staged.log" | tr '\n' ' ')"
for knobs in "" "FLASHKIT_MAS_TILED=0" "" "FLASHKIT_MAS_TILED=0"; do
  env $knobs timeout 60 python3 bench/profile_mas.py --reps 10 --Ts 128,256,512 >"$log/p.log" 2>&1
  grep -E "drop-in|kernels" "$log/p.log" | sed "s/^/[${knobs:-tiled}] /"
done
stamp "bench/mas.py ($(left) s left)"
if [ "$(left)" -gt 120 ]; then
  timeout $(( $(left) - 15 )) python3 bench/mas.py --out "$out" --cython-max-t 256 --reps 7 \
    >"$log/mas.log" 2>&1
  stamp "rc=$?"
  grep -E "^T=|flashkit_gpu|super_mas|mismatch" "$log/mas.log" | tail -30
fi
(cd "$out" && tar czf logs.tgz t && rm -rf t)
ls "$out"
