#!/usr/bin/env bash
# Session 15: the persistent Hopper backward's A/B (bench/gpu-ab.sh over every .ab/ binary, cuDNN
# and flash backward in the same call), then memcheck + racecheck on $SAN's checks.
# usage: OUT=/some/dir SAN="b128pers b64pers" bench/gpu-s15a.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:?set OUT}
SDPA=--bwd bench/gpu-ab.sh
for b in ${SAN:-}; do
  for tool in memcheck racecheck; do
    timeout 100 compute-sanitizer --tool "$tool" ".ab/$b" "$b" 0 >"$out/san-$b-$tool.txt" 2>&1
    echo "$b $tool rc=$? $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/san-$b-$tool.txt" | head -2 | tr '\n' ' ') $(grep -c ' ok$' "$out/san-$b-$tool.txt") ok"
  done
done
