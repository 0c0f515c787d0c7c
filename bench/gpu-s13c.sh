#!/usr/bin/env bash
# Session 13: A/B of fp8 forward harness binaries (bench/sm90_fp8_ab.cu builds in .ab/), two
# interleaved rounds each, checks printed once per binary; optional compute-sanitizer on the
# checks of $SAN (a binary name).
# usage: OUT=/some/dir VARIANTS="fp8bn128 fp8bn192" [SEQ="4096 8192 16384"] [SAN=name] bench/gpu-s13c.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
harness_rounds
for v in $VARIANTS; do grep -h "check" "$log/ab-$v.txt" | sort -u | awk -v v=$v '{print v": "$0}' | grep -E "FAILED|sk1300 causal"; done
[ -n "${SAN:-}" ] && harness_sanitize "$SAN"
echo "variant d causal s fp8_ms fp8_tflops bf16_tflops ratio transpose_us" >"$log/table.txt"
grep -hE "^[a-z0-9_]+ d[0-9]+ (full|causal)" "$log"/ab-*.txt | sort -k3,3 -k4,4V -k1,1 >>"$log/table.txt"
cat "$log/table.txt"
cp "$log/table.txt" "$out/table.txt"
(cd "$out" && tar czf logs.tgz t && rm -rf t)
