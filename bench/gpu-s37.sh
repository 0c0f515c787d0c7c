#!/bin/bash
# Session 37's decode call (softcap and sliding windows in decode): the GPU decode gtests (a
# carried test binary built on the CPU machine with the change, .ab/decode_tests), memcheck and
# racecheck on DecodeGpuSmall*, the NumPy and torch decode tests through the changed extension
# (.ab/var-dec.so in place of main's python/flashkit/_C), then bench/decode_variants.py with main's
# extension as base_plain. Everything carried comes in .ab/lib.txz.
# usage: OUT=/some/dir [GTEST_FILTER=..] [SKIP_BENCH=1] bench/gpu-s37.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$log/gpu.txt"
python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall()" .ab/lib.txz
ext_pkg_dirs dec
stamp "decode gtests"
timeout 300 .ab/decode_tests --gtest_filter="${GTEST_FILTER:-DecodeGpu*}" >"$log/gtests.log" 2>&1
stamp "rc=$?"
grep -E "^\[  FAILED|^\[  PASSED|tests ran|Failure|^\[       OK \] .*Softcap" "$log/gtests.log" | head -20
sanitize .ab/decode_tests 'DecodeGpuSmall*'
stamp "python decode tests"
timeout 150 python3 -m pytest -q tests/python/test_decode.py tests/python/test_torch_decode.py >"$log/pytest.log" 2>&1
stamp "rc=$?"
tail -3 "$log/pytest.log"
[ -n "${SKIP_BENCH:-}" ] && { (cd "$out" && tar czf logs.tgz t); exit 0; }
stamp "bench/decode_variants.py ($(left) s left)"
FLASHKIT_BASE_EXT_DIR=/tmp/basepkg timeout $(( $(left) - 15 )) python3 bench/decode_variants.py --out "$out" \
  >"$log/bench.log" 2>&1
stamp "rc=$?"
(cd "$out" && tar czf logs.tgz t)
cat "$log/bench.log"
