#!/usr/bin/env bash
# One GPU call (session 6, call 4): decode + MAS kernels only (noattention build), the decode and
# MAS GPU tests, the quick decode sweep (bench/decode.py --quick) with 128-byte L2 fills as extra
# columns, then ncu's source-level samples of the MAS forward kernel at T = 128 (K = 2 rows a
# lane, v12) for bench/NOTES-mas.md. Run from the repo root with .carry and .whl carried.
# usage: OUT=/some/dir bench/gpu-session6.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
stamp "build + tests"
timeout 330 tests/gpu/run --kernels noattention --filter 'MasGpu*:DecodeGpu*' --no-sanitize \
  --out "$log" >"$log/run.txt" 2>&1
stamp "tests/gpu/run rc=$?"
grep -E "gpu tests|build" "$log/run.txt" | tail -3
P=FLASHKIT_DECODE_L2_PROMO
stamp "decode.py --quick"
timeout 170 python3 bench/decode.py --out "$out" --quick --budget 150 \
  --variants "split_kv@$P=128,lean@$P=128" >"$log/decode-quick.log" 2>&1
stamp "rc=$?"
grep -E "^d(64|128) " "$log/decode-quick.log" | cut -c1-400
stamp "ncu MAS T=128"
timeout 90 ncu --clock-control none --kernel-name regex:mas_forward --launch-skip 0 \
  --launch-count 1 --section SourceCounters --section WarpStateStats --section SpeedOfLight \
  --section LaunchStats --import-source yes -o "$log/mas128" \
  python3 bench/profile_mas.py --Ts 128 --once >"$log/ncu128.log" 2>&1
ncu_unpack mas128 sass
grep -E "Duration|Elapsed Cycles|SM Frequency|Registers|Warp Cycles Per Issued" "$log/mas128-details.txt"
stamp "done"
(cd "$out" && tar czf logs.tgz t && rm -rf t)
ls "$out"
