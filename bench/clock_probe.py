"""SM clock, power and temperature while one attention pass runs back to back for a few seconds
(bench/sustained.py's ClockLog: nvidia-smi sampled every 50 ms): is a method's rate set by the
clock it runs at under the card's power limit, and do flashkit and cuDNN run at the same clock?
  python3 bench/clock_probe.py --hdim 128 --seqlen 4096 --pass bwd --methods flashkit,cudnn"""
import argparse
import statistics
import time

import torch

from attention import HIDDEN, TOKENS, flops, method_fns
from sustained import ClockLog, run_for, timed_window


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hdim", type=int, default=128)
    ap.add_argument("--seqlen", type=int, default=4096)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--pass", dest="which", default="bwd", choices=["fwd", "bwd"])
    ap.add_argument("--methods", default="flashkit,cudnn")
    ap.add_argument("--seconds", type=float, default=3.0)
    a = ap.parse_args()
    d, s = a.hdim, a.seqlen
    b, h = TOKENS // s, HIDDEN // d
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    f = flops(b, h, s, d, a.causal) * (2.5 if a.which == "bwd" else 1.0)
    clocks = ClockLog()
    try:
        for m in a.methods.split(","):
            fwd, bwd = method_fns(m, q, k, v, a.causal)
            fn = bwd if a.which == "bwd" else fwd
            run_for(fn, 1.0)  # warm-up: the card at this method's clock
            t0 = time.time()
            ms = timed_window(fn, a.seconds)
            rows = clocks.window(t0, time.time())
            if not rows:
                print(f"{m}: {ms:.3f} ms/call, no nvidia-smi samples", flush=True)
                continue
            clk, pw, tc = ([r[i] for r in rows] for i in range(3))
            print(f"d{d} s{s} {'causal' if a.causal else 'dense'} {a.which} {m:9s}: "
                  f"{ms:8.3f} ms/call {f / ms / 1e9:6.1f} TFLOP/s | SM MHz median "
                  f"{statistics.median(clk):.0f} min {min(clk):.0f} | W median {statistics.median(pw):.0f} "
                  f"max {max(pw):.0f} | C {max(tc):.0f} ({len(rows)} samples)", flush=True)
    finally:
        clocks.close()


if __name__ == "__main__":
    main()
