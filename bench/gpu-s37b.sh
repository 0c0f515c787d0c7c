#!/bin/bash
# Session 37's regression check of plain decode after the softcap / window change: bench/decode.py
# on the QUICK anchors (the 8k anchor against cuDNN among them) with main's extension (base) and
# the changed one (new), one round each. Carried: .ab/lib.txz as for gpu-s37.sh.
# usage: OUT=/some/dir [ROUNDS=n] [SHAPES="d,b,h,ctx ..."] bench/gpu-s37b.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$log/gpu.txt"
python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall()" .ab/lib.txz
ext_pkg_dirs dec
for r in $(seq 1 "${ROUNDS:-1}"); do
  for v in base new; do
    stamp "$v round $r ($(left) s left)"
    mkdir -p "$log/$v-$r"
    FLASHKIT_EXT_DIR=/tmp/${v}pkg timeout 150 python3 bench/decode.py --quick --budget 100 --skip single,torch_efficient \
      ${SHAPES:+--shapes $SHAPES} --out "$log/$v-$r" >"$log/$v-$r.log" 2>&1
    stamp "rc=$?"
  done
done
(cd "$out" && tar czf logs.tgz t)
for r in $(seq 1 "${ROUNDS:-1}"); do for v in base new; do
  echo "== $v r$r"; grep -E "^d[0-9]+ b" "$log/$v-$r.log" | sed -E 's/  lean TB.*//'
done; done
