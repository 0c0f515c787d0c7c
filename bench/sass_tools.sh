#!/usr/bin/env bash
# cuobjdump and nvdisasm on the CPU machine (the CUDA toolkit here has nvcc but not these), from
# PyPI's nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm wheels, unpacked into build-tools/sass
# (ignored, like every build*/ folder; not carried to the GPU).
# usage: eval "$(bench/sass_tools.sh)"   then   cuobjdump -sass build-dev/CMakeFiles/.../x.cu.o
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build-tools/sass
if [ ! -x "$dir/nvidia/cu13/bin/cuobjdump" ] || [ ! -x "$dir/nvidia/cu13/bin/nvdisasm" ]; then
  mkdir -p "$dir/wheels"
  python3 -m pip download -q --no-deps -d "$dir/wheels" nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm >&2
  for w in "$dir"/wheels/*.whl; do python3 -m zipfile -e "$w" "$dir"; done
  chmod +x "$dir"/nvidia/cu13/bin/*
  rm -rf "$dir/wheels"
fi
echo "export PATH=$PWD/$dir/nvidia/cu13/bin:\$PATH"
