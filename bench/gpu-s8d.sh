#!/usr/bin/env bash
# Session 8 call 5: the sm90 forward's causal tile order (v6 scheduler) A/B on the harness binaries
# in .ab/ (bench/sm90_fwd_ab.sh): each v6 binary under the old order (one group of every pair,
# no snake: FLASHKIT_SM90_FWD_GROUP=0 FLASHKIT_SM90_FWD_SNAKE=0), the new default (L2-sized
# groups + snake), groups without the snake, and at hdim 128 fixed group sizes; the v5/tlp
# binaries of call 4 as the same-machine reference; SDPA cudnn + flash on the same shapes.
# usage: OUT=/some/dir bench/gpu-s8d.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:?set OUT}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$out/gpu.txt"
one() {  # name binary [env...]
  local name=$1 bin=$2; shift 2
  env "$@" timeout 60 "$bin" "$name" >>"$out/ab.txt" 2>&1 || echo "$name rc=$?" | tee -a "$out/ab.txt"
}
for round in 1 2; do
  for b in v5 tlp v5_d64 v5_d256; do one "$b" ".ab/$b"; done
  for b in v6 v6_d64 v6_d256; do
    one "$b-old" ".ab/$b" FLASHKIT_SM90_FWD_GROUP=0 FLASHKIT_SM90_FWD_SNAKE=0
    one "$b" ".ab/$b"
    one "$b-nosnake" ".ab/$b" FLASHKIT_SM90_FWD_SNAKE=0
  done
  for g in 2 4 16; do one "v6-g$g" .ab/v6 FLASHKIT_SM90_FWD_GROUP=$g; done
done
grep -E "FAILED|rc=" "$out/ab.txt" | head -20
echo "checks ok: $(grep -c ' ok$' "$out/ab.txt")"
for hd in ${HDIMS:-128 64 256}; do
  timeout 120 python3 bench/sdpa_time.py --hdim "$hd" --backends cudnn,flash >>"$out/ab.txt" 2>&1
done
python3 bench/ab_table.py "$out/ab.txt" | tee "$out/table.txt"
