#!/usr/bin/env bash
# The lead's GPU call for branch h/bwdvar (the sm90 backward with score variants; NOTES-attention
# "sm90 backward with variants"). Run from the repo root of the staged tree with .carry linked and
# OUT set: minimal build + the attention GPU tests (the sm90 backward now takes every variant),
# compute-sanitizer on AttentionGpuSmall*, then bench/variants.py (forward and backward TFLOP/s
# per variant next to plain, b2 h16 s8k d128). Leaves <= 7 files under $OUT; ~420 s at most.
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?set OUT}"
t0=$(date +%s)
timeout 330 tests/gpu/run --kernels minimal --filter 'AttentionGpu*' \
  --sanitize-filter 'AttentionGpuSmall*' --out "$OUT/t" > "$OUT/run.txt" 2>&1
echo "tests/gpu/run rc=$? after $(( $(date +%s) - t0 )) s" >> "$OUT/run.txt"
PYTHONPATH=python PYTHONUNBUFFERED=1 timeout $(( 415 - ($(date +%s) - t0) )) \
  python3 bench/variants.py --out "$OUT" > "$OUT/variants.txt" 2>&1
echo "variants.py rc=$? after $(( $(date +%s) - t0 )) s" >> "$OUT/variants.txt"
grep -E "FAILED|Failure|error:|Expected|Which is|differs|hang|Timeout" "$OUT/t/gpu_tests.log" 2>/dev/null \
  | head -60 > "$OUT/failures.txt"
(cd "$OUT" && tar czf t.tgz t && rm -rf t)
tail -20 "$OUT/run.txt"; cat "$OUT/variants.txt" 2>/dev/null | tail -25; ls "$OUT"
