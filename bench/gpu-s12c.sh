#!/usr/bin/env bash
# Session 12 call 3: the hdim 256 dQ pass v2 (roles per warpgroup, Q / dO in registers, three
# stages) against v1 and cuDNN (A/B harness binaries .ab/d256p2 and .ab/d256p1, built with
# SRC=bench/sm90_bwd_ab.cu bench/sm90_fwd_ab.sh 'd256p2=-DAB_HDIM=256' at each version), then
# compute-sanitizer on v2's checks and ncu of v2's kernels at 8k (durations; the pass with every
# section and source-level samples).
# Call 5 reused it for the column kernel's roles: NEW=d256r (the new binary; default d256p2),
# NCU_SKIP=19 (the full profile of the column kernel instead of the pass).
# usage: OUT=/some/dir [NEW=name] bench/gpu-s12c.sh   (.carry, .whl and .ab carried)
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
new=${NEW:-d256p2}
harness_sanitize "$new" "check|ERROR SUMMARY|RACECHECK SUMMARY" 10
stamp "A/B"
HDIMS=256 SDPA=--bwd OUT="$log" timeout 200 bench/gpu-ab.sh >"$log/ab-call.txt" 2>&1
stamp "rc=$?"
grep -E "check|FAILED" "$log/ab.txt" | sort | uniq -c | head -12
stamp "ncu $new 8k"
# run_kernel_sm90 launches: 6 checks x 3, then at 8k one forward and 73 backwards x 2 kernels.
timeout 100 ncu --metrics gpu__time_duration.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active \
  -k regex:run_kernel_sm90 --launch-skip 19 -c 2 .ab/$new $new 8192 >"$log/ncu-dense.txt" 2>&1
timeout 100 ncu --metrics gpu__time_duration.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active \
  -k regex:run_kernel_sm90 --launch-skip 166 -c 2 .ab/$new $new 8192 >"$log/ncu-causal.txt" 2>&1
grep -hE "run_kernel_sm90|gpu__time|gmma" "$log/ncu-dense.txt" "$log/ncu-causal.txt" | sed 's/(flashkit.*//; s/void run_kernel_sm90<//' | cut -c1-110
timeout 120 ncu --set full --import-source yes -k regex:run_kernel_sm90 --launch-skip ${NCU_SKIP:-20} -c 1 \
  -o "$log/pass" .ab/$new $new 8192 >"$log/ncu-pass.txt" 2>&1
stamp "rc=$?"
ncu_unpack pass sass
cat "$log/table.txt"
(cd "$out" && tar czf logs.tgz t && rm -rf t)
