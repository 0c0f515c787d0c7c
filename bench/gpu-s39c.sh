#!/bin/bash
# Session 39's fifth call: Nsight Compute source counters (per SASS instruction: executed
# instructions, warp stall samples) of the hdim 256 Hopper backward's column kernel with softcap 30
# and plain (b2 h8 s8k dense), to see which instructions softcap's +45% is made of. The carried
# .ab/lib.txz as in bench/gpu-s39.sh.
# usage: OUT=/some/dir bench/gpu-s39c.sh
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
for cap in 30 0; do
  stamp "ncu source counters, softcap $cap ($(left) s left)"
  timeout 200 ncu --section SourceCounters --section WarpStateStats --section InstructionStats \
    --import-source no --kernel-name-base demangled -k "regex:BwdKernel" -o "$log/src$cap" \
    python3 /tmp/one_bwd.py $cap >"$log/src$cap.log" 2>&1
  stamp "rc=$?"; tail -1 "$log/src$cap.log"
  ncu -i "$log/src$cap.ncu-rep" --page source --csv --print-source sass | gzip -c >"$out/src-d256-bwd-cap$cap.csv.gz"
  ncu -i "$log/src$cap.ncu-rep" --page details >"$out/src-d256-bwd-cap$cap-details.txt" 2>&1
  rm -f "$log/src$cap.ncu-rep"
done
(cd "$out" && tar czf logs.tgz t)
