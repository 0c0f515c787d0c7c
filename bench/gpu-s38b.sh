#!/bin/bash
# Session 38's second call script: the GPU decode gtests of a carried binary (.ab/decode_tests,
# now with fp16 softcap / window cases), then issue 6's variants table under the sustained
# protocol (bench/variants.py, hdim 128) through the changed extension (.ab/var-sc.so in place of
# main's python/flashkit/_C). Everything carried comes in .ab/lib.txz.
# usage: OUT=/some/dir [GTEST_FILTER=..] bench/gpu-s38b.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
carried_ab sc
stamp "decode gtests"
timeout 200 .ab/decode_tests --gtest_filter="${GTEST_FILTER:-DecodeGpu*}" >"$log/gtests.log" 2>&1
stamp "rc=$?"
grep -E "^\[  FAILED|^\[  PASSED|tests ran|Failure|^\[       OK \] .*Softcap" "$log/gtests.log" | head -20
[ -n "${SKIP_VARIANTS:-}" ] && exit 0
stamp "variants, hdim 128, sustained ($(left) s left)"
timeout $(( $(left) - 15 )) python3 bench/variants.py --out "$out" --hdim 128 --protocol sustained \
  >"$log/var128.log" 2>&1
stamp "rc=$?"
(cd "$out" && tar czf logs.tgz t)
tail -30 "$log/var128.log"
