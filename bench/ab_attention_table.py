"""Table of A/B attention runs (bench/gpu-s18.sh PART=attnab, gpu-s26.sh): argv = result folders
named r<round>-<variant>, each holding one bench/attention.py JSON, after an optional
--pair=OURS,PEER (default flashkit-sm80,flash); prints bwd (and fwd) TFLOP/s of both methods per
(hdim, causal, seqlen), one column per folder, and the bwd ratio OURS / PEER."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from ab_decode_table import load_runs  # noqa: E402

args = sys.argv[1:]
pair = ("flashkit-sm80", "flash")
if args and args[0].startswith("--pair="):
    pair = tuple(args.pop(0).split("=", 1)[1].split(","))
runs = load_runs(args, "*.json", "speed")
names = list(runs)
keys = []
for rows in runs.values():
    for r in rows:
        k = (r["hdim"], r["causal"], r["seqlen"])
        if k not in keys:
            keys.append(k)
print("bwd TFLOP/s (fwd) | " + " | ".join(names))
for k in keys:
    for m in pair:
        cells = []
        for n in names:
            r = next((r for r in runs[n] if (r["hdim"], r["causal"], r["seqlen"]) == k and r["method"] == m), None)
            cells.append(f"{r.get('bwd_tflops') or 0:6.1f} ({r.get('fwd_tflops') or 0:5.1f})" if r else "-")
        print(f"d{k[0]} {'causal' if k[1] else 'dense '} {k[2]:5d} {m:13s} | " + " | ".join(cells))
    ratios = []
    for n in names:
        a = next((r for r in runs[n] if (r["hdim"], r["causal"], r["seqlen"]) == k and r["method"] == pair[0]), None)
        b = next((r for r in runs[n] if (r["hdim"], r["causal"], r["seqlen"]) == k and r["method"] == pair[1]), None)
        ratios.append(f"{a['bwd_tflops'] / b['bwd_tflops']:.3f}" if a and b and a.get("bwd_tflops") and b.get("bwd_tflops") else "-")
    print(f"d{k[0]} {'causal' if k[1] else 'dense '} {k[2]:5d} bwd ratio     | " + " | ".join(ratios))
