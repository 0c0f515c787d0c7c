# Sourced by the bench/gpu-*.sh call scripts after `set -uo pipefail`: runs from the repo root,
# makes $OUT/t the log folder ($log), defines `stamp` (a timestamped line into $log/steps.txt),
# installs the carried wheels (bench/carried_wheels.sh) and puts python/ on PYTHONPATH.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${OUT:?set OUT}
log="$out/t"
mkdir -p "$log"
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a "$log/steps.txt"; }
. bench/carried_wheels.sh
export PYTHONPATH=python${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
# Seconds left of a call that must end by 585 s (the device's 600 s limit less packing).
left() { echo $(( 585 - ($(date +%s) - t0) )); }
# The carried test binary $1 on the gtest filter $2 ($3 seconds at most), then the torch attention
# tests on the GPU.
library_tests() {
  stamp "attention tests"
  timeout "$3" "$1" --gtest_filter="$2" >"$log/tests.log" 2>&1
  stamp "rc=$?"
  grep -E "^\[  FAILED|^\[  PASSED|tests ran|SKIPPED \]|Failure" "$log/tests.log" | tail -14
  stamp "torch attention tests"
  timeout 120 python3 -m pytest -q -x tests/python/test_torch_attention.py >"$log/pytest.log" 2>&1
  stamp "rc=$?"
  tail -3 "$log/pytest.log"
}
# memcheck, then racecheck, on the gtest filter $2 of the test binary $1 (SAN_EACH seconds each).
sanitize() {
  for tool in memcheck racecheck; do
    stamp "$tool ($(left) s left)"
    timeout "${SAN_EACH:-60}" compute-sanitizer --tool $tool --error-exitcode 9 "$1" \
      --gtest_filter="$2" >"$log/$tool.log" 2>&1
    stamp "rc=$?"
    grep -E "SUMMARY|PASSED|FAILED" "$log/$tool.log"
  done
}
# The forward of flashkit against torch SDPA flash + cudnn in one process (hdim 128 and 64,
# seqlen 2k-16k; bench/attention.py --fwd-only), the Hopper forward's measurement; $1 names the
# result file (<date>-<gpu>-$1.json).
fwd_vs_cudnn() {
  stamp "bench/attention.py"
  timeout "$(left)" python3 bench/attention.py --out "$out" --fwd-only --methods flashkit,flash,cudnn \
    --hdims 128,64 --seqlens 2048,4096,8192,16384 --name "$1" >"$log/attn.log" 2>&1
  stamp "rc=$?"
  tail -20 "$log/attn.log"
}
# An ncu report $log/$1.ncu-rep unpacked into $log/$1-details.txt (every section) and, with a
# second argument, $log/$1-sass.csv (source-level samples per SASS instruction); the report goes.
ncu_unpack() {
  ncu -i "$log/$1.ncu-rep" --page details >"$log/$1-details.txt" 2>&1
  [ $# -gt 1 ] && ncu -i "$log/$1.ncu-rep" --page source --csv --print-source sass >"$log/$1-sass.csv" 2>&1
  rm -f "$log/$1.ncu-rep"
}
# Build ($1 kernels: noattention or minimal) and run the MAS GPU tests, compute-sanitizer on the
# small ones; $2: the build + tests time limit in seconds.
mas_tests() {
  stamp "build ($1) + MAS tests"
  timeout "$2" tests/gpu/run --kernels "$1" --filter 'MasGpu*' --sanitize-filter 'MasGpuSmall*' \
    --out "$log" >"$log/run.txt" 2>&1
  stamp "tests/gpu/run rc=$?"
  grep -E "gpu tests|sanitizer|build|FAILED|Failure|differ" "$log/run.txt" | head -20
}
# The PYTHONPATH of build $1 in an A/B call: base (.ab/old, main's package) or new (python/).
pp_of() { if [ "$1" = base ]; then echo ".ab/old:$PYTHONPATH"; else echo "$PYTHONPATH"; fi; }
# Issue 8's table: bench/attention.py forward + backward, flashkit / flash / cuDNN in one process,
# hdim 128, 64 and 256 at 2k-16k, in the time left; $1 names the result file.
issue8_table() {
  stamp "bench/attention.py"
  timeout "$(left)" python3 bench/attention.py --out "$out" --methods flashkit,flash,cudnn --no-memory \
    --hdims 128,64,256 --seqlens 2048,4096,8192,16384 --name "$1" >"$log/attn.log" 2>&1
  stamp "rc=$?"
  tail -40 "$log/attn.log"
}
# bench/mas.py's sweep (Cython up to T = 256) in the time left, if at least $1 seconds are.
mas_sweep() {
  stamp "bench/mas.py ($(left) s left)"
  [ "$(left)" -gt "$1" ] || return 0
  timeout $(( $(left) - 10 )) python3 bench/mas.py --out "$out" --cython-max-t 256 --reps 7 \
    >"$log/mas.log" 2>&1
  stamp "rc=$?"
  grep -A8 "T  flashkit" "$log/mas.log"
}
# Build ($1 kernels) and run the Hopper attention tests (AttentionGpuSm90*, AttentionGpuSmall.Sm90*),
# memcheck and racecheck on the small ones of both paths; $2: the build + tests time limit.
sm90_attention_tests() {
  stamp "build ($1) + sm90 attention tests"
  timeout "$2" tests/gpu/run --kernels "$1" --filter 'AttentionGpuSm90*:AttentionGpuSmall.Sm90*' \
    --sanitize-filter 'AttentionGpuSmall.Sm90AndSm80Paths:AttentionGpuSmall.Sm90PaddedBuckets:AttentionGpuSmall.Sm90AndSm80BackwardDeterministic' \
    --out "$log" >"$log/run.txt" 2>&1
  stamp "tests/gpu/run rc=$?"
  grep -E "gpu tests|sanitizer|build|FAILED|Failure|error" "$log/run.txt" | head -30
}
# The GPU's name into $log/gpu.txt, then the carried .ab/lib.tgz (if any) unpacked over the tree.
gpu_and_carried() {
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$log/gpu.txt"
  if [ -f .ab/lib.tgz ]; then tar xzf .ab/lib.tgz; fi
}
# For the call scripts that carry a library built on the CPU machine (.ab/lib.tgz): the GPU's
# name into $log/gpu.txt, bin = the carried test binary, and gtest: $1 log name, $2 gtest filter,
# $3 seconds, ENVS (optional) the environment before the binary.
carried_library() {
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$log/gpu.txt"
  bin=build-dev/flashkit_gpu_tests
}
gtest() {
  stamp "tests $2 ${ENVS:-}"
  env ${ENVS:-} timeout "$3" "$bin" --gtest_filter="$2" >"$log/$1.log" 2>&1
  stamp "rc=$?"
  grep -E "^\[  FAILED|^\[  PASSED|Failure|differ" "$log/$1.log" | head -12
}
# The carried binary's `Attention*` gtests ($1 seconds at most), then memcheck and racecheck on the
# gtest filter $2 (SAN_EACH seconds each).
attention_checks() {
  gtest attn 'Attention*' "$1"
  grep -E "tests ran|PASSED|FAILED" "$log/attn.log" | tail -4
  SAN_EACH=${SAN_EACH:-70} sanitize "$bin" "$2"
}
# Attention variant A/B helpers (bench/gpu-s21.sh, gpu-s22.sh; PYTHONPATH=bench first):
# bd: per-kernel GPU time of one flashkit forward + backward at 8k (bench/kernel_breakdown.py).
bd() { env ${ENVS:-} timeout 60 python3 bench/kernel_breakdown.py --backend flashkit --seqlen 8192 "$@" \
  2>&1 | head -8; }
# bd with build $1: base (.ab/old, the previous session's python package) or new (python/); its
# kernel lines.
bd_of() {
  local v=$1; shift
  if [ "$v" = base ]; then PYTHONPATH=bench:.ab/old bd "$@"; else bd "$@"; fi | grep -E "Kernel<|us per"
}
# ab_times HDIM ARGS..: bd_of base, then new, for each of the argument strings at head dim HDIM.
ab_times() {
  local d=$1 args v; shift
  for args in "$@"; do
    for v in base new; do
      stamp "breakdown $v hdim $d $args"
      bd_of $v --hdim "$d" $args
    done
  done
}
# bench/variants.py at hdim 128 (every variant) and 64 (the issue's two head dims), into $out.
variants_both() {
  stamp "variants hdim 128"
  timeout 200 python3 bench/variants.py --out "$out" --hdim 128 >"$log/var128.log" 2>&1
  stamp "rc=$?"; tail -17 "$log/var128.log"
  stamp "variants hdim 64"
  timeout 200 python3 bench/variants.py --out "$out" --hdim 64 --heads 32 \
    --variants softcap,alibi,window,dropout,blocksparse_0.5,blocksparse_0.25,blocksparse_0.1 \
    >"$log/var64.log" 2>&1
  stamp "rc=$?"; tail -17 "$log/var64.log"
}
# The A/B harness binaries .ab/$v for v in $VARIANTS (bench/sm90_*_ab.cu builds), each run with
# its own name and SEQ's lengths, two interleaved rounds, appended to $log/ab-$v.txt.
harness_rounds() {
  local seq=${SEQ:-4096 8192 16384} round v
  for round in 1 2; do
    for v in $VARIANTS; do
      stamp "$v round $round"
      # shellcheck disable=SC2086
      timeout 100 .ab/$v $v $seq >>"$log/ab-$v.txt" 2>&1
      stamp "rc=$?"
    done
  done
}
# memcheck, then racecheck, on the checks of harness binary .ab/$1 (its length argument 0 runs the
# checks only); prints the lines matching $2 (default: failures and the summaries), $3 at most.
harness_sanitize() {
  local tool
  for tool in memcheck racecheck; do
    stamp "compute-sanitizer $tool ($1 checks only)"
    timeout 150 compute-sanitizer --tool "$tool" ".ab/$1" "$1" 0 >"$log/san-$tool.txt" 2>&1
    stamp "rc=$?"
    grep -E "${2:-FAILED|ERROR SUMMARY|RACECHECK SUMMARY}" "$log/san-$tool.txt" | head -"${3:-4}"
  done
}
# The extension of an A/B: ext_save_base keeps the one in python/flashkit (main's) aside (not
# under $log: the logs come back packed); use_ext <name> puts in base (that one), else
# .ab/var-<name>.so or build-dev/var/<name>/_C*.so.
ext_save_base() { cp "$(ls python/flashkit/_C*.so)" /tmp/ab_base_C.so; }
use_ext() {
  local so; so=$(ls python/flashkit/_C*.so)
  if [ "$1" = base ]; then cp /tmp/ab_base_C.so "$so"
  elif [ -f ".ab/var-$1.so" ]; then cp ".ab/var-$1.so" "$so"
  else cp build-dev/var/"$1"/_C*.so "$so"; fi
}
# Package folders of the two extensions of an A/B run in separate processes: /tmp/basepkg holds
# main's (python/flashkit's), /tmp/newpkg the carried .ab/var-<name>.so, which also replaces
# python/flashkit's so that the repo's Python layer imports it.
ext_pkg_dirs() {
  mkdir -p /tmp/basepkg /tmp/newpkg
  cp python/flashkit/_C*.so /tmp/basepkg/
  cp ".ab/var-$1.so" /tmp/newpkg/_C.cpython-312-x86_64-linux-gnu.so
  cp ".ab/var-$1.so" "$(ls python/flashkit/_C*.so)"
}
# The GPU's name into $log/gpu.txt, the carried .ab/lib.txz unpacked over the tree, and the package
# folders of an A/B whose new extension is .ab/var-$1.so (ext_pkg_dirs).
carried_ab() {
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$log/gpu.txt"
  python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall()" .ab/lib.txz
  ext_pkg_dirs "$1"
}
# Python extensions in turn, ROUNDS times (use_ext's names): runs "$1" with the round and the
# name (its output to $log/r<round>-<name>.log), restores the base.
ab_rounds() {
  local fn=$1 round v
  shift
  ext_save_base
  for round in ${ROUNDS:-1 2}; do
    for v in "$@"; do
      use_ext "$v"
      stamp "round $round $v"
      $fn "$round" "$v" >"$log/r$round-$v.log" 2>&1
      grep -E "Error|error" "$log/r$round-$v.log" | head -3
    done
  done
  use_ext base
}
# The decode GPU tests (build-dev/flashkit_gpu_tests) with each of LOADERS: default, or 0 / 1 for
# FLASHKIT_DECODE_TMA forced (cp.async / tensor-map boxes).
decode_tests_each_loader() {
  local tma
  for tma in ${LOADERS:-default 0 1}; do
    [ "$tma" = default ] && tma=""
    stamp "decode tests ${tma:+FLASHKIT_DECODE_TMA=$tma}"
    ${tma:+env FLASHKIT_DECODE_TMA=$tma} timeout 200 build-dev/flashkit_gpu_tests \
      --gtest_filter='DecodeGpu*:MergeStates*' >"$log/tests$tma.log" 2>&1
    stamp "rc=$?"
    grep -E "^\[  FAILED|^\[  PASSED|Failure" "$log/tests$tma.log" | tail -8
  done
}
# Extensions $@ in turn (ab_rounds; .ab/var-<name>.so, or base), each timed by bench/decode.py on
# SHAPES with VARIANTS columns (SKIP left out; DECODE_ARGS more options); a table of every
# column into $out/ab-table.txt.
decode_ab() {
  ab_decode() {
    timeout 120 python3 bench/decode.py --out "$log/r$1-$2" --shapes $SHAPES --skip "${SKIP:-}" \
      --variants "${VARIANTS:-}" ${DECODE_ARGS:-}
  }
  ab_rounds ab_decode "$@"
  python3 bench/ab_decode_table.py "$log"/r*-* | tee "$out/ab-table.txt"
}
# bench/decode.py's full sweep (the README's plot) into $out, in the time the call has left.
decode_sweep() {
  stamp "bench/decode.py sweep ($(left) s left)"
  timeout $(( $(left) - 5 )) python3 bench/decode.py --out "$out" --budget $(( $(left) - 30 )) >"$log/sweep.log" 2>&1
  stamp "rc=$?"
  grep -E "^d(64|128) " "$log/sweep.log" | cut -c1-400
}
# Issue 3's closing checks on the carried library (build-dev/flashkit_gpu_tests, the extension):
# the attention gtests with the default path and with the sm80-class path forced (fp8 excluded:
# it refuses that path), memcheck / racecheck of the sm80 gtest filter $2 with that path forced,
# the torch attention tests, then bench/attention.py flashkit-sm80 against FA2 at hdims $3 into
# <date>-<gpu>-$1.json.
sm80_final() {
  local f='AttentionGpu.*:AttentionGpuSmall.*:AttentionGpu/AttentionGpuHdim.*:*BlockSparse*:*Deterministic*'
  stamp "attention tests (default path)"
  timeout 200 build-dev/flashkit_gpu_tests --gtest_filter="$f" >"$log/final-tests.log" 2>&1
  stamp "rc=$?"; grep -E "^\[  FAILED|^\[  PASSED|Failure" "$log/final-tests.log" | tail -6
  stamp "attention tests (sm80 forced)"
  FLASHKIT_ATTENTION_PATH=sm80 timeout 200 build-dev/flashkit_gpu_tests --gtest_filter="$f:-*Fp8*" \
    >"$log/final-tests-sm80.log" 2>&1
  stamp "rc=$?"; grep -E "^\[  FAILED|^\[  PASSED|Failure" "$log/final-tests-sm80.log" | tail -6
  FLASHKIT_ATTENTION_PATH=sm80 sanitize build-dev/flashkit_gpu_tests "$2"
  stamp "torch attention tests"
  timeout 150 python3 -m pytest -q -x tests/python/test_torch_attention.py >"$log/pytest.log" 2>&1
  stamp "rc=$?"; tail -2 "$log/pytest.log"
  stamp "bench/attention.py sm80 vs flash ($(left) s left)"
  timeout $(( $(left) - 10 )) python3 bench/attention.py --out "$out" --methods flashkit-sm80,flash \
    --hdims "$3" --no-memory --name "$1" >"$log/attn.log" 2>&1
  stamp "rc=$?"; grep -E "^d[0-9]|worst" "$log/attn.log"
}
# Nsight Compute source counters of the sm80-class kernels (sm80 forced) beside FA2's, from one
# bench/profile_attention.py --flash run per hdim of $1 (PROF_SEQ, default 8k; causal when
# PROF_CAUSAL is set; PROF_ARGS more options, e.g. --fwd-only), kernels matching PROF_K (default:
# the two backwards): $out/prof-d<h>-details.txt and per-SASS-instruction samples in
# $out/prof-d<h>-sass.csv.gz.
sm80_prof() {
  local h
  for h in $1; do
    stamp "ncu source counters d$h ($(left) s left)"
    FLASHKIT_ATTENTION_PATH=sm80 timeout 240 ncu --section SourceCounters --section WarpStateStats \
      --section InstructionStats --section LaunchStats --import-source no --kernel-name-base demangled \
      -k "${PROF_K:-regex:BwdKernel|flash_bwd_dq_dk_dv}" -o "$log/prof$h" \
      python3 bench/profile_attention.py --flash ${PROF_ARGS:-} --seqlen "${PROF_SEQ:-8192}" ${PROF_CAUSAL:+--causal} "$h" \
      >"$log/prof$h.log" 2>&1
    stamp "rc=$?"; tail -2 "$log/prof$h.log"
    ncu -i "$log/prof$h.ncu-rep" --page details >"$out/prof-d$h-details.txt" 2>&1
    ncu -i "$log/prof$h.ncu-rep" --page source --csv --print-source sass | gzip -c >"$out/prof-d$h-sass.csv.gz"
    rm -f "$log/prof$h.ncu-rep"
    grep -E "Duration|Warp Cycles Per Issued|Executed Instructions  |Registers Per" "$out/prof-d$h-details.txt" | head -8
  done
}
# hdim 256 on the sm80-class path, with an extension that has those kernels in place (minimal
# builds leave them out): the float64 checks (bench/check_hdim.py 256, sm80 forced), then
# bench/attention.py flashkit-sm80 against flash at hdim 256 into <date>-<gpu>-$1.json.
sm80_d256() {
  stamp "hdim 256 against float64, sm80 forced"
  FLASHKIT_ATTENTION_PATH=sm80 PYTHONPATH=$PYTHONPATH:tests/python timeout 120 python3 bench/check_hdim.py 256 \
    >"$log/check256.log" 2>&1
  stamp "rc=$?"; tail -2 "$log/check256.log"
  stamp "bench/attention.py sm80 vs flash, hdim 256 ($(left) s left)"
  timeout $(( $(left) - 10 )) python3 bench/attention.py --out "$out" --methods flashkit-sm80,flash \
    --hdims 256 --seqlens 2048,4096,8192,16384 --no-memory --name "$1" >"$log/attn256.log" 2>&1
  stamp "rc=$?"; grep -E "^d[0-9]|worst" "$log/attn256.log"
}
# The minimal library built on the device by the GPU runner (tests/gpu/run --no-tests: build-gpu's
# test binary, and the Python extension, which the build writes into python/flashkit), for calls
# that carry no CPU-machine build: ~280-350 s on a two-GPU machine's 32 cores (BUILD_S bounds it);
# carry .carry (cutlass/include, googletest). Non-zero, with the build's errors printed, on failure.
device_build() {
  stamp "build (minimal, $(nproc) cores)"
  timeout "${BUILD_S:-380}" tests/gpu/run --kernels minimal --no-tests --targets "flashkit_gpu_tests _C" \
    --out "$log/run" >"$log/build.log" 2>&1
  local rc=$?
  stamp "build rc=$rc"
  [ $rc = 0 ] || { tail -40 "$log/build.log"; return 1; }
}
