#!/usr/bin/env bash
# Session 44's first call: main's library built on the device (a two-GPU machine's 32 cores; the
# CPU machine's two cores need ~1.5 h for the ~95 units the header changes left stale), then the
# checks session 43's block-mask change (FLASHKIT_SM90_FWD_PIN_MASKS=0) had only in the harness:
# the block-sparse and Hopper attention gtests, the torch attention tests, memcheck and racecheck
# on the small block-mask cases, and bench/variants.py's block-sparse rows (hdim 128 and 64,
# sustained protocol, plain in the same process).
# usage: OUT=/some/dir bench/gpu-s44.sh   (carry: .carry: cutlass/include, googletest)
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$log/gpu.txt"
device_build || exit 1
bin=build-gpu/flashkit_gpu_tests
stamp "gtests ($(left) s left)"
timeout $(( $(left) < 150 ? $(left) : 150 )) "$bin" \
  --gtest_filter='AttentionGpuBlockSparse.*:AttentionGpuSm90.*:AttentionGpuSmall.*:AttentionGpu/*' \
  >"$log/tests.log" 2>&1
stamp "rc=$?"
grep -E "^\[  FAILED|^\[  PASSED|tests ran|Failure" "$log/tests.log" | tail -8
stamp "torch attention tests"
timeout $(( $(left) < 60 ? $(left) : 60 )) python3 -m pytest -q -x tests/python/test_torch_attention.py -k 'block or mask or sparse' \
  >"$log/pytest.log" 2>&1
stamp "rc=$?"
tail -2 "$log/pytest.log"
[ "$(left)" -gt 100 ] && SAN_EACH=45 sanitize "$bin" 'AttentionGpuBlockSparse.BroadcastAndEmptyRowsAndColumns:AttentionGpuBlockSparse.WalksPastOneBallot'
for d in 128 64; do
  stamp "variants.py block-sparse hdim $d ($(left) s left)"
  [ "$(left)" -gt 40 ] || break
  timeout $(( $(left) / (d == 128 ? 2 : 1) - 5 )) python3 bench/variants.py --out "$out" --hdim $d \
    --protocol sustained --variants blocksparse_0.5,blocksparse_0.25,blocksparse_0.1 >"$log/var$d.log" 2>&1
  stamp "rc=$?"
  tail -12 "$log/var$d.log"
done
(cd "$out" && tar czf logs.tgz t)
