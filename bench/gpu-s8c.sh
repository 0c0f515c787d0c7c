#!/usr/bin/env bash
# Session 8 call 3: the sm90 forward v6 A/B. The variants are bench/sm90_fwd_ab.cu binaries built
# on the CPU machine into .ab/ (bench/sm90_fwd_ab.sh; carried), so no library build happens here:
# each binary checks itself against a naive fp32 reference, then times the FA2 protocol's forward
# shapes; two rounds over all binaries, interleaved, then PyTorch SDPA cudnn + flash on the same
# shapes (bench/sdpa_time.py). Prints the pivoted table last.
# usage: OUT=/some/dir bench/gpu-s8c.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:?set OUT}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$out/gpu.txt"
for round in 1 2; do
  for b in .ab/*; do
    [ -x "$b" ] && [ -f "$b" ] || continue
    timeout 60 "$b" "$(basename "$b")" >>"$out/ab.txt" 2>&1 || echo "$(basename "$b") rc=$?" | tee -a "$out/ab.txt"
  done
done
grep -E "FAILED|rc=" "$out/ab.txt" | head -20
for hd in ${HDIMS:-128}; do
  timeout 120 python3 bench/sdpa_time.py --hdim "$hd" --backends cudnn,flash >>"$out/ab.txt" 2>&1
done
python3 bench/ab_table.py "$out/ab.txt" | tee "$out/table.txt"
