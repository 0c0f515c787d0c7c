#!/usr/bin/env bash
# Session 30: FP8 v3 (row sums on the tensor cores, f16x2 exponentials; bench/NOTES-attention.md).
# PART=ab: A/B of the fp8 forward harness binaries (bench/sm90_fp8_ab.cu, built on the CPU machine
# into .ab/ by bench/sm90_fwd_ab.sh), rounds interleaved, checks printed once per binary,
# compute-sanitizer on $SAN's checks, SASS instruction counts of the dense hdim 128 kernels.
# PART=lib: the carried library (.ab/lib.tgz): Hopper / fp8 gtests, sanitizers on the small fp8
# tests, python fp8 tests, then bench/attention.py --protocol sustained (flashkit, cuDNN, fp8).
# PART=gaps: the carried library's package: bench/bwd_gaps.py (kernels, span and event time of a
# backward under load), flashkit and cuDNN, hdim $HDIM (256) causal and dense at $SEQLENS.
# (Calls 4-5, the softcap A/B, ran from branch s30-softcap-exp, where bench/softcap_ab.py lives.)
# PART=l2: the carried library: Hopper gtests, then bench/l2_group_ab.py (hdim 256 causal).
# usage: OUT=/some/dir PART=ab VARIANTS="a b" [SEQ="4096 8192 16384"] [SAN=name] bench/gpu-s30.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
# The carried library (.ab/lib.tgz) unpacked, its package on PYTHONPATH, bin = its gtest binary.
lib_setup() {
  tar xzf .ab/lib.tgz
  export PYTHONPATH=python:bench:$PYTHONPATH
  carried_library
}
case ${PART:-ab} in
ab)
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$log/gpu.txt"
  harness_rounds
  for v in $VARIANTS; do grep -h "check" "$log/ab-$v.txt" | sort -u | awk -v v=$v '{print v": "$0}'; done
  for v in ${SASS:-}; do
    cuobjdump -sass ".ab/$v" >"$log/sass-$v.txt" 2>&1
    for op in HGMMA QGMMA MUFU.EX2 FADD FMNMX FFMA FMUL F2FP PRMT HADD2; do
      printf "%s %s %s\n" "$v" "$op" "$(grep -c "$op" "$log/sass-$v.txt")"
    done
  done
  [ -n "${SAN:-}" ] && harness_sanitize "$SAN"
  echo "variant d causal s fp8_ms fp8_tflops bf16_tflops ratio transpose_us" >"$log/table.txt"
  grep -hE "^[a-z0-9_]+ d[0-9]+ (full|causal)" "$log"/ab-*.txt | sort -k2,2 -k3,3 -k4,4V -k1,1 >>"$log/table.txt"
  cat "$log/table.txt"
  cp "$log/table.txt" "$out/table.txt"
  ;;
lib)
  lib_setup
  gtest hopper 'AttentionGpuSm90*:AttentionGpuSmall.*:AttentionGpuFp8*:AttentionGpuBlockSparse*' 200
  grep -E "tests ran|PASSED|FAILED" "$log/hopper.log" | tail -3
  SAN_EACH=80 sanitize "$bin" "${SANF:-AttentionGpuSmall.Fp8*}"
  stamp "python fp8 tests"
  timeout 120 python3 -m pytest -q tests/python -k fp8 >"$log/pyfp8.log" 2>&1
  stamp "rc=$?"; tail -2 "$log/pyfp8.log"
  stamp "bench/attention.py sustained ($(left) s left)"
  timeout "$(( $(left) - 15 ))" python3 bench/attention.py --out "$out" --protocol sustained --fwd-only \
    --methods flashkit,cudnn,flashkit-fp8 --hdims ${HDIMS:-128,256} --seqlens ${SEQLENS:-4096,8192,16384} \
    --name "${NAME:-s30-fp8}" >"$log/attn.log" 2>&1
  stamp "rc=$?"
  tail -30 "$log/attn.log"
  ;;
l2)
  lib_setup
  [ -n "${SKIP_TESTS:-}" ] || gtest sm90 'AttentionGpuSm90*:AttentionGpuSmall.Sm90*' 200
  stamp "l2_group_ab"
  # shellcheck disable=SC2086
  timeout 420 python3 bench/l2_group_ab.py ${L2ARGS:---hdims 256 --seqlens 4096,8192,16384 --budgets 8,32,64,128} \
    --out "$out/l2_group_ab.json" >"$log/l2.txt" 2>&1
  stamp "rc=$?"
  cat "$log/l2.txt"
  ;;
gaps)
  lib_setup
  stamp "bwd_gaps"
  timeout 400 python3 bench/bwd_gaps.py --methods flashkit,cudnn --hdim "${HDIM:-256}" --causal --dense \
    --seqlens "${SEQLENS:-2048,4096,8192,16384}" >"$log/gaps.txt" 2>&1
  stamp "rc=$?"
  cat "$log/gaps.txt"
  cp "$log/gaps.txt" "$out/gaps.txt"
  ;;
esac
(cd "$out" && tar czf logs.tgz t && rm -rf t)
