#!/usr/bin/env bash
# Session 8 call 6: the sm90 forward's paired causal order (v7, tile_scheduler.h) against v6's
# grouped order, v6 with one group of all pairs + snake, and v5, on the harness binaries in .ab/;
# SDPA cudnn + flash on the same shapes. usage: OUT=/some/dir bench/gpu-s8e.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:?set OUT}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$out/gpu.txt"
one() {  # name binary [env...]
  local name=$1 bin=$2; shift 2
  env "$@" timeout 60 "$bin" "$name" >>"$out/ab.txt" 2>&1 || echo "$name rc=$?" | tee -a "$out/ab.txt"
}
for round in 1 2; do
  one v5 .ab/v5; one v6 .ab/v6; one v6-all .ab/v6 FLASHKIT_SM90_FWD_GROUP=1000; one v7 .ab/v7
  one v5_d64 .ab/v5_d64; one v6_d64 .ab/v6_d64; one v7_d64 .ab/v7_d64
  one v5_d256 .ab/v5_d256; one v6_d256 .ab/v6_d256; one v7_d256 .ab/v7_d256
done
grep -E "FAILED|rc=" "$out/ab.txt" | head -20
echo "checks ok: $(grep -c ' ok$' "$out/ab.txt")"
for hd in 128 64 256; do
  timeout 120 python3 bench/sdpa_time.py --hdim "$hd" --backends cudnn,flash >>"$out/ab.txt" 2>&1
done
python3 bench/ab_table.py "$out/ab.txt" | tee "$out/table.txt"
