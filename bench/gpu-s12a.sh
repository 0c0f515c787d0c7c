#!/usr/bin/env bash
# The first call for branch h/d256-dqpass (bench/NOTES-attention.md "dQ pass"): the hdim 256
# backward with the row-parallel dQ pass against session 11's v2 (dQ by bulk reduces from the
# stage) and cuDNN in the A/B harness, then the minimal build's sm90 attention tests with the
# sanitizers and bench/attention.py at hdim 256. Build the harness binaries here first:
#   SRC=bench/sm90_bwd_ab.cu bench/sm90_fwd_ab.sh 'd256pass=-DAB_HDIM=256' \
#       'd256v2=-DAB_HDIM=256 -DFLASHKIT_SM90_BWD_DQ_PASS=0'   (that macro and v2 were removed in session 12)
# usage: OUT=/some/dir bench/gpu-s12a.sh   (.carry, .whl and .ab carried)
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
stamp "A/B"
HDIMS=256 SDPA=--bwd OUT="$log" timeout 200 bench/gpu-ab.sh >"$log/ab-call.txt" 2>&1
stamp "rc=$?"
cat "$log/table.txt"
grep -E "check|FAILED" "$log/ab.txt" | sort | uniq -c | head -12
sm90_attention_tests minimal 400
stamp "bench/attention.py hdim 256 ($(left) s left)"
timeout $(( $(left) - 5 )) python3 bench/attention.py --out "$out" --methods flashkit,flash,cudnn \
  --hdims 256 --seqlens 2048,4096,8192,16384 --name attention-s12-d256 >"$log/attn.log" 2>&1
stamp "rc=$?"
tail -12 "$log/attn.log"
(cd "$out" && tar czf logs.tgz t && rm -rf t)
