#!/bin/bash
# Session 40's calls (PHASE=harness | breakdown | phases | f16, each described below). The
# harness binaries: .ab/d256t (bench/sm90_bwd_ab.cu -DAB_HDIM=256 -DFK_BWD_TRACE: the per-CTA
# trace of cta_trace.h) and .ab/d256 (without it), built by bench/sm90_fwd_ab.sh.
# usage: OUT=/some/dir PHASE=harness bench/gpu-s40.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$log/gpu.txt"
# One harness run: binary $1 named $2 with FLASHKIT_GROUP_SMALL_FIRST=$3 ($4 seconds at most).
harness_run() {
  stamp "$2, small_first=$3"
  FLASHKIT_GROUP_SMALL_FIRST=$3 timeout "$4" "$1" "$2-k$3" 2048 4096 8192 16384 >"$log/$2-k$3.txt" 2>&1
  stamp "rc=$?"
}
# PHASE=harness (call 1; the knob's code was reverted after it, so both settings now run the
# same order): two traced rounds and one untraced, then the sanitizers on the reference checks.
if [ "${PHASE:-harness}" = harness ]; then
  for round in 1 2; do
    for knob in 0 1; do harness_run .ab/d256t "h-r$round" $knob 150; done
  done
  for knob in 0 1; do harness_run .ab/d256 nt $knob 100; done
  for tool in memcheck racecheck; do
    stamp "$tool ($(left) s left)"
    FLASHKIT_GROUP_SMALL_FIRST=1 timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 \
      .ab/d256t san 0 >"$log/$tool.log" 2>&1
    stamp "rc=$?"
    grep -E "SUMMARY|FAILED" "$log/$tool.log" | head -3
  done
  grep -h "check" "$log"/h-r1-k1.txt | head -8
  echo "== timing (variant d s ms TFLOP/s)"
  grep -hE "^(h-r[12]|nt)-k[01] " "$log"/h-*.txt "$log"/nt-*.txt | sort -k3,3 -k4,4 -k1,1
  echo "== traces"
  grep -h "^trace" "$log"/h-r1-k0.txt "$log"/h-r1-k1.txt | grep causal
  grep -h "^trace" "$log"/h-r1-k0.txt | grep full
fi
# PHASE=breakdown: per-kernel times (torch.profiler, bench/kernel_breakdown.py) of the carried
# build's forward + backward at 8k, hdim 128 and 64: plain, a block mask of all ones, 0.1.
if [ "${PHASE:-}" = breakdown ]; then
  python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall()" .ab/lib.txz
  for d in 128 64; do
    for args in "" "--density 1.0" "--density 0.1" "--density 0.25"; do
      stamp "d$d $args"
      timeout 60 python3 bench/kernel_breakdown.py --backend flashkit --hdim $d --seqlen 8192 $args \
        --calls 10 2>&1 | tail -14
    done
  done
fi
# PHASE=phases: the traced harness again (its column kernel's phases), causal and dense, 2k-16k.
# PHASES_BINS: the traced binaries to run in turn (default .ab/d256t).
if [ "${PHASE:-}" = phases ]; then
  for b in ${PHASES_BINS:-d256t}; do
    timeout 150 .ab/$b "phases-$b" 2048 4096 8192 16384 >"$log/phases-$b.txt" 2>&1
    stamp "$b rc=$?"
    grep -E "FAILED|^phases|^epilogue|^trace" "$log/phases-$b.txt" | sed "s/^/$b /"
  done
fi
# PHASE=f16: the minimal-f16 test binary (.ab/f16.txz: build-dev/flashkit_gpu_tests linked with
# the f16 twins): build info, every attention gtest, then compute-sanitizer on the f16 both-paths
# test and the hdim 256 f16 variants.
if [ "${PHASE:-}" = f16 ]; then
  python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall()" .ab/f16.txz
  bin=build-dev/flashkit_gpu_tests_f16
  stamp "attention gtests"
  timeout 330 $bin --gtest_filter='Attention*' >"$log/tests.log" 2>&1
  stamp "rc=$?"
  grep -E "^\[  FAILED|^\[  PASSED|tests ran|SKIPPED \]|Failure|Expected|Which is|differ" "$log/tests.log" | head -40
  grep -E "^\[       OK" "$log/tests.log" | awk '{print $4, $5, $6}' | tr '\n' ' '; echo
  SAN_EACH=${SAN_EACH:-60} sanitize $bin 'AttentionGpuSm90.Fp16BothPaths'
fi
# PHASE=stsm: the backward epilogues by stmatrix (.ab/d256s, .ab/d128s) against HEAD before it
# (.ab/d256, .ab/d128), two interleaved rounds, then the sanitizers on the new binaries' checks.
if [ "${PHASE:-}" = stsm ]; then
  for round in 1 2; do
    for b in d256 d256s d128 d128s; do
      stamp "$b round $round"
      timeout 100 .ab/$b "$b" 2048 4096 8192 16384 >"$log/$b-r$round.txt" 2>&1
      stamp "rc=$?"
    done
  done
  for b in d256s d128s; do
    for tool in memcheck racecheck; do
      stamp "$b $tool"
      timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 .ab/$b san 0 >"$log/$b-$tool.log" 2>&1
      stamp "rc=$?"
      grep -E "SUMMARY|FAILED" "$log/$b-$tool.log" | head -2
    done
  done
  grep -h "check" "$log"/d256s-r1.txt "$log"/d128s-r1.txt | grep -c " ok"
  grep -h "FAILED" "$log"/*-r*.txt
  echo "== variant d mask s ms TFLOP/s (rounds 1, 2)"
  grep -hE "^d(256|128)s? d" "$log"/d*-r[12].txt | sort -k2,2 -k3,3 -k4,4 -k1,1
fi
# PHASE=d256bench: issue 8's hdim 256 cells (bench/attention.py flashkit against cuDNN, 2k-16k,
# causal and not, sustained protocol) with the extension in .ab/ext.txz (the stmatrix epilogues).
if [ "${PHASE:-}" = d256bench ]; then
  python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall()" .ab/ext.txz
  stamp "bench/attention.py hdim 256, sustained"
  timeout 300 python3 bench/attention.py --out "$out" --methods flashkit,cudnn --no-memory \
    --hdims 256 --seqlens ${SEQLENS:-4096,8192} --protocol sustained --name attention-d256-s40-stsm \
    >"$log/attn.log" 2>&1
  stamp "rc=$?"
  tail -30 "$log/attn.log"
fi
# PHASE=san: compute-sanitizer with the minimal-f16 test binary (its hdim 256 backward objects
# carry the stmatrix epilogues) on the small both-path variant tests (bf16 hdim 256 included).
if [ "${PHASE:-}" = san ]; then
  python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall()" .ab/f16.txz
  SAN_EACH=${SAN_EACH:-150} sanitize build-dev/flashkit_gpu_tests_f16 \
    'AttentionGpuSmall.Sm90AndSm80PathsVariants:AttentionGpuSmall.Sm90AndSm80VarlenVariants'
  grep -hE "^\[       OK|SKIPPED \]" "$log/memcheck.log" | head -4
fi
