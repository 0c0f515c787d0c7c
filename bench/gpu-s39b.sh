#!/bin/bash
# Session 39's third and fifth calls: where the hdim 256 Hopper backward's variant cost goes.
# PHASE=breakdown (call 3): per-kernel GPU time (bench/kernel_breakdown.py, b2 h8 s8k dense) of
# plain, softcap 30, ALiBi and a (1024, 1024) window, then Nsight Compute (speed of light, pipes,
# warp states, instructions, local memory) of the column kernel and the dQ pass, plain against
# softcap. PHASE=src (call 5): Nsight Compute source counters (per SASS instruction: executed
# instructions, warp stall samples) of the column kernel, softcap 30 and plain.
# The carried .ab/lib.txz as in bench/gpu-s39.sh.
# (Calls 3 and 5 ran these steps as two scripts, gpu-s39b.sh and gpu-s39c.sh, merged after.)
# usage: OUT=/some/dir PHASE=breakdown|src bench/gpu-s39b.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$log/gpu.txt"
python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall()" .ab/lib.txz
cat >/tmp/one_bwd.py <<'PY'
import sys, torch, flashkit
cap = float(sys.argv[1])
b, s, h, d = 2, 8192, 8, 256
q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
out = flashkit.attention(q, k, v, softcap=cap)
out.backward(torch.randn_like(out))
torch.cuda.synchronize()
PY
# ncu of one backward at softcap $1 ($2: the kernel regex, $3 the report name, then the sections).
ncu_bwd() {
  local cap=$1 k=$2 name=$3
  shift 3
  stamp "ncu $name ($(left) s left)"
  timeout 200 ncu "$@" --kernel-name-base demangled -k "regex:$k" -o "$log/$name" \
    python3 /tmp/one_bwd.py "$cap" >"$log/$name.log" 2>&1
  stamp "rc=$?"; tail -1 "$log/$name.log"
  ncu -i "$log/$name.ncu-rep" --page details >"$out/$name-details.txt" 2>&1
}
if [ "${PHASE:-breakdown}" = breakdown ]; then
  export PYTHONPATH=bench:$PYTHONPATH
  for opt in "" "--softcap 30" "--alibi" "--window 1024,1024"; do
    stamp "breakdown hdim 256 $opt"
    # shellcheck disable=SC2086
    bd --hdim 256 $opt | tee -a "$out/breakdown-d256.txt"
  done
  for cap in 0 30; do
    ncu_bwd $cap "BwdKernel|BwdDqKernel" "ncu-d256-bwd-cap$cap" --section SpeedOfLight \
      --section ComputeWorkloadAnalysis --section WarpStateStats --section InstructionStats \
      --section LaunchStats --section MemoryWorkloadAnalysis_Tables
    rm -f "$log/ncu-d256-bwd-cap$cap.ncu-rep"
    grep -E "BwdKernel|BwdDqKernel|Duration|Compute \(SM\) Throughput|Issue Slots Busy|Warp Cycles Per Issued|Executed Instructions  " \
      "$out/ncu-d256-bwd-cap$cap-details.txt" | cut -c1-150 | head -24
  done
else
  for cap in 30 0; do
    ncu_bwd $cap BwdKernel "src-d256-bwd-cap$cap" --section SourceCounters --section WarpStateStats \
      --section InstructionStats --import-source no
    ncu -i "$log/src-d256-bwd-cap$cap.ncu-rep" --page source --csv --print-source sass | gzip -c \
      >"$out/src-d256-bwd-cap$cap.csv.gz"
    rm -f "$log/src-d256-bwd-cap$cap.ncu-rep"
  done
fi
(cd "$out" && tar czf logs.tgz t)
