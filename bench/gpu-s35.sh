#!/bin/bash
# Session 35's device calls (one script, parts chosen by PARTS; each prints a short table last):
#   ab     extensions .ab/var-<v>.so of ABVARS (base = main's) in turn, ROUNDS times: the sm80-class
#          backward against FA2 in each process (bench/sm80_bwd_knobs.py, KARGS), and in the
#          first round the float64 checks with the sm80 path forced (CHECK: "hdim<list>" runs
#          bench/check_hdim.py on the head dims of the list, else the torch attention tests
#          without fp8; "none": no check); KNOBS: sm80_bwd_knobs.py's knob sets (default "base=")
#   ab2    the same with ABVARS2, KARGS2, CHECK2 (a second set in one call)
#   prof   Nsight Compute source counters of the sm80-class kernels and FA2's with extension
#          .ab/var-$PROF_VAR.so (gpu_prelude.sh's sm80_prof: hdims PROF_HDIMS, PROF_SEQ, PROF_K, ...)
#   d256   hdim 256 on the sm80-class path with the test build .ab/var-$D256VAR.so
#   san256 memcheck / racecheck of .ab/var-$D256VAR.so's hdim 256 kernels (bench/check_hdim.py 256)
#   final  the committed library: attention tests (default and sm80 forced), sanitizers, torch
#          tests, bench/attention.py flashkit-sm80 against flash (FINAL_HDIMS)
# usage: OUT=/some/dir PARTS="ab prof" ABVARS="base o1" bench/gpu-s35.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
gpu_and_carried
for f in .ab/*.txz; do [ -f "$f" ] && python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall()" "$f"; done
so=$(ls python/flashkit/_C*.so); cp "$so" /tmp/base_C.so
ab_one() {
  local check=${CHECK:-}
  if [ "$1" = 1 ] && [ "$check" != none ]; then
    if [ "$check" != "${check#hdim}" ]; then  # hdim256, hdim128,64: bench/check_hdim.py
      FLASHKIT_ATTENTION_PATH=sm80 PYTHONPATH=$PYTHONPATH:tests/python timeout 120 python3 bench/check_hdim.py ${check#hdim}
    else
      FLASHKIT_ATTENTION_PATH=sm80 timeout 150 python3 -m pytest -q -x -k "not fp8" tests/python/test_torch_attention.py | tail -2
    fi
  fi
  PYTHONPATH=bench:$PYTHONPATH timeout 240 python3 bench/sm80_bwd_knobs.py --knobs "${KNOBS:-base=}" --rounds 1 ${KARGS:-}
}
for part in ${PARTS:?set PARTS}; do
  case "$part" in
  ab | ab2)
    # ab2: a second set in the same call (ABVARS2, KARGS2, CHECK2), its logs in $log/ab2
    if [ "$part" = ab2 ]; then
      ABVARS=${ABVARS2:?} KARGS=${KARGS2:-} CHECK=${CHECK2:-}; log0=$log; log=$log/ab2; mkdir -p "$log"
    fi
    ab_rounds ab_one ${ABVARS:?}
    for v in ${ABVARS}; do grep -hE "within|passed|failed|Error" "$log"/r1-$v.log | sed "s/^/$v: /" | head -4; done
    python3 bench/knob_ratio_table.py "$log"/r*-*.log | tee -a "$out/ab-table.txt"
    [ "$part" = ab2 ] && log=$log0
    ;;
  prof)
    [ -n "${PROF_VAR:-}" ] && cp ".ab/var-$PROF_VAR.so" "$so"
    sm80_prof "${PROF_HDIMS:-256}"
    cp /tmp/base_C.so "$so"
    ;;
  d256)
    # With .ab/var-$D256VAR.so (the library plus the sm80-class hdim 256 plain kernels, which
    # minimal builds leave out, and a dispatch that routes plain hdim 256 to them when sm80 is
    # forced): the float64 checks, then bench/attention.py flashkit-sm80 against flash at hdim 256.
    cp ".ab/var-${D256VAR:?}.so" "$so"
    sm80_d256 "${D256NAME:-attention-sm80-d256-s35}"
    cp /tmp/base_C.so "$so"
    ;;
  san256)
    # memcheck and racecheck of the sm80-class hdim 256 kernels (.ab/var-$D256VAR.so) on
    # bench/check_hdim.py's small shapes (200 x 170, GQA 2:1, causal and not), sm80 forced; only
    # flashkit's kernels are instrumented.
    cp ".ab/var-${D256VAR:?}.so" "$so"
    for tool in memcheck racecheck; do
      stamp "$tool, hdim 256 sm80 ($(left) s left)"
      FLASHKIT_ATTENTION_PATH=sm80 PYTHONPATH=$PYTHONPATH:tests/python timeout 150 compute-sanitizer --tool $tool \
        --kernel-name kns=flashkit --error-exitcode 9 python3 bench/check_hdim.py 256 >"$log/san256-$tool.log" 2>&1
      stamp "rc=$?"; grep -E "SUMMARY|within|rror" "$log/san256-$tool.log" | head -4
    done
    cp /tmp/base_C.so "$so"
    ;;
  final)
    sm80_final attention-sm80-s35 "${FINAL_SAN:-AttentionGpuSmall.DenseCausalGqa:AttentionGpuSmall.Sm90AndSm80Paths:AttentionGpuSmall.Sm80BackwardBulkReduce}" "${FINAL_HDIMS:-64,128}"
    ;;
  *) echo "unknown part $part" ;;
  esac
done
(cd "$out" && tar czf logs.tgz t && rm -rf t)
