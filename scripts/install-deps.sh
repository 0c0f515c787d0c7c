#!/usr/bin/env bash
# Installs everything flashkit needs to build and test on a fresh Debian machine (no GPU needed).
# Called by scripts/demo.sh and scripts/test.sh; safe to run again (skips what is present).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)

need_apt=()
command -v cmake >/dev/null || need_apt+=(cmake)
command -v ninja >/dev/null || need_apt+=(ninja-build)
command -v g++ >/dev/null || need_apt+=(g++)
[ -f /usr/include/gtest/gtest.h ] || need_apt+=(libgtest-dev libgmock-dev googletest)
[ -d /usr/src/googletest ] || need_apt+=(googletest)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "[deps] apt-get install ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

py=${PYTHON:-python3}
pip_pkgs=(numpy pytest "nanobind>=2.4" "scikit-build-core>=0.10" ninja)
missing=()
for p in numpy pytest nanobind scikit_build_core; do
  "$py" -c "import $p" 2>/dev/null || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "[deps] pip install ${pip_pkgs[*]}"
  "$py" -m pip install -q --disable-pip-version-check "${pip_pkgs[@]}"
fi
# CUTLASS/CuTe headers (header-only) from the nvidia-cutlass wheel; --no-deps keeps its Python deps out.
if ! "$py" -c "import cutlass_library, os, sys; sys.exit(0 if os.path.isdir(os.path.join(os.path.dirname(cutlass_library.__file__), 'source/include/cute')) else 1)" 2>/dev/null; then
  echo "[deps] pip install --no-deps nvidia-cutlass"
  "$py" -m pip install -q --disable-pip-version-check --no-deps nvidia-cutlass
fi
echo "[deps] ok"
