"""Decode with Gemma-2's softcap and a sliding window (DecodeOptions.softcap / window_left) beside
plain decode, on one GPU, with bench/decode.py's protocol (median of per-call CUDA events, 256 MiB
L2 write flush between calls, every column timed twice, in order and reversed, the faster median
kept). Columns per shape (bf16, q_len 1, dense cache, every sequence at ctx, the `auto` plan):
  plain          decode of the whole cache
  softcap        softcap = 50 (cost of the tanh on every score)
  window         window_left = W: only the last W + 1 keys matter; TB/s counts those keys' bytes
  window_split   the same with a split_kv plan (whose splits share the window's keys)
  softcap_window both
  sliced         plain decode of a cache view holding only the last W + 1 tokens (a plan for
                 that length): what a window can cost at best
and `base_plain` when FLASHKIT_BASE_EXT_DIR names another package folder (an A/B base build).
Each window column's output is compared with `sliced`'s (the same keys; max |diff| printed).
usage: python3 bench/decode_variants.py [--window 4096] [--shapes d,b,h,ctx ...] [--out DIR]"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
import decode as dbench  # noqa: E402  (load_extension, timed)

DTYPE = "bfloat16"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--window", type=int, default=4096)
    ap.add_argument("--softcap", type=float, default=50.0)
    ap.add_argument("--shapes", nargs="*", default=["128,1,32,131072", "128,4,32,32768",
                                                     "64,1,56,65536", "128,8,8,16384"])
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    dev = torch.device("cuda")
    C, B = dbench.load_ab_pair()
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    stream = torch.cuda.current_stream().cuda_stream
    W = args.window
    rows = []
    print(f"{'shape d,b,h,ctx':>20} " + " ".join(f"{c:>15}" for c in
          ["base_plain", "plain", "softcap", "window", "window_split", "softcap_window", "sliced"]) + "   us (TB/s)")
    for spec in args.shapes:
        d, b, h, ctx = (int(x) for x in spec.split(","))
        gen = torch.Generator(device=dev).manual_seed(1)
        q = torch.randn(b, 1, h, d, device=dev, dtype=torch.bfloat16, generator=gen)
        k = torch.randn(b, ctx, h, d, device=dev, dtype=torch.bfloat16, generator=gen)
        v = torch.randn(b, ctx, h, d, device=dev, dtype=torch.bfloat16, generator=gen)
        lens = torch.full((b,), ctx, device=dev, dtype=torch.int32)
        keep = min(ctx, W + 1)
        ks, vs = k[:, ctx - keep:], v[:, ctx - keep:]
        lens_s = torch.full((b,), keep, device=dev, dtype=torch.int32)
        out = torch.empty_like(q)
        lse = torch.empty(b, h, 1, device=dev, dtype=torch.float32)
        full_bytes, win_bytes = 2 * b * h * ctx * d * 2, 2 * b * h * keep * d * 2
        outs = {}

        plans = {}

        def col(name, ext, kk, vv, ll, n, schedule="auto", **opt):
            plan = ext.make_decode_plan(b, 1, h, h, d, DTYPE, [n] * b, schedule=schedule,
                                        device="cuda")
            plans[name] = repr(plan)

            def fn():
                ext.decode(q, kk, vv, ll, None, out, lse, plan, 0.0, stream, None, **opt)
            return name, fn

        cols = [col("plain", C, k, v, lens, ctx),
                col("softcap", C, k, v, lens, ctx, softcap=args.softcap),
                col("window", C, k, v, lens, ctx, window_left=W),
                col("window_split", C, k, v, lens, ctx, "split_kv", window_left=W),
                col("softcap_window", C, k, v, lens, ctx, softcap=args.softcap, window_left=W),
                col("sliced", C, ks, vs, lens_s, keep)]
        if B is not None:
            cols.insert(0, col("base_plain", B, k, v, lens, ctx))
        us = {}
        for order in (cols, cols[::-1]):
            for name, fn in order:
                t = dbench.timed(fn, flush)
                us[name] = min(us.get(name, t), t)
                if name not in outs:
                    outs[name] = out.clone()
        diff = (outs["window"].float() - outs["sliced"].float()).abs().max().item()
        cap_w = outs["softcap_window"]
        row = {"hdim": d, "batch": b, "heads": h, "ctx": ctx, "window": W, "softcap": args.softcap,
               "us": us, "plans": plans, "window_vs_sliced_max_abs_diff": diff,
               "softcap_window_finite": bool(torch.isfinite(cap_w).all().item())}
        rows.append(row)

        def cell(name):
            if name not in us:
                return f"{'-':>15}"
            nbytes = win_bytes if name.startswith(("window", "softcap_window", "sliced")) else full_bytes
            return f"{us[name]:8.1f} ({nbytes / us[name] / 1e6:4.2f})"
        print(f"{spec:>20} " + " ".join(cell(c) for c in ["base_plain", "plain", "softcap", "window",
                                                           "window_split", "softcap_window", "sliced"])
              + f"   window vs sliced max|diff| {diff:.2e}\n{'':>20} window plan: {plans['window']}",
              flush=True)
    if args.out:
        gpu = torch.cuda.get_device_name().replace(" ", "-").lower()
        path = os.path.join(args.out, f"{time.strftime('%Y-%m-%d')}-{gpu}-decode-variants.json")
        with open(path, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "rows": rows,
                       "timing": "median of per-call CUDA events, 256 MiB L2 write flush between "
                                 "calls, two passes (in order, reversed), faster kept"}, f, indent=1)
        print("wrote", path)


if __name__ == "__main__":
    main()
