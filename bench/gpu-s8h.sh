#!/usr/bin/env bash
# Session 8 calls 9-10: the Hopper backward on the new harness (bench/sm90_bwd_ab.cu, binaries in .ab/):
# reference checks + timing at hdim 128 and 64 beside SDPA cudnn/flash backward, then Nsight
# Compute on our backward kernel (hdim 128, 8k, dense) with source-level samples, and on cuDNN's
# backward for the side-by-side. usage: OUT=/some/dir bench/gpu-s8h.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
OUT=$out SDPA=--bwd bench/gpu-ab.sh
sec="--section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis --section InstructionStats --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis"
timeout 120 ncu --clock-control none --kernel-name-base demangled --kernel-name regex:BwdKernel --launch-skip 9 --launch-count 1 $sec \
  --section SourceCounters --import-source yes -o "$log/bk" .ab/b0 prof 8192 >"$log/ncu-bk.log" 2>&1
echo "ncu ours rc=$?"
ncu_unpack bk sass
timeout 150 ncu --clock-control none --kernel-name regex:'bprop|dgrad|bwd' --launch-skip 6 --launch-count 1 $sec \
  -o "$log/cb" python3 bench/sdpa_time.py --hdim 128 --backends cudnn --bwd --seqlens 8192 >"$log/ncu-cb.log" 2>&1
echo "ncu cudnn rc=$?"
ncu_unpack cb
for f in bk cb; do
  echo "== $f"; grep -E "^  [a-zA-Z_].*\(|Duration|Elapsed Cycles|SM Frequency|Registers Per|Warp Cycles Per Issued|Issue Slots Busy|Compute \(SM\) Throughput|L2 Cache Throughput|DRAM Throughput" "$log/$f-details.txt" | head -12
done
(cd "$out" && tar czf logs.tgz t && rm -rf t)
