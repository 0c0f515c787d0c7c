#!/usr/bin/env bash
# Session 8 calls 9-10: the Hopper backward on the new harness (bench/sm90_bwd_ab.cu, binaries in .ab/):
# reference checks + timing at hdim 128 and 64 beside SDPA cudnn/flash backward, then Nsight
# Compute on our backward kernel (hdim 128, 8k, dense) with source-level samples, and on cuDNN's
# backward for the side-by-side. usage: OUT=/some/dir bench/gpu-s8h.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:?set OUT}
log="$out/t"; mkdir -p "$log"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$out/gpu.txt"
for b in .ab/*; do
  [ -x "$b" ] && [ -f "$b" ] || continue
  timeout 90 "$b" "$(basename "$b")" >>"$out/ab.txt" 2>&1 || echo "$(basename "$b") rc=$?" | tee -a "$out/ab.txt"
done
grep -E "FAILED|rc=" "$out/ab.txt" | head
echo "checks ok: $(grep -c ' ok$' "$out/ab.txt")"
for hd in 128 64; do
  timeout 150 python3 bench/sdpa_time.py --hdim "$hd" --backends cudnn,flash --bwd >>"$out/ab.txt" 2>&1
done
python3 bench/ab_table.py "$out/ab.txt" | tee "$out/table.txt"
sec="--section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis --section InstructionStats --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis"
timeout 120 ncu --clock-control none --kernel-name-base demangled --kernel-name regex:BwdKernel --launch-skip 9 --launch-count 1 $sec \
  --section SourceCounters --import-source yes -o "$log/bk" .ab/b0 prof 8192 >"$log/ncu-bk.log" 2>&1
echo "ncu ours rc=$?"
ncu -i "$log/bk.ncu-rep" --page details >"$log/bk-details.txt" 2>&1
ncu -i "$log/bk.ncu-rep" --page source --csv --print-source sass >"$log/bk-sass.csv" 2>&1
rm -f "$log/bk.ncu-rep"
timeout 150 ncu --clock-control none --kernel-name regex:'bprop|dgrad|bwd' --launch-skip 6 --launch-count 1 $sec \
  -o "$log/cb" python3 bench/sdpa_time.py --hdim 128 --backends cudnn --bwd --seqlens 8192 >"$log/ncu-cb.log" 2>&1
echo "ncu cudnn rc=$?"
ncu -i "$log/cb.ncu-rep" --page details >"$log/cb-details.txt" 2>&1
rm -f "$log/cb.ncu-rep"
for f in bk cb; do
  echo "== $f"; grep -E "^  [a-zA-Z_].*\(|Duration|Elapsed Cycles|SM Frequency|Registers Per|Warp Cycles Per Issued|Issue Slots Busy|Compute \(SM\) Throughput|L2 Cache Throughput|DRAM Throughput" "$log/$f-details.txt" | head -12
done
(cd "$out" && tar czf logs.tgz t && rm -rf t)
