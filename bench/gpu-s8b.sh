#!/usr/bin/env bash
# Second call of session 8, on the machine call 1 (bench/gpu-s8.sh) left warm with build-gpu
# built (FLASHKIT_SM90_UNIFORM_WG=1, the code since): Nsight Compute on the Hopper forward at hdim 128, seqlen
# 8k, dense — SpeedOfLight, WarpStateStats, pipe utilisation (InstructionStats, ComputeWorkload)
# and source-level warp-state samples per SASS instruction — and the same sections on cuDNN's
# forward (torch SDPA) for the side-by-side. Rebuilds (minimal) only if build-gpu is missing.
# usage: OUT=/some/dir bench/gpu-s8b.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
if [ ! -x build-gpu/flashkit ]; then
  stamp "build (machine was not warm)"
  timeout 400 tests/gpu/run --kernels minimal --no-tests \
    --out "$log" >"$log/run.txt" 2>&1
  stamp "build rc=$?"
fi
sec="--section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis --section InstructionStats --section LaunchStats --section Occupancy"
stamp "ncu flashkit forward"
timeout 150 ncu --clock-control none --kernel-name regex:run_kernel_sm90 --launch-count 1 $sec \
  --section SourceCounters --import-source yes -o "$log/fk" \
  python3 bench/profile_attention.py --fwd-only --seqlen 8192 128 >"$log/ncu-fk.log" 2>&1
stamp "rc=$?"
ncu_unpack fk sass
stamp "ncu cudnn forward"
timeout 150 ncu --clock-control none --kernel-name regex:'sdpa|fprop|cudnn' \
  --launch-count 1 $sec -o "$log/cd" \
  python3 bench/profile_attention.py --fwd-only --cudnn --seqlen 8192 128 >"$log/ncu-cd.log" 2>&1
stamp "rc=$?"
ncu_unpack cd
for f in fk cd; do
  echo "== $f"; grep -E "^  [a-zA-Z_].*(Kernel|kernel)|Duration|Elapsed Cycles|SM Frequency|Registers Per|Warp Cycles Per Issued|Issue Slots Busy|Executed Ipc A|Compute \(SM\) Throughput" "$log/$f-details.txt" | head -14
done
(cd "$out" && tar czf logs.tgz t && rm -rf t)
ls "$out"
