#!/usr/bin/env bash
# Session 10: where block-sparse and windowed attention lose time (bench/NOTES-attention.md,
# "variants: per-kernel breakdown"). Minimal build, the MAS GPU tests (v17c's rule) with
# sanitizers, then bench/kernel_breakdown.py --backend flashkit (forward + backward kernels, us per
# call) at hdim 128, 8k: dense, block-sparse 0.1, window (1024, 1024), causal, causal + window
# (1024, 0); then ncu of the block-sparse 0.1 forward kernel (stall reasons per SASS line).
# usage: OUT=/some/dir bench/gpu-s10a.sh   (.carry and .whl carried)
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
mas_tests minimal 450
bd() { timeout 60 python3 bench/kernel_breakdown.py --backend flashkit --seqlen 8192 --hdim 128 "$@" \
  2>&1 | head -8; }
export PYTHONPATH=bench:$PYTHONPATH
bd
bd --density 0.1
bd --window 1024,1024
bd --causal
bd --causal --window 1024,0
bd --density 0.5
if command -v ncu >/dev/null && [ "$(left)" -gt 70 ]; then
  stamp "ncu block-sparse 0.1 forward"
  timeout 60 ncu --kernel-name regex:run_kernel_sm90 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SourceCounters --section LaunchStats \
    --import-source yes -o "$log/bs" python3 bench/kernel_breakdown.py --backend flashkit \
    --seqlen 8192 --hdim 128 --density 0.1 --calls 1 >"$log/bs.log" 2>&1
  ncu_unpack bs sass
  grep -E "Duration|Elapsed Cycles|Warp Cycles Per Issued|Issued Ipc|Compute \(SM\)" "$log/bs-details.txt" | head -8
fi
(cd "$out" && tar czf logs.tgz t && rm -rf t)
