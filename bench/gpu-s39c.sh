#!/bin/bash
# Session 39's seventh call: issue 8's hdim 256 cells after v4 (the owners forced inline changed
# the plain hdim 256 backward's SASS): bench/attention.py flashkit against cuDNN at hdim 256,
# 2k-16k, causal and not, sustained protocol, from the carried build (.ab/lib.txz as in
# bench/gpu-s39.sh).
# usage: OUT=/some/dir bench/gpu-s39c.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$log/gpu.txt"
python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall()" .ab/lib.txz
stamp "bench/attention.py hdim 256, sustained"
timeout 420 python3 bench/attention.py --out "$out" --methods flashkit,cudnn --no-memory \
  --hdims 256 --seqlens 2048,4096,8192,16384 --protocol sustained --name attention-d256-s39-v4 \
  >"$log/attn.log" 2>&1
stamp "rc=$?"
tail -30 "$log/attn.log"
