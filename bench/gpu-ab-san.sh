#!/usr/bin/env bash
# A harness A/B with sanitizers: bench/gpu-ab.sh over every .ab/ binary (cuDNN and flash in the
# same call; SDPA=--bwd for the backward harness), then memcheck + racecheck on the reference
# checks of each binary named in $SAN (sessions 15-16). SEQS and HDIMS pass on to gpu-ab.sh
# (HDIMS="" runs no SDPA peer).
# usage: OUT=/some/dir [SDPA=--bwd] [HDIMS="128 64"] [SEQS="4096 8192"] SAN="v8_64 v8_128" \
#   bench/gpu-ab-san.sh
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
