#!/bin/bash
# Session 39's third call: where the hdim 256 Hopper backward's variant cost goes. Per-kernel GPU
# time (bench/kernel_breakdown.py, b2 h8 s8k dense) of plain, softcap 30, ALiBi and a (1024, 1024)
# window, then Nsight Compute (speed of light, pipes, warp states, instructions, local memory) of
# the column kernel and the dQ pass, plain against softcap. The carried .ab/lib.txz as in
# bench/gpu-s39.sh.
# usage: OUT=/some/dir bench/gpu-s39b.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$log/gpu.txt"
python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall()" .ab/lib.txz
export PYTHONPATH=bench:$PYTHONPATH
for opt in "" "--softcap 30" "--alibi" "--window 1024,1024"; do
  stamp "breakdown hdim 256 $opt"
  # shellcheck disable=SC2086
  bd --hdim 256 $opt | tee -a "$out/breakdown-d256.txt"
done
cat >/tmp/one_bwd.py <<'PY'
import sys, torch, flashkit
cap = float(sys.argv[1])
b, s, h, d = 2, 8192, 8, 256
q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
out = flashkit.attention(q, k, v, softcap=cap)
out.backward(torch.randn_like(out))
torch.cuda.synchronize()
PY
for cap in 0 30; do
  stamp "ncu softcap $cap ($(left) s left)"
  timeout 150 ncu --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
    --section InstructionStats --section LaunchStats --section MemoryWorkloadAnalysis_Tables \
    --kernel-name-base demangled -k "regex:BwdKernel|BwdDqKernel" -o "$log/ncu$cap" \
    python3 /tmp/one_bwd.py $cap >"$log/ncu$cap.log" 2>&1
  stamp "rc=$?"; tail -2 "$log/ncu$cap.log"
  ncu -i "$log/ncu$cap.ncu-rep" --page details >"$out/ncu-d256-bwd-cap$cap.txt" 2>&1
  rm -f "$log/ncu$cap.ncu-rep"
  grep -E "BwdKernel|BwdDqKernel|Duration|Compute \(SM\) Throughput|Issue Slots Busy|Warp Cycles Per Issued|Executed Instructions  |Local" \
    "$out/ncu-d256-bwd-cap$cap.txt" | cut -c1-150 | head -24
done
(cd "$out" && tar czf logs.tgz t)
