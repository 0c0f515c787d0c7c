#!/usr/bin/env bash
# Session 10's closing measurements on one GPU: minimal build, the MAS GPU tests with sanitizers
# (v17c on main), bench/variants.py with batched timing (bench/NOTES-attention.md "Variants:
# per-kernel breakdown"), then bench/mas.py's sweep (v17c: the early path kernel from T = 512).
# usage: OUT=/some/dir bench/gpu-s10b.sh   (.carry and .whl carried)
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
stamp "build + MAS tests"
timeout 420 tests/gpu/run --kernels minimal --filter 'MasGpu*' --sanitize-filter 'MasGpuSmall*' \
  --out "$log" >"$log/run.txt" 2>&1
stamp "tests/gpu/run rc=$?"
grep -E "gpu tests|sanitizer|build|FAILED" "$log/run.txt" | tail -6
stamp "bench/variants.py"
timeout 150 python3 bench/variants.py --out "$out" >"$log/variants.log" 2>&1
stamp "rc=$?"
tail -22 "$log/variants.log"
stamp "bench/mas.py ($(left) s left)"
if [ "$(left)" -gt 60 ]; then
  timeout $(( $(left) - 10 )) python3 bench/mas.py --out "$out" --cython-max-t 256 --reps 7 \
    >"$log/mas.log" 2>&1
  stamp "rc=$?"
  grep -A8 "T  flashkit" "$log/mas.log"
fi
(cd "$out" && tar czf logs.tgz t && rm -rf t)
ls "$out"
