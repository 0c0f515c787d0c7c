#!/usr/bin/env bash
# Session 11 call 4: the hdim 256 Hopper backward with dQ staged per warpgroup in the block's own
# dO/Q stage (bulk reduces): the A/B harness against the atomics version and cuDNN first, then
# the minimal build with the sm90 attention tests (memcheck, racecheck on the small ones) and
# bench/attention.py's protocol for flashkit, flash and cudnn at every hdim.
# usage: OUT=/some/dir bench/gpu-s11d.sh   (.carry, .whl and .ab carried)
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
stamp "A/B"
for b in d256stage d256base; do timeout 60 .ab/$b $b >>"$log/ab.txt" 2>&1; done
timeout 60 python3 bench/sdpa_time.py --hdim 256 --backends cudnn --bwd >>"$log/ab.txt" 2>&1
python3 bench/ab_table.py "$log/ab.txt"
grep -E "check" "$log/ab.txt" | head -8
sm90_attention_tests minimal 400
stamp "bench/attention.py ($(left) s left)"
timeout $(( $(left) - 5 )) python3 bench/attention.py --out "$out" --methods flashkit,flash,cudnn \
  --hdims 256,128,64 --seqlens 1024,2048,4096,8192,16384 --name attention-s11 >"$log/attn.log" 2>&1
stamp "rc=$?"
tail -34 "$log/attn.log"
(cd "$out" && tar czf logs.tgz t && rm -rf t)
