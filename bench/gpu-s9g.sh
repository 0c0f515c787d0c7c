#!/usr/bin/env bash
# Session 9 (right after gpu-s9f.sh, or alone: it builds first, on its warm machine; rebuilds if build-gpu is gone): the
# attention benchmark, forward and backward, flashkit (auto = Hopper kernels, and the sm80-class
# path forced) against SDPA flash + cudnn in one process (hdim 64/128/256, causal and not,
# 2k-16k), then the variants' costs. usage: OUT=/some/dir bench/gpu-s9g.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
if [ ! -x build-gpu/flashkit ]; then
  stamp "build (machine was not warm)"
  timeout 400 tests/gpu/run --kernels minimal --no-tests --out "$log" >"$log/run.txt" 2>&1
  stamp "build rc=$?"
fi
stamp "bench/attention.py"
timeout "$(( $(left) - 100 ))" python3 bench/attention.py --out "$out" --methods flashkit,flashkit-sm80,flash,cudnn \
  --hdims 128,64,256 --seqlens 2048,4096,8192,16384 --name attention-s9b >"$log/attn.log" 2>&1
stamp "rc=$?"
stamp "bench/variants.py"
timeout "$(left)" python3 bench/variants.py --out "$out" >"$log/variants.log" 2>&1
stamp "rc=$?"
tail -30 "$log/variants.log"
grep -E "^d|worst" "$log/attn.log" | tail -80
(cd "$out" && tar czf logs.tgz t && rm -rf t)
