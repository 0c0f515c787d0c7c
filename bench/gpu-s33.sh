#!/usr/bin/env bash
# Session 33's GPU calls (bench/NOTES-decode.md "Session 33"). The library comes built in
# .ab/lib.tgz (build-dev/flashkit_gpu_tests, python/flashkit/_C*.so, .ab/var-*.so variants).
# PARTS (any of, in order):
#   hm     bench/decode.py's full sweep with --headmajor: flashkit on [b, ctx, h, d] (the sweep's
#          layout) and on [b, h, ctx, d] (the layout the torch peers read), cuDNN on both
#   focus  bench/decode.py on SHAPES with VARIANTS columns (SKIP: columns left out)
#   ab     extensions in turn (ab_rounds; VARS, variants as .ab/var-<name>.so), each timed by
#          bench/decode.py on SHAPES with VARIANTS columns; a table of every column last
#   dec    the decode GPU tests (each of LOADERS), sanitizers on the small ones, torch decode tests
#   bstest the attention tests of BS_FILTER with .ab/tests-$BS_VAR, sanitizers on BS_SAN_FILTER
#   bsab   bench/variants.py (VARIANTS_ARGS) with each extension of VARS (ab_rounds)
#   ncu3   Nsight Compute of the sm80-class backward against FA2's (issue 3), NCU_HDIM, NCU_SEQ
#   attab  bench/attention.py (ATT_ARGS) with each extension of VARS (ab_rounds)
#   final  the committed library: attention tests (default and sm80 forced), sanitizers, torch
#          tests, bench/attention.py flashkit-sm80 against flash
#   harness  harness_rounds of the A/B harness binaries in VARIANTS (SEQ), their checks, a table
# usage: OUT=/some/dir PARTS="hm focus" bench/gpu-s33.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
gpu_and_carried
for part in ${PARTS:?set PARTS}; do
  case "$part" in
  hm)
    stamp "bench/decode.py sweep --headmajor ($(left) s left)"
    timeout $(( $(left) - 5 )) python3 bench/decode.py --out "$out" --headmajor --budget $(( $(left) - 30 )) \
      >"$log/sweep-hm.log" 2>&1
    stamp "rc=$?"
    grep -E "^d(64|128) " "$log/sweep-hm.log" | cut -c1-420
    ;;
  focus)
    stamp "bench/decode.py focus ($(left) s left)"
    timeout $(( $(left) - 5 )) python3 bench/decode.py --out "$log/focus" --shapes $SHAPES \
      --skip "${SKIP:-}" --variants "${VARIANTS:-}" >"$log/focus.log" 2>&1
    stamp "rc=$?"
    for f in "$log"/focus/*.json; do cp "$f" "$out/focus-$(basename "$f")"; done 2>/dev/null
    grep -E "^d(64|128|256) " "$log/focus.log" | cut -c1-600
    ;;
  ab)
    decode_ab ${VARS:?}
    ;;
  dec)
    decode_tests_each_loader
    ;;
  bstest)
    # The attention tests of BS_FILTER with the variant test binary .ab/tests-$BS_VAR, then
    # memcheck and racecheck on BS_SAN_FILTER.
    stamp "tests $BS_VAR ($(left) s left)"
    timeout 240 ".ab/tests-$BS_VAR" --gtest_filter="$BS_FILTER" >"$log/bstest.log" 2>&1
    stamp "rc=$?"
    grep -E "^\[  FAILED|^\[  PASSED|tests ran|Failure" "$log/bstest.log" | tail -12
    sanitize ".ab/tests-$BS_VAR" "$BS_SAN_FILTER"
    ;;
  harness)
    # The A/B harness binaries .ab/$v of VARIANTS (bench/sm90_*_ab.cu builds), SEQ's lengths, two
    # interleaved rounds; each binary's checks once, then every timing line.
    harness_rounds
    for v in $VARIANTS; do grep -h "check" "$log/ab-$v.txt" | sort -u | awk -v v=$v '{print v": "$0}' | head -6; done
    for v in $VARIANTS; do grep -hv "check" "$log/ab-$v.txt"; done | tee "$out/harness-table.txt"
    ;;
  ncu3)
    # Nsight Compute (--set full) of the sm80-class backward (FLASHKIT_ATTENTION_PATH=sm80) and
    # FA2's (SDPA flash) main backward kernels, hdim NCU_HDIM (64), seqlen NCU_SEQ (8192), one
    # process; the details of both, and the headline rows side by side.
    stamp "ncu sm80 bwd vs FA2 ($(left) s left)"
    FLASHKIT_ATTENTION_PATH=sm80 timeout 400 ncu --set full --import-source no --kernel-name-base demangled -k 'regex:BwdKernel|flash_bwd_dq_dk_dv' \
      -o "$log/bwd3" python3 bench/profile_attention.py --flash --seqlen "${NCU_SEQ:-8192}" "${NCU_HDIM:-64}" \
      >"$log/ncu3.log" 2>&1
    stamp "rc=$?"
    tail -3 "$log/ncu3.log"
    ncu -i "$log/bwd3.ncu-rep" --page details >"$out/ncu3-details.txt" 2>&1
    ncu -i "$log/bwd3.ncu-rep" --page raw --csv >"$log/ncu3-raw.csv" 2>&1
    gzip -c "$log/ncu3-raw.csv" >"$out/ncu3-raw.csv.gz"
    grep -E "^  [a-z_].*Context|Duration|Executed Ipc A|Issue Slots Busy|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Shared Memory|Bank|L1/TEX Hit|L2 Hit|Executed Instructions  |Local|Stall|DRAM Throughput|Compute \(SM\)" \
      "$out/ncu3-details.txt" | cut -c1-150 | head -80
    ;;
  attab)
    # bench/attention.py (ATT_ARGS) with each extension of VARS in turn (ab_rounds, ROUNDS); the
    # backward lines of each run last.
    ab_attention() {
      timeout 200 python3 bench/attention.py --out "$log/r$1-$2" ${ATT_ARGS:?}
    }
    ab_rounds ab_attention ${VARS:?}
    for f in "$log"/r*-*.log; do echo "== $(basename "$f" .log)"; grep -E "^d[0-9]|worst|^ *d[0-9]" "$f" | tail -14; done \
      | tee "$out/attab-table.txt"
    ;;
  final)
    # The committed library (.ab/lib.tgz): the attention gtests with the default path and with the
    # sm80-class path forced (fp8 excluded there), sanitizers on small sm80 cases, the torch
    # attention tests, then issue 3's comparison (flashkit-sm80 against FA2, hdim 64 / 128, 2k-16k).
    sm80_final attention-sm80-s33 'AttentionGpuSmall.DenseCausalGqa:AttentionGpuSmall.Sm90AndSm80Paths' "64,128"
    ;;
  bsab)
    # bench/variants.py (VARIANTS_ARGS) with each extension of VARS in turn (base: main's), ROUNDS.
    ab_variants() {
      timeout 150 python3 bench/variants.py --out "$log/r$1-$2" ${VARIANTS_ARGS:?}
    }
    ab_rounds ab_variants ${VARS:?}
    for f in "$log"/r*-*/variants*.json; do
      python3 - "$f" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(sys.argv[1].split("/")[-2], " ".join(
    f"{r['variant']}{'c' if r['causal'] else ''}={r.get('fwd_ms', 0) * 1e3:.1f}us"
    + (f"({r['fwd_time_over_density_x_dense']:.2f}x)" if 'fwd_time_over_density_x_dense' in r else "")
    for r in d["rows"]))
PY
    done | tee "$out/bsab-table.txt"
    ;;
  *) echo "unknown part $part" ;;
  esac
done
stamp "done"
