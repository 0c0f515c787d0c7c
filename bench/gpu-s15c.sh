#!/usr/bin/env bash
# Session 15: bench/attention.py (forward, backward, memory; flashkit / flash / cudnn in one
# process, hdim 128 / 64 / 256, 2k-16k) with the Python extension built on the CPU machine
# (minimal kernels; carry ["python/flashkit/_C.cpython-312-x86_64-linux-gnu.so"], the device's
# Python being 3.12). usage: OUT=/some/dir [NAME=attention-s15] bench/gpu-s15c.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
stamp "bench/attention.py ($(left) s left)"
timeout $(( $(left) - 10 )) python3 bench/attention.py --out "$out" --methods flashkit,flash,cudnn \
  --hdims 128,64,256 --seqlens 2048,4096,8192,16384 --name "${NAME:-attention-s15}" >"$log/attn.log" 2>&1
stamp "rc=$?"
tail -45 "$log/attn.log"
(cd "$out" && tar czf logs.tgz t && rm -rf t)
