#!/usr/bin/env bash
# The generic A/B call: every harness binary in .ab/ (bench/sm90_fwd_ab.sh; fwd or bwd harness),
# two interleaved rounds, then PyTorch SDPA on the same shapes (SDPA="--bwd" for the backward;
# HDIMS, default "128 64"; HDIMS="" skips it), the pivoted table last. SEQS: the seqlens each
# binary times (its default: 2k-16k).
# usage: OUT=/some/dir [SDPA=--bwd] [SEQS="4096 8192"] [HDIMS=...] bench/gpu-ab.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:?set OUT}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$out/gpu.txt"
for round in 1 2; do
  for b in .ab/*; do
    [ -x "$b" ] && [ -f "$b" ] || continue
    # shellcheck disable=SC2086
    timeout 90 "$b" "$(basename "$b")" ${SEQS:-} >>"$out/ab.txt" 2>&1 || echo "$(basename "$b") rc=$?" | tee -a "$out/ab.txt"
  done
done
grep -E "FAILED|rc=" "$out/ab.txt" | head -20
echo "checks ok: $(grep -c ' ok$' "$out/ab.txt")"
for hd in ${HDIMS-128 64}; do
  # shellcheck disable=SC2086
  timeout 150 python3 bench/sdpa_time.py --hdim "$hd" --backends cudnn,flash ${SDPA:-} >>"$out/ab.txt" 2>&1
done
python3 bench/ab_table.py "$out/ab.txt" | tee "$out/table.txt"
