#!/usr/bin/env bash
# Session 12 call 2: where the hdim 256 backward with the dQ pass (branch h/d256-dqpass) spends its
# time. ncu on the A/B harness binary .ab/d256pass (bench/sm90_bwd_ab.cu -DAB_HDIM=256) at 8k:
# both kernels of one dense backward with every section and source-level samples, then the
# durations of both kernels of one causal backward; then compute-sanitizer memcheck and racecheck
# on the harness's checks alone (seqlen 0: six small problems, dense and causal, both kernels).
# usage: OUT=/some/dir bench/gpu-s12b.sh   (.carry, .whl and .ab carried)
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$log/gpu.txt"
# Launches of run_kernel_sm90: 6 checks x (forward, column kernel, dQ pass) = 18; at 8k dense one
# forward, then 73 backwards (3 warm-up + 70 timed) x 2 kernels; then the causal forward.
stamp "ncu dense 8k"
timeout 200 ncu --set full --import-source yes -k regex:run_kernel_sm90 --launch-skip 19 -c 2 \
  -o "$log/dense" .ab/d256pass d256pass 8192 >"$log/ncu-dense.txt" 2>&1
stamp "rc=$?"
ncu_unpack dense sass
grep -E "run_kernel_sm90|Duration|Compute \(SM\) Throughput|Memory Throughput|Issued Ipc|Registers Per|Achieved Occupancy|Shared Memory Configuration Size" \
  "$log/dense-details.txt" | sed 's/(flashkit.*//' | head -30
stamp "ncu causal 8k durations"
timeout 120 ncu --metrics gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed \
  -k regex:run_kernel_sm90 --launch-skip 166 -c 2 .ab/d256pass d256pass 8192 >"$log/ncu-causal.txt" 2>&1
stamp "rc=$?"
grep -E "run_kernel_sm90|gpu__time|sm__throughput" "$log/ncu-causal.txt" | sed 's/(flashkit.*//' | head
harness_sanitize d256pass "check|ERROR SUMMARY|RACE" 10
(cd "$out" && tar czf logs.tgz t && rm -rf t)
