#!/usr/bin/env bash
# Session 16: the Hopper forward scheduler A/B (bench/gpu-ab.sh over every .ab/ binary, cuDNN
# and flash in the same call; SDPA=--bwd for the backward), then memcheck + racecheck on $SAN's checks.
# usage: OUT=/some/dir SAN="dyn64 dyn128" bench/gpu-s16a.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:?set OUT}
SDPA=${SDPA:-} bench/gpu-ab.sh
for b in ${SAN:-}; do
  for tool in memcheck racecheck; do
    timeout 100 compute-sanitizer --tool "$tool" ".ab/$b" "$b" 0 >"$out/san-$b-$tool.txt" 2>&1
    echo "$b $tool rc=$? $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/san-$b-$tool.txt" | head -2 | tr '\n' ' ') $(grep -c ' ok$' "$out/san-$b-$tool.txt") ok"
  done
done
