#!/usr/bin/env bash
# Session 43's call: the cross-tile forward (FLASHKIT_SM90_FWD_XTILE) A/B in the harness, main's
# binaries (head*) beside the new code's (base: knob off; xt*: on), two interleaved rounds, then
# memcheck + racecheck on the reference checks of the binaries named in $SAN.
# usage: OUT=/some/dir SAN="xt xt_bm" bench/gpu-s43.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:?set OUT}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv,noheader | tee "$out/gpu.txt"
for round in 1 2; do
  for b in .ab/*; do
    [ -x "$b" ] && [ -f "$b" ] || continue
    timeout 90 "$b" "$(basename "$b")" ${SEQS:-} >>"$out/ab.txt" 2>&1 || echo "$(basename "$b") rc=$?" | tee -a "$out/ab.txt"
  done
done
grep -E "FAILED|rc=" "$out/ab.txt" | head -20
echo "checks ok: $(grep -c ' ok$' "$out/ab.txt")"
for b in ${SAN:-}; do
  for tool in memcheck racecheck; do
    timeout 120 compute-sanitizer --tool "$tool" ".ab/$b" "$b" 0 >"$out/san-$b-$tool.txt" 2>&1
    echo "$b $tool rc=$? $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/san-$b-$tool.txt" | head -2 | tr '\n' ' ') $(grep -c ' ok$' "$out/san-$b-$tool.txt") ok"
  done
done
python3 bench/ab_table.py "$out/ab.txt" | tee "$out/table.txt"
