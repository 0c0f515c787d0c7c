#!/bin/bash
# Session 34's device calls (one script, parts chosen by PARTS; each prints a short table last):
#   knobs  bench/sm80_bwd_knobs.py with .ab/var-$KVAR.so (KNOBS, KARGS), then the torch attention
#          tests with that extension under each knob set of KTESTS (sm80 path forced)
#   prof   Nsight Compute source counters of the sm80-class backward and FA2's (hdim PROF_HDIMS,
#          seqlen PROF_SEQ (8k), causal when PROF_CAUSAL is set): per-SASS-instruction samples into
#          $out/prof-d<h>-sass.csv.gz
#   vtest  a variant's gtest binary (.ab/tests-$VT) with sm80 forced, sanitizers on VT_SAN
#   prof90 Nsight Compute source counters of the Hopper forward's variants (PROF_VARIANTS)
#   d256   bench/attention.py flashkit-sm80 against flash at hdim 256 (main's extension)
#   final  the committed library: attention tests (default and sm80 forced), sanitizers, torch
#          tests, bench/attention.py flashkit-sm80 against flash (FINAL_HDIMS)
# usage: OUT=/some/dir PARTS="knobs prof" bench/gpu-s34.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
gpu_and_carried
# .ab/*.txz: the carried extension(s) and binaries, xz-packed (near-identical variants share bytes).
for f in .ab/*.txz; do [ -f "$f" ] && python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall()" "$f"; done
so=$(ls python/flashkit/_C*.so); cp "$so" "$log/base_C.so"
for part in ${PARTS:?set PARTS}; do
  case "$part" in
  knobs)
    cp ".ab/var-${KVAR:?}.so" "$so"
    stamp "sm80 bwd knobs ($(left) s left)"
    PYTHONPATH=bench:$PYTHONPATH timeout 300 python3 bench/sm80_bwd_knobs.py --knobs "${KNOBS:?}" ${KARGS:-} \
      >"$log/knobs.log" 2>&1
    stamp "rc=$?"; cp "$log/knobs.log" "$out/knobs.txt"
    for kv in ${KTESTS:-}; do
      stamp "torch attention tests, sm80, $kv"
      env FLASHKIT_ATTENTION_PATH=sm80 ${kv//,/ } timeout 150 python3 -m pytest -q -x tests/python/test_torch_attention.py \
        >"$log/pytest-$kv.log" 2>&1
      stamp "rc=$?"; tail -1 "$log/pytest-$kv.log"
    done
    cp "$log/base_C.so" "$so"
    cat "$out/knobs.txt" | grep -E '^d[0-9]'
    ;;
  la)
    # Each extension .ab/var-<v>.so of LAVARS in turn: bench/sm80_bwd_knobs.py (KNOBS, KARGS) and
    # the torch attention tests with the sm80 path forced (fp8 excluded: it refuses that path).
    for v in ${LAVARS:?}; do
      cp ".ab/var-$v.so" "$so"
      stamp "$v: sm80 bwd knobs ($(left) s left)"
      PYTHONPATH=bench:$PYTHONPATH timeout 200 python3 bench/sm80_bwd_knobs.py --knobs "${KNOBS:?}" ${KARGS:-} \
        >"$log/la-$v.log" 2>&1
      stamp "rc=$?"; sed "s/^/$v /" "$log/la-$v.log" >>"$out/la.txt"
      stamp "$v: torch attention tests, sm80"
      env FLASHKIT_ATTENTION_PATH=sm80 ${KTEST_ENV:-} timeout 150 python3 -m pytest -q -x -k "${PYTEST_K:-not fp8}" \
        tests/python/test_torch_attention.py >"$log/pytest-$v.log" 2>&1
      stamp "rc=$?"; tail -1 "$log/pytest-$v.log"
    done
    cp "$log/base_C.so" "$so"
    grep -E '^[a-z0-9]+ d[0-9]' "$out/la.txt"
    ;;
  vtest)
    # The variant's gtest binary .ab/tests-$VT (linked with its archive): the attention gtests
    # with the sm80-class path forced (fp8 excluded), then memcheck / racecheck on VT_SAN.
    stamp "tests-$VT, sm80 forced ($(left) s left)"
    FLASHKIT_ATTENTION_PATH=sm80 timeout 150 ".ab/tests-$VT" \
      --gtest_filter='AttentionGpu.*:AttentionGpuSmall.*:*Deterministic*:-*Fp8*' >"$log/vtest.log" 2>&1
    stamp "rc=$?"; grep -E "^\[  FAILED|^\[  PASSED|Failure" "$log/vtest.log" | tail -6
    FLASHKIT_ATTENTION_PATH=sm80 sanitize ".ab/tests-$VT" "${VT_SAN:-AttentionGpuSmall.DenseCausalGqa}"
    ;;
  prof)
    sm80_prof "${PROF_HDIMS:-64 128}"
    ;;
  prof90)
    # Nsight Compute source counters of the Hopper forward, plain beside PROF_VARIANTS (hdim 128,
    # b2 h16 s8k, dense): per-SASS-instruction samples into $out/prof90-sass.csv.gz.
    stamp "ncu source counters, sm90 forward variants ($(left) s left)"
    timeout 240 ncu --section SourceCounters --section WarpStateStats --section InstructionStats \
      --import-source no --kernel-name-base demangled -k 'regex:sm90::Fwd' -o "$log/prof90" \
      python3 bench/profile_variants.py ${PROF_VARIANTS:-plain softcap window} >"$log/prof90.log" 2>&1
    stamp "rc=$?"; tail -2 "$log/prof90.log"
    ncu -i "$log/prof90.ncu-rep" --page details >"$out/prof90-details.txt" 2>&1
    ncu -i "$log/prof90.ncu-rep" --page source --csv --print-source sass | gzip -c >"$out/prof90-sass.csv.gz"
    grep -E "Duration|Warp Cycles Per Issued|Executed Instructions  " "$out/prof90-details.txt" | head -12
    ;;
  d256)
    # With .ab/var-d256.so (main plus the sm80-class hdim 256 plain kernels, which minimal builds
    # leave out) in place of the extension when it is carried.
    [ -f .ab/var-d256.so ] && cp .ab/var-d256.so "$so"
    sm80_d256 attention-sm80-d256-s34
    cp "$log/base_C.so" "$so"
    ;;
  final)
    sm80_final attention-sm80-s34 'AttentionGpuSmall.DenseCausalGqa:AttentionGpuSmall.Sm90AndSm80Paths:AttentionGpuSmall.Sm80BackwardBulkReduce' "${FINAL_HDIMS:-64,128}"
    ;;
  *) echo "unknown part $part" ;;
  esac
done
(cd "$out" && tar czf logs.tgz t && rm -rf t)
