#!/bin/bash
# Session 39's calls: the Hopper backward at hdim 256 with window, ALiBi and softcap.
# PHASE=tests: the attention gtests of the carried test binary (build-dev/flashkit_gpu_tests, a
# minimal build of the change), memcheck and racecheck on AttentionGpuSmall.Sm90AndSm80PathsVariants
# (hdim 256 window / ALiBi / softcap backward included), the torch attention tests.
# PHASE=bench: bench/variants.py at hdim 256 (softcap, ALiBi, window; forward and backward,
# sustained protocol), then bench/softcap_ab.py at hdim 128 / 64 with the build without the
# bounded branch's dead alpha stores (.ab/var-na.so) beside the change's extension.
# Everything carried comes in .ab/lib.txz (the test binary, python/flashkit/_C*.so, .ab/var-na.so).
# PHASE=v2: see its branch below.
# usage: OUT=/some/dir PHASE=tests|bench|v2 [GTEST_FILTER=..] bench/gpu-s39.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$log/gpu.txt"
python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall()" .ab/lib.txz
bin=build-dev/flashkit_gpu_tests
# The carried binary's gtests on filter $1 ($2 seconds at most), then memcheck and racecheck on
# the small variant cases (hdim 256's Hopper backward among them).
gtests_and_sanitizers() {
  stamp "attention gtests"
  timeout "$2" $bin --gtest_filter="$1" >"$log/gtests.log" 2>&1
  stamp "rc=$?"
  grep -E "^\[  FAILED|^\[  PASSED|tests ran|Failure" "$log/gtests.log" | head -20
  SAN_EACH=${SAN_EACH:-110} sanitize $bin "${SAN_FILTER:-AttentionGpuSmall.Sm90AndSm80PathsVariants}"
}
if [ "${PHASE:-tests}" = v2 ]; then
  # v2 (one branch per tile in the hdim 256 kernels; or AB_NEW's name): its tests and sanitizers,
  # then bench/variants.py at hdim 256 (VARS, default softcap,alibi,window) with it (python/flashkit,
  # carried) and AB_OLD (default v1: .ab/var-v1.so, the build of calls 1-3) in turn, two rounds,
  # and its kernel times.
  gtests_and_sanitizers 'AttentionGpuSm90.VariantsBothPaths:AttentionGpuSm90.VarlenVariantsBothPaths:AttentionGpuSm90.VariantsDeterministicBothPaths:AttentionGpuSm90.BothPathsMatchReference:AttentionGpuSmall.Sm90AndSm80PathsVariants:AttentionGpuSmall.Sm90AndSm80VarlenVariants' 200
  ext=$(ls python/flashkit/_C*.so)
  cp "$ext" /tmp/v2.so
  for round in 1 2; do
    for v in ${AB_NEW:-v2} ${AB_OLD:-v1}; do
      if [ $v = "${AB_NEW:-v2}" ]; then cp /tmp/v2.so "$ext"; else cp ".ab/var-$v.so" "$ext"; fi
      stamp "variants hdim 256, $v, round $round"
      timeout 120 python3 bench/variants.py --out "$out/$v-r$round" --hdim 256 --heads 16 \
        --protocol sustained --variants "${VARS:-softcap,alibi,window}" >"$log/var256-$v-r$round.log" 2>&1
      stamp "rc=$?"
      tail -8 "$log/var256-$v-r$round.log"
    done
  done
  cp /tmp/v2.so "$ext"
  export PYTHONPATH=bench:$PYTHONPATH
  for opt in ${BD_OPTS:-"--softcap 30" "--alibi" "--window 1024,1024"}; do
    stamp "breakdown hdim 256 $opt (${AB_NEW:-v2})"
    # shellcheck disable=SC2086
    bd --hdim 256 $opt | tee -a "$out/breakdown-d256-v2.txt" | grep -E "Bwd"
  done
elif [ "${PHASE:-tests}" = tests ]; then
  gtests_and_sanitizers "${GTEST_FILTER:-AttentionGpu.*:AttentionGpuSm90.*:AttentionGpu/AttentionGpuVariants.*:AttentionGpuVariantsShapes.*:AttentionGpuSmall.*}" 280
  stamp "torch attention tests"
  timeout 100 python3 -m pytest -q -x tests/python/test_torch_attention.py >"$log/pytest.log" 2>&1
  stamp "rc=$?"
  tail -3 "$log/pytest.log"
else
  stamp "variants, hdim 256, sustained"
  timeout 300 python3 bench/variants.py --out "$out" --hdim 256 --heads 16 --protocol sustained \
    --variants softcap,alibi,window >"$log/var256.log" 2>&1
  stamp "rc=$?"
  tail -9 "$log/var256.log"
  mkdir -p /tmp/pkg_na && cp .ab/var-na.so /tmp/pkg_na/_C.cpython-312-x86_64-linux-gnu.so
  stamp "bench/softcap_ab.py ($(left) s left)"
  FLASHKIT_AB_EXTS="na=/tmp/pkg_na" FLASHKIT_BASE_EXT_DIR= timeout $(( $(left) - 15 )) \
    python3 bench/softcap_ab.py --out "$out" --hdims 128,64 --caps 50 --rounds 3 >"$log/bench.log" 2>&1
  stamp "rc=$?"
  cat "$log/bench.log"
fi
(cd "$out" && tar czf logs.tgz t)
