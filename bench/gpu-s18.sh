#!/usr/bin/env bash
# Session 18's GPU calls (bench/NOTES-decode.md "d64 against cuDNN"). The library comes built from
# the CPU machine in .ab/lib.tgz (bench/gpu-library.sh says how). PART=prof: Nsight Compute of
# split-KV / Lean at hdim 64 and 128 (strided and head-major caches) next to cuDNN's kernel on the
# same shapes (PROF_SHAPES, PROF_SCHED), then bench/decode.py on SHAPES with VARIANTS columns.
# PART=decode: the decode GPU tests, sanitizers, the torch decode tests, then the same bench.
# PART=ab: extensions built with A/B flags (.ab/vars.tar.xz, build-dev/var/<name>/_C*.so, VARS
# names them) timed in turn by bench/decode.py on SHAPES, ROUNDS times (TESTS=1: the tests first).
# usage: tar xzf .ab/lib.tgz && OUT=/some/dir PART=prof|decode|ab [SHAPES=...] bench/gpu-s18.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$log/gpu.txt"
# The decode GPU tests, memcheck / racecheck on the small ones, the torch decode tests.
decode_tests() {
  stamp "decode tests"
  timeout 200 build-dev/flashkit_gpu_tests --gtest_filter='DecodeGpu*' >"$log/tests.log" 2>&1
  stamp "rc=$?"
  grep -E "^\[  FAILED|^\[  PASSED|Failure" "$log/tests.log" | tail -8
  sanitize build-dev/flashkit_gpu_tests 'DecodeGpuSmall*'
  timeout 90 python3 -m pytest -q -k "dense_and_paged or cuda_graph" tests/python/test_torch_decode.py \
    >"$log/pytest.log" 2>&1; tail -2 "$log/pytest.log"
}
decode_run() {
  timeout 120 python3 bench/decode.py --out "$log/r$1-$2" --shapes $SHAPES --skip "${SKIP:-}" \
    ${HEADMAJOR:+--headmajor} --variants "${VARIANTS:-}"
}
attention_run() {
  timeout 150 python3 bench/attention.py --methods flashkit-sm80,flash --hdims ${HDIMS:-64,128} \
    --seqlens ${SEQLENS:-2048,8192} --no-memory --out "$log/r$1-$2" --name sm80-$2
}
case "${PART:?set PART}" in
prof)
  stamp "ncu"
  timeout 240 ncu --profile-from-start off --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats \
    --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,lts__t_sectors_srcunit_tex_op_read.sum \
    python3 bench/profile_decode.py --shapes ${PROF_SHAPES:-64,1,56,65536 128,1,56,65536 64,1,16,524288} \
    --schedules ${PROF_SCHED:-split_kv,lean} --headmajor --cudnn >"$log/ncu.txt" 2>&1
  stamp "rc=$?"
  grep -E '^  [a-z_c].*\(|Elapsed Cycles|SM Active Cycles|^    Duration|DRAM Throughput|Grid Size' "$log/ncu.txt" | \
    awk '/\(/{name=substr($0,1,100)} /Elapsed/{e=$NF} /Duration/{d=$NF} /DRAM Th/{m=$NF}
         /SM Active/{gsub(",","",e); a=$NF; gsub(",","",a)}
         /Grid Size/{printf "%-100s dur=%s dram=%s%% grid=%s active=%.3f\n", name, d, m, $NF, a/e}'
  ;;
decode)
  decode_tests
  ;;
ab)
  tar xJf .ab/vars.tar.xz
  if [ -n "${TESTS:-}" ]; then
    decode_tests
  fi
  ab_rounds decode_run ${VARS:?}
  python3 bench/ab_decode_table.py "$log"/r*-* | tee "$out/ab-table.txt"
  (cd "$out" && tar czf logs.tgz t && rm -rf t); exit 0
  ;;
attnab)
  # The sm80 backward A/B: build-dev/var/$V (its test binary and extension, from .ab/vars.tar.xz)
  # tested (both paths, sm80 forced, sanitizers), then bench/attention.py flashkit-sm80 vs torch
  # flash with main's extension (base) and $V's in turn, ROUNDS times.
  tar xJf .ab/vars.tar.xz
  bin=build-dev/var/${V:?}/flashkit_gpu_tests
  stamp "attention tests ($V)"
  timeout 300 $bin --gtest_filter='AttentionGpu.*:AttentionGpuSmall.*:-*Fp8*' >"$log/tests.log" 2>&1
  stamp "rc=$?"; grep -E "^\[  FAILED|^\[  PASSED|Failure" "$log/tests.log" | tail -6
  FLASHKIT_ATTENTION_PATH=sm80 timeout 200 $bin --gtest_filter='AttentionGpu.*' >"$log/tests80.log" 2>&1
  stamp "sm80 forced rc=$?"; grep -E "^\[  FAILED|^\[  PASSED|Failure" "$log/tests80.log" | tail -6
  sanitize $bin 'AttentionGpuSmall.Sm90AndSm80Paths:AttentionGpuSmall.Sm90AndSm80BackwardDeterministic'
  ab_rounds attention_run base $V
  python3 bench/ab_attention_table.py "$log"/r*-* | tee "$out/ab-table.txt"
  (cd "$out" && tar czf logs.tgz t && rm -rf t); exit 0
  ;;
esac
stamp "bench/decode.py ($(left) s left)"
timeout $(( $(left) - 5 )) python3 bench/decode.py --out "$out" ${SHAPES:+--shapes $SHAPES} ${QUICK:+--quick} \
  --headmajor --variants "${VARIANTS:-}" >"$log/decode.log" 2>&1
stamp "rc=$?"
grep -E "^d(64|128) " "$log/decode.log" | cut -c1-1200
(cd "$out" && tar czf logs.tgz t && rm -rf t)
