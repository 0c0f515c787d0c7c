#!/usr/bin/env bash
# The lead's GPU call for branch h/window (NOTES-attention "sm90 window and softcap cost"). Run
# from the repo root of the staged tree with .carry linked and OUT set: minimal build + the sm90
# and variant GPU tests, compute-sanitizer on the small variant cases, bench/variants.py, then the
# forward order A/B (FLASHKIT_SM90_FWD_LPT unset / 1 / 0) on the window cases in one process.
# Leaves <= 7 files under $OUT; ~580 s at most. EXTRA_FILTER / EXTRA_SANITIZE (":Pattern") add
# tests (the lead's integrated call adds the MAS suites).
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?set OUT}"
t0=$(date +%s)
. bench/carried_wheels.sh
timeout 400 tests/gpu/run --kernels minimal \
  --filter "AttentionGpuSm90.*:AttentionGpuVariants*:AttentionGpuSmall.Sm90*${EXTRA_FILTER:-}" \
  --sanitize-filter "AttentionGpuSmall.Sm90AndSm80PathsVariants:AttentionGpuSmall.Sm90AndSm80VariantsDeterministic${EXTRA_SANITIZE:-}" \
  --out "$OUT/t" > "$OUT/run.txt" 2>&1
echo "tests/gpu/run rc=$? after $(( $(date +%s) - t0 )) s" >> "$OUT/run.txt"
PYTHONPATH=python${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 timeout $(( 520 - ($(date +%s) - t0) )) \
  python3 bench/variants.py --out "$OUT" > "$OUT/variants.txt" 2>&1
echo "variants.py rc=$? after $(( $(date +%s) - t0 )) s" >> "$OUT/variants.txt"
PYTHONPATH=python:bench${PYTHONPATH:+:$PYTHONPATH} timeout $(( 575 - ($(date +%s) - t0) )) python3 - > "$OUT/order_ab.txt" 2>&1 <<'PY'
import os, torch, flashkit
from timing import median_ms
b, s, h, d = 2, 8192, 16, 128
q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
           for _ in range(3))
do = torch.randn_like(q)
for causal, win in ((False, (1024, 1024)), (True, (1024, 0))):
    run = lambda: flashkit.attention(q, k, v, causal=causal, window=win)  # noqa: E731

    def both():
        q.grad = k.grad = v.grad = None
        run().backward(do)
    for lpt in ("", "1", "0"):
        os.environ["FLASHKIT_SM90_FWD_LPT"] = lpt
        fwd = median_ms(run, reps=10)
        fb = median_ms(both, reps=10)
        print(f"causal={causal} window={win} LPT={lpt or 'unset'}: fwd {fwd:.3f} ms, "
              f"bwd {fb - fwd:.3f} ms")
PY
echo "order A/B rc=$?" >> "$OUT/order_ab.txt"
grep -E "FAILED|Failure|error:|Expected|Which is|differs|hang|Timeout" "$OUT/t/gpu_tests.log" 2>/dev/null \
  | head -60 > "$OUT/failures.txt"
(cd "$OUT" && tar czf t.tgz t && rm -rf t)
tail -20 "$OUT/run.txt"; tail -25 "$OUT/variants.txt"; cat "$OUT/order_ab.txt"; ls "$OUT"
