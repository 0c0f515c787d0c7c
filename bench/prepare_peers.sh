#!/usr/bin/env bash
# Fills the ignored folders bench/mas.py reads its peers from (the GPU machine has no network):
# .carry/peers/{super_monotonic_align,jit_monotonic_align} from supertone-inc/super-monotonic-align,
# .carry/peers/glow_tts_monotonic_align/core.pyx from jaywalnut310/glow-tts (each with a COMMIT
# file), and .whl/ with a Cython wheel for the device's Python 3.12 (bench/carried_wheels.sh
# installs it there). Nothing here is committed. SUPER_MAS / GLOW_TTS: local git repositories of
# the two projects (default: clones from GitHub).
# usage: bench/prepare_peers.sh, then carry [".carry/peers", ".whl", ...] on the device call.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
src() {  # $1: env override, $2: GitHub owner/name
  if [ -n "$1" ]; then echo "$1"; else git clone -q "https://github.com/$2" "$tmp/$(basename "$2")" &&
    echo "$tmp/$(basename "$2")"; fi
}
sm=$(src "${SUPER_MAS:-}" supertone-inc/super-monotonic-align)
gt=$(src "${GLOW_TTS:-}" jaywalnut310/glow-tts)
rm -rf .carry/peers && mkdir -p .carry/peers/glow_tts_monotonic_align
for d in super_monotonic_align jit_monotonic_align; do
  git -C "$sm" archive HEAD "$d" | tar -x -C .carry/peers
  git -C "$sm" rev-parse HEAD >".carry/peers/$d/COMMIT"
done
git -C "$gt" show HEAD:monotonic_align/core.pyx >.carry/peers/glow_tts_monotonic_align/core.pyx
git -C "$gt" rev-parse HEAD >.carry/peers/glow_tts_monotonic_align/COMMIT
mkdir -p .whl
python3 -m pip download -q --only-binary=:all: --python-version 3.12 \
  --platform manylinux_2_17_x86_64 --no-deps -d .whl Cython
rm -rf "$tmp"
du -sh .carry/peers .whl
