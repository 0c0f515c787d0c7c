#!/usr/bin/env bash
# Fills the ignored folder .carry/ with what the GPU machine lacks (it has no network): the
# CUTLASS/CuTe headers from the nvidia-cutlass wheel and GoogleTest's sources. Pass `.carry` to the
# device tool's carry list; tests/gpu/run reads it from there.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh >/dev/null
inc=$(python3 -c 'import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), "source", "include"))')
rm -rf .carry/cutlass .carry/googletest
mkdir -p .carry/cutlass
cp -r "$inc" .carry/cutlass/include
cp -r /usr/src/googletest .carry/googletest
du -sh .carry
