#!/usr/bin/env bash
# Session 8 call 8 (right after gpu-s8f.sh, on its warm machine; rebuilds if build-gpu is gone):
# the attention benchmark, forward and backward, flashkit against SDPA flash + cudnn in one
# process (hdim 64/128/256, causal and not, 2k-16k), and the variants' costs (bench/variants.py,
# dropout v2 among them). usage: OUT=/some/dir [METHODS=flashkit,flashkit-sm80,flash,cudnn]
# [NAME=attention-s9b] bench/gpu-s8g.sh (session 9 ran it so, on a fresh machine: it builds first)
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
if [ ! -x build-gpu/flashkit ]; then
  stamp "build (machine was not warm)"
  timeout 400 tests/gpu/run --kernels minimal --no-tests --out "$log" >"$log/run.txt" 2>&1
  stamp "build rc=$?"
fi
stamp "bench/attention.py"
timeout "$(( $(left) - 100 ))" python3 bench/attention.py --out "$out" --methods "${METHODS:-flashkit,flash,cudnn}" \
  --hdims 128,64,256 --seqlens 2048,4096,8192,16384 --name "${NAME:-attention-s8}" >"$log/attn.log" 2>&1
stamp "rc=$?"
stamp "bench/variants.py"
timeout "$(left)" python3 bench/variants.py --out "$out" >"$log/variants.log" 2>&1
stamp "rc=$?"
tail -30 "$log/variants.log"
grep -E "^d|worst" "$log/attn.log" | tail -80
(cd "$out" && tar czf logs.tgz t && rm -rf t)
