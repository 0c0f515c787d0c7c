# Sourced by the bench/gpu-*.sh scripts: installs the wheels carried in .whl/ (the GPU machine has
# no network: Cython for the Cython MAS peer, nanobind for the extension's build) into /tmp/site
# and puts them on PYTHONPATH. Nothing happens without a .whl/ folder.
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
