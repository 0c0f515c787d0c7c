#!/usr/bin/env bash
# Session 17: variants v3 (softcap on tanh.approx, Philox4x32-7, ALiBi's row part in the sm90
# softmax; bench/NOTES-attention.md "Variants v3"). The test binary and the new extension come
# built from the CPU machine in .ab/lib.tgz (bench/gpu-library.sh's way); .ab/base_so.tgz holds
# the extension of the commit before (session 16's build) for a same-call A/B.
# PART=tests: the variant / dropout / Hopper / small attention tests, the torch attention tests,
#   memcheck + racecheck on the small variant tests.
# PART=bench: bench/variants.py (softcap, ALiBi, dropout + plain) base / new / base / new, then
#   the full variants sweep on the new build.
# usage: OUT=/some/dir PART=tests|bench bench/gpu-s17.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
tar xzf .ab/lib.tgz
bin=build-dev/flashkit_gpu_tests
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$log/gpu.txt"
if [ "${PART:-tests}" = tests ]; then
  library_tests "$bin" 'AttentionGpuSm90*:AttentionGpuSmall.*:AttentionGpuFp8*:*AttentionGpuVariants*:AttentionGpuDropout*:AttentionGpuBlockSparse*' 300
  SAN_EACH=${SAN_EACH:-70} sanitize "$bin" 'AttentionGpuSmall.Sm90AndSm80PathsVariants'
else
  mkdir -p /tmp/basepkg && cp -r python/flashkit /tmp/basepkg/ && tar xzf .ab/base_so.tgz -C /tmp/basepkg/flashkit
  for round in 1 2; do
    for which in base new; do
      pp=python; [ $which = base ] && pp=/tmp/basepkg
      stamp "variants $which round $round"
      PYTHONPATH=$pp:bench timeout 150 python3 bench/variants.py --variants "${VARIANTS:-softcap,alibi,dropout}" \
        --out "$out/$which$round" >"$log/var-$which$round.log" 2>&1
      stamp "rc=$?"
      tail -9 "$log/var-$which$round.log"
    done
  done
  stamp "full variants sweep, new ($(left) s left)"
  timeout $(( $(left) - 5 )) python3 bench/variants.py --out "$out" >"$log/var-full.log" 2>&1
  stamp "rc=$?"
  tail -18 "$log/var-full.log"
fi
(cd "$out" && tar czf logs.tgz t && rm -rf t)
