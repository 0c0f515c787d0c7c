"""A/B of the L2 group budget (FLASHKIT_L2_GROUP_MB, read per launch by l2_pair_group: how many
(head, batch) pairs the longest-first launch order keeps together) on flashkit's forward and
backward, the budgets interleaved under load (bench/sustained.py), issue 8's shapes (b x s = 16k,
hidden 2048).
  python3 bench/l2_group_ab.py --hdims 256 --seqlens 4096,8192 --budgets 8,32,64,128 [--dense] [--fwd-only]"""
import argparse
import os

import torch

from attention import HIDDEN, TOKENS, flops, method_fns
from sustained import ClockLog, interleaved, save_rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hdims", default="256")
    ap.add_argument("--fwd-only", action="store_true")
    ap.add_argument("--seqlens", default="4096,8192,16384")
    ap.add_argument("--budgets", default="8,32,64,128")
    ap.add_argument("--dense", action="store_true", help="dense too (causal always)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    clocks = ClockLog()
    rows = []
    shapes = [(d, c, s) for d in (int(x) for x in a.hdims.split(","))
              for c in ([False] if a.dense else []) + [True] for s in (int(x) for x in a.seqlens.split(","))]
    for d, causal, s in shapes:
        b, h = TOKENS // s, HIDDEN // d
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        fwd, bwd = method_fns("flashkit", q, k, v, causal)
        fns = {}
        for mb in a.budgets.split(","):
            def with_env(fn, mb=mb):
                def run():
                    os.environ["FLASHKIT_L2_GROUP_MB"] = mb
                    fn()
                return run
            if not a.fwd_only:
                fns[f"bwd{mb}"] = with_env(bwd)
            fns[f"fwd{mb}"] = with_env(fwd)
        got = interleaved(fns, clocks, rounds=a.rounds)
        fl = flops(b, h, s, d, causal)
        for name, (ms, mhz, w) in got.items():
            tf = fl * (2.5 if name.startswith("bwd") else 1) / ms / 1e9
            rows.append({"case": name, "hdim": d, "causal": causal, "seqlen": s, "ms": ms,
                         "tflops": tf, "sm_mhz": mhz, "watts": w})
            print(f"d{d} {'causal' if causal else 'full  '} s{s:<5} {name:7s} {ms * 1e3:8.1f} us "
                  f"{tf:5.0f} TFLOP/s {mhz or 0:.0f} MHz", flush=True)
    clocks.close()
    save_rows(a.out, rows)


if __name__ == "__main__":
    main()
