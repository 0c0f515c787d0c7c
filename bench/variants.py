"""Attention variants' cost over the plain kernel on one GPU (issue 6's bar: each variant <= 10%
over plain at hdim 128, seqlen 8k): forward and forward+backward time of flashkit.attention with
softcap, ALiBi and a sliding window, next to the plain kernel, causal off and on. The window skips
tiles, so its cost is judged per visible (query, key) pair. Writes <out>/variants.json."""
import argparse
import json
import os

import torch

import flashkit

from timing import median_ms


def visible_pairs(s, causal, window):
    """(query, key) pairs a square s x s problem computes under causal and window=(left, right)."""
    left, right = window
    total = 0
    for i in range(s):
        lo = max(0, i - left) if left >= 0 else 0
        hi = s - 1 if right < 0 else min(s - 1, i + right)
        if causal:
            hi = min(hi, i)
        total += max(0, hi - lo + 1)
    return total


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="bench/results")
    p.add_argument("--seqlen", type=int, default=8192)
    p.add_argument("--hdim", type=int, default=128)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--heads", type=int, default=16)
    args = p.parse_args()
    b, s, h, d = args.batch, args.seqlen, args.heads, args.hdim
    torch.manual_seed(0)
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    do = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)
    slopes = torch.rand(h, device="cuda", dtype=torch.float32) * 0.1
    variants = {"plain": {}, "softcap": {"softcap": 30.0}, "alibi": {"alibi_slopes": slopes},
                "window": {"window": (1024, 0)}}
    rows = []
    for causal in (False, True):
        for name, kw in variants.items():
            if name == "window" and not causal:
                kw = {"window": (1024, 1024)}
            try:
                fwd = median_ms(lambda: flashkit.attention(q, k, v, causal=causal, **kw))

                def fwd_bwd():
                    q.grad = k.grad = v.grad = None
                    flashkit.attention(q, k, v, causal=causal, **kw).backward(do)
                both = median_ms(fwd_bwd)
            except Exception as e:  # a variant the build does not support yet
                rows.append({"variant": name, "causal": causal, "error": str(e)[:200]})
                continue
            pairs = visible_pairs(s, causal, kw.get("window", (-1, -1)))
            rows.append({"variant": name, "causal": causal, "fwd_ms": fwd, "fwd_bwd_ms": both,
                         "pairs": pairs,
                         "fwd_tflops": 4 * b * h * pairs * d / fwd / 1e9,
                         "fwd_bwd_tflops": 3.5 * 4 * b * h * pairs * d / both / 1e9})
    for causal in (False, True):
        base = next(r for r in rows if r["variant"] == "plain" and r["causal"] == causal)
        for r in rows:
            if r["causal"] == causal and "fwd_tflops" in r and "fwd_tflops" in base:
                r["fwd_cost_over_plain"] = base["fwd_tflops"] / r["fwd_tflops"] - 1
                r["fwd_bwd_cost_over_plain"] = base["fwd_bwd_tflops"] / r["fwd_bwd_tflops"] - 1
    res = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "batch": b,
           "seqlen": s, "heads": h, "hdim": d, "dtype": "bfloat16", "rows": rows}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "variants.json"), "w") as f:
        json.dump(res, f, indent=1)
    print(f"{'variant':9} {'causal':6} {'fwd ms':>8} {'fwd TF/s':>9} {'cost':>7} "
          f"{'f+b ms':>8} {'f+b TF/s':>9} {'cost':>7}")
    for r in rows:
        if "error" in r:
            print(f"{r['variant']:9} {str(r['causal']):6} error: {r['error']}")
            continue
        print(f"{r['variant']:9} {str(r['causal']):6} {r['fwd_ms']:8.3f} {r['fwd_tflops']:9.1f} "
              f"{100 * r.get('fwd_cost_over_plain', 0):6.1f}% {r['fwd_bwd_ms']:8.3f} "
              f"{r['fwd_bwd_tflops']:9.1f} {100 * r.get('fwd_bwd_cost_over_plain', 0):6.1f}%")


if __name__ == "__main__":
    main()
