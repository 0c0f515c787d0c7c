#!/bin/bash
# Session 38's call (softcap v10, a fixed softmax max for bounded scores): the attention gtests of
# a carried test binary built on the CPU machine with the change (.ab/attn_tests: the variants,
# the sm90 suite with SoftcapSaturatedScores, the small ones), memcheck and racecheck on the small
# variant cases, the torch attention tests through the changed extension (.ab/var-sc.so in place
# of main's python/flashkit/_C), then bench/softcap_ab.py with main's extension as base.
# Everything carried comes in .ab/lib.txz.
# AB_VARIANTS="a b": more carried builds (.ab/var-a.so ...) timed beside it; BASE_DIR= (empty): no base.
# usage: OUT=/some/dir [GTEST_FILTER=..] [SKIP_BENCH=1] [AB_ARGS=..] [AB_VARIANTS=..] bench/gpu-s38.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
carried_ab sc
stamp "attention gtests"
timeout 240 .ab/attn_tests --gtest_filter="${GTEST_FILTER:-AttentionGpuSm90.*:AttentionGpu/AttentionGpuVariants.*:AttentionGpuVariantsShapes.*:AttentionGpuSmall.*}" \
  >"$log/gtests.log" 2>&1
stamp "rc=$?"
grep -E "^\[  FAILED|^\[  PASSED|tests ran|Failure|^\[       OK \] .*Softcap" "$log/gtests.log" | head -20
SAN_EACH=80 sanitize .ab/attn_tests "${SAN_FILTER:-AttentionGpuSmall.Sm90AndSm80PathsVariants}"
if [ -z "${SKIP_PYTEST:-}" ]; then
  stamp "torch attention tests"
  timeout 120 python3 -m pytest -q -x tests/python/test_torch_attention.py >"$log/pytest.log" 2>&1
  stamp "rc=$?"
  tail -3 "$log/pytest.log"
fi
[ -n "${SKIP_BENCH:-}" ] && { (cd "$out" && tar czf logs.tgz t); exit 0; }
exts=""
for v in ${AB_VARIANTS:-}; do
  mkdir -p /tmp/pkg_$v && cp .ab/var-$v.so /tmp/pkg_$v/_C.cpython-312-x86_64-linux-gnu.so
  exts="$exts${exts:+,}$v=/tmp/pkg_$v"
done
stamp "bench/softcap_ab.py ($(left) s left)"
FLASHKIT_AB_EXTS="$exts" FLASHKIT_BASE_EXT_DIR=${BASE_DIR-/tmp/basepkg} timeout $(( $(left) - 15 )) python3 bench/softcap_ab.py --out "$out" ${AB_ARGS:-} \
  >"$log/bench.log" 2>&1
stamp "rc=$?"
(cd "$out" && tar czf logs.tgz t)
cat "$log/bench.log"
