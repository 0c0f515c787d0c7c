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
