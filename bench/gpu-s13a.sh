#!/usr/bin/env bash
# Session 13 call 1: the FP8 (e4m3) forward in the standalone harness (bench/sm90_fp8_ab.cu, built
# per head dim with SRC=bench/sm90_fp8_ab.cu bench/sm90_fwd_ab.sh 'fp8d128=-DAB_HDIM=128' ...):
# reference checks then fp8 vs bf16 TFLOP/s at 2k-16k for hdim 64 / 128 / 256, compute-sanitizer
# memcheck and racecheck on the hdim 128 checks, ncu durations of the 8k dense kernels.
# usage: OUT=/some/dir bench/gpu-s13a.sh   (.carry and .ab carried)
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$log/gpu.txt"
for d in 128 256 64; do
  stamp "fp8d$d"
  timeout 120 .ab/fp8d$d fp8d$d >"$log/fp8d$d.txt" 2>&1
  stamp "rc=$?"
  grep -E "check" "$log/fp8d$d.txt" | head -8
done
harness_sanitize fp8d128
stamp "ncu fp8d128 8k"
timeout 100 ncu --metrics gpu__time_duration.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active \
  -k regex:"run_kernel_sm90|transpose" --launch-skip 16 -c 3 .ab/fp8d128 fp8d128 8192 >"$log/ncu.txt" 2>&1
grep -hE "run_kernel_sm90|transpose|gpu__time|gmma" "$log/ncu.txt" | sed 's/(flashkit.*//' | cut -c1-140
echo "variant d causal s fp8_ms fp8_tflops bf16_tflops ratio transpose_us" | tee "$log/table.txt"
grep -hE "^fp8d[0-9]+ d" "$log"/fp8d*.txt | tee -a "$log/table.txt"
cat "$log/table.txt" >"$out/table.txt"
(cd "$out" && tar czf logs.tgz t && rm -rf t)
