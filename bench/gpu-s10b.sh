#!/usr/bin/env bash
# Session 10's closing measurements on one GPU: minimal build, the MAS GPU tests with sanitizers
# (v17c on main), bench/variants.py with batched timing (bench/NOTES-attention.md "Variants:
# per-kernel breakdown"), then bench/mas.py's sweep (v17c: the early path kernel from T = 512).
# usage: OUT=/some/dir bench/gpu-s10b.sh   (.carry and .whl carried)
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
mas_tests minimal 420
stamp "bench/variants.py"
timeout 150 python3 bench/variants.py --out "$out" >"$log/variants.log" 2>&1
stamp "rc=$?"
tail -22 "$log/variants.log"
mas_sweep 60
(cd "$out" && tar czf logs.tgz t && rm -rf t)
ls "$out"
