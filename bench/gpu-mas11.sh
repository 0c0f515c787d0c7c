#!/usr/bin/env bash
# H100 check of session 7's H200-only findings (bench/NOTES-mas.md): the L2 prefetch on/off for
# long texts (default vs FLASHKIT_MAS_L2=0,1, interleaved twice) and the fused rows-a-lane rule
# (FLASHKIT_MAS_FUSED_K=1|2|4 against the default). Build only (code as tested in call 5).
# usage: OUT=/some/dir bench/gpu-mas11.sh   (.carry and .whl carried)
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
stamp "build"
timeout 300 tests/gpu/run --kernels noattention --no-tests --out "$log" >"$log/run.txt" 2>&1
stamp "build rc=$?"
grep -m1 "GPUs found" -A1 "$log/info.txt" 2>/dev/null
for knobs in "" "FLASHKIT_MAS_L2=0,1" "" "FLASHKIT_MAS_L2=0,1"; do
  env $knobs timeout 60 python3 bench/profile_mas.py --reps 7 --Ts 1024,2048 >"$log/p.log" 2>&1
  grep -E "drop-in|kernels path" "$log/p.log" | sed "s/^/[${knobs:-default}] /"
done
for k in 0 1 2 4; do
  env $( [ $k -gt 0 ] && echo FLASHKIT_MAS_FUSED_K=$k ) timeout 60 python3 bench/profile_mas.py \
    --fused --reps 5 --Ts 128,1024,1536,2048 >"$log/f.log" 2>&1
  grep "fused path" "$log/f.log" | sed "s/^/[K=${k/#0/rule}] /"
done
(cd "$out" && tar czf logs.tgz t && rm -rf t)
