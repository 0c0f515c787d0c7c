#!/usr/bin/env bash
# Builds bench/sm90_fwd_ab.cu (or SRC=bench/sm90_bwd_ab.cu) once per variant on the CPU machine (nvcc, sm_90a, the library's
# CUDA flags) into .ab/<name> (ignored; carried to the GPU with `carry: [".ab"]`), 2 at a time.
# usage: bench/sm90_fwd_ab.sh 'base=-DFLASHKIT_SM90_UNIFORM_WG=0' 'v6=-DFLASHKIT_SM90_FWD_TREE=1 ...'
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p .ab
cutlass=${CUTLASS:-.carry/cutlass/include}
build() {
  local name=${1%%=*} flags=${1#*=}
  [ "$name" = "$1" ] && flags=""
  # shellcheck disable=SC2086
  nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr \
    --use_fast_math -lineinfo -DFLASHKIT_WITH_CUDA=1 -DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED \
    -Iinclude -Isrc -isystem "$cutlass" $flags -Xptxas -v "${SRC:-bench/sm90_fwd_ab.cu}" -o ".ab/$name" \
    >".ab/$name.log" 2>&1 && echo "built .ab/$name ($flags)" || { echo "FAILED .ab/$name"; tail -20 ".ab/$name.log"; }
}
n=0
for v in "$@"; do
  build "$v" &
  n=$((n + 1))
  if [ $((n % 2)) = 0 ]; then wait; fi
done
wait
