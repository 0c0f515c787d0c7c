#!/usr/bin/env bash
# v17c A/B (bench/NOTES-mas.md): short texts (T <= 512) with the separate early-zeros path kernel
# (FLASHKIT_MAS_PATH_KERNEL=1) against the forward kernel's own path warp (default), interleaved
# twice; build only (code as tested in call 4).
# usage: OUT=/some/dir bench/gpu-mas15.sh   (.carry and .whl carried)
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
stamp "build"
timeout 300 tests/gpu/run --kernels noattention --no-tests --out "$log" >"$log/run.txt" 2>&1
stamp "build rc=$?"
for knobs in "" "FLASHKIT_MAS_PATH_KERNEL=1" "" "FLASHKIT_MAS_PATH_KERNEL=1"; do
  env $knobs timeout 60 python3 bench/profile_mas.py --reps 20 --Ts 128,256,512 >"$log/p.log" 2>&1
  grep -E "drop-in|kernels" "$log/p.log" | sed "s/^/[${knobs:-path warp}] /"
done
(cd "$out" && tar czf logs.tgz t && rm -rf t)
