#!/usr/bin/env bash
# Session 11 call 2: where the hdim 256 Hopper backward's time goes. The A/B harness binaries in
# .ab/ (bench/sm90_bwd_ab.cu at -DAB_HDIM=256; base and timing-only skips of the dQ adds, the dQ
# GEMM and the softmax) against cuDNN and flash (bench/gpu-ab.sh), an ncu profile of base at 8k
# with source-level samples, then the MAS early path kernel under racecheck after its fix
# (noattention build).
# usage: OUT=/some/dir bench/gpu-s11b.sh   (.carry, .whl and .ab carried)
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
stamp "A/B rounds"
HDIMS=256 SDPA=--bwd OUT="$log" timeout 240 bench/gpu-ab.sh >"$log/ab-call.txt" 2>&1
stamp "rc=$?"
cat "$log/table.txt"
grep -E "check|FAILED" "$log/ab.txt" | sort | uniq -c | head -12
stamp "ncu base 8k"
timeout 150 ncu --set full --import-source yes -k regex:BwdKernel --launch-skip 10 -c 1 -o "$log/base" \
  .ab/d256base d256base 8192 >"$log/ncu.txt" 2>&1
stamp "rc=$?"
ncu_unpack base sass
grep -E "Duration|Throughput|Issued Ipc|Warp Cycles Per Issued|Registers|Shared Memory Configuration Size|Achieved Occupancy" "$log/base-details.txt" | head -24
stamp "MAS racecheck ($(left) s left)"
timeout $(( $(left) - 15 )) tests/gpu/run --kernels noattention --filter 'MasGpuSmall.EarlyZerosPathKernel' \
  --sanitize-filter 'MasGpuSmall.EarlyZerosPathKernel' --out "$log/mas" >"$log/mas-run.txt" 2>&1
stamp "rc=$?"
tail -6 "$log/mas-run.txt"
(cd "$out" && tar czf logs.tgz t && rm -rf t)
