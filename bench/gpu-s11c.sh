#!/usr/bin/env bash
# Session 11 call 3: the hdim 256 Hopper backward with dQ staged in its own Q/dO stage and added
# by bulk reduces (d256stage) against the 16-byte atomics version (d256base), the no-dQ-add
# bound (d256nodq, timing only) and cuDNN / flash; hdim 128 (d128new) unchanged code, as a check.
# usage: OUT=/some/dir bench/gpu-s11c.sh   (.carry, .whl and .ab carried)
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
stamp "A/B rounds"
HDIMS="256 128" SDPA=--bwd OUT="$log" timeout 300 bench/gpu-ab.sh >"$log/ab-call.txt" 2>&1
stamp "rc=$?"
cat "$log/table.txt"
grep -E "check|FAILED" "$log/ab.txt" | sort | uniq -c | head -16
(cd "$out" && tar czf logs.tgz t && rm -rf t)
