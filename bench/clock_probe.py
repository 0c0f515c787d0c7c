"""SM clock, power and temperature while one attention pass runs back to back for a few seconds
(nvidia-smi sampled every 50 ms in the background): is a method's rate set by the clock it runs
at under the card's power limit, and do flashkit and cuDNN run at the same clock?
  python3 bench/clock_probe.py --hdim 128 --seqlen 4096 --pass bwd --methods flashkit,cudnn"""
import argparse
import statistics
import subprocess
import time

import torch

from attention import BACKENDS, TOKENS, HIDDEN, Flashkit, flops, sdpa_fns


def sample(fn, seconds):
    """Calls fn() back to back for `seconds` (after 1 s of warm-up); returns (calls a second,
    the nvidia-smi rows seen while the timed calls ran)."""
    t_end = time.time() + 1.0
    while time.time() < t_end:
        fn()
    torch.cuda.synchronize()
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu",
                            "--format=csv,noheader,nounits", "-lms", "50"],
                           stdout=subprocess.PIPE, text=True)
    t0 = time.time()
    n = 0
    while time.time() - t0 < seconds:
        for _ in range(5):
            fn()
        n += 5
        torch.cuda.synchronize()
    dt = time.time() - t0
    smi.terminate()
    rows = []
    for line in smi.communicate()[0].splitlines():
        try:
            rows.append([float(x) for x in line.split(",")])
        except ValueError:
            pass
    return n / dt, rows


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
    for m in a.methods.split(","):
        if m == "flashkit":
            fk = Flashkit(q, k, v, a.causal)
            fk.fwd()
            fn = fk.bwd if a.which == "bwd" else fk.fwd
        else:
            fwd, bwd = sdpa_fns(BACKENDS[m], q, k, v, a.causal)
            fn = bwd if a.which == "bwd" else fwd
        rate, rows = sample(fn, a.seconds)
        clk = [r[0] for r in rows]
        pw = [r[1] for r in rows]
        tc = [r[2] for r in rows]
        print(f"d{d} s{s} {'causal' if a.causal else 'dense'} {a.which} {m:9s}: "
              f"{1e3 / rate:8.3f} ms/call {f * rate / 1e12:6.1f} TFLOP/s | SM MHz median "
              f"{statistics.median(clk):.0f} min {min(clk):.0f} | W median {statistics.median(pw):.0f} "
              f"max {max(pw):.0f} | C {max(tc):.0f} ({len(rows)} samples)", flush=True)


if __name__ == "__main__":
    main()
