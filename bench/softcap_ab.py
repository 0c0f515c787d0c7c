"""A/B of the Hopper softcap forward's exponentials (session 30; FLASHKIT_SM90_SOFTCAP_EXP, read
per call by the launcher of branch s30-softcap-exp; main has no such knob, so there every variant
runs main's kernel): -1 as before, 0 softcap's outer factor folded into the softmax scale,
2 / 3 that and 2 or 3 of every 8 exp2 on the FMA pipe. First each variant's error against an
fp64 reference on small problems (O poisoned: the outputs are fresh tensors), then the forward
of plain and of each variant interleaved under load (bench/sustained.py), hdim 128, b2 h16 s8k.
  python3 bench/softcap_ab.py [--variants -1,0,2,3] [--rounds 3]"""
import argparse
import math
import os

import torch

import flashkit
from sustained import ClockLog, interleaved, save_rows

CAP = 30.0


def reference(q, k, v, causal):
    qd, kd, vd = (x.double().transpose(1, 2) for x in (q, k, v))
    s = qd @ kd.transpose(-1, -2) / math.sqrt(q.shape[-1])
    s = CAP * torch.tanh(s / CAP)
    if causal:
        n, m = s.shape[-2:]
        s = s.masked_fill(torch.ones(n, m, dtype=torch.bool, device=s.device).triu(m - n + 1), -math.inf)
    return (torch.softmax(s, -1) @ vd).transpose(1, 2)


def run(variant, q, k, v, causal):
    os.environ["FLASHKIT_SM90_SOFTCAP_EXP"] = str(variant)
    return flashkit.attention(q, k, v, causal=causal, softcap=CAP)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", default="-1,0,2,3")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    variants = [int(x) for x in a.variants.split(",")]
    torch.manual_seed(0)
    for causal in (False, True):
        for b, h, s, sk in ((1, 4, 777, 777), (2, 2, 300, 1029)):
            q = torch.randn(b, s, h, 128, device="cuda", dtype=torch.bfloat16) * 2
            k, v = (torch.randn(b, sk, h, 128, device="cuda", dtype=torch.bfloat16) * 2 for _ in range(2))
            ref = reference(q, k, v, causal)
            errs = []
            with torch.no_grad():
                for var in variants:
                    o = run(var, q, k, v, causal)
                    errs.append(f"{var}: {(o.double() - ref).abs().max().item():.2e}"
                                f"{' NaN' if not torch.isfinite(o).all() else ''}")
            print(f"check {'causal' if causal else 'full'} b{b} h{h} sq{s} sk{sk}: max|O - ref| " + ", ".join(errs))
    clocks = ClockLog()
    rows = []
    b, h, s, d = 2, 16, 8192, 128
    for causal in (False, True):
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        flops = 4 * b * h * s * s * d / (2 if causal else 1)
        fns = {"plain": lambda: flashkit.attention(q, k, v, causal=causal)}
        for var in variants:
            fns[f"softcap{var}"] = (lambda var=var: run(var, q, k, v, causal))
        with torch.no_grad():
            got = interleaved(fns, clocks, rounds=a.rounds)
        base = got["plain"][0]
        for name, (ms, mhz, w) in got.items():
            rows.append({"case": name, "causal": causal, "ms": ms, "tflops": flops / ms / 1e9,
                         "cost": ms / base - 1, "sm_mhz": mhz, "watts": w})
            print(f"{'causal' if causal else 'full  '} {name:10s} {ms:7.3f} ms {flops / ms / 1e9:6.0f} TFLOP/s "
                  f"cost {100 * (ms / base - 1):+5.1f}%  {mhz or 0:.0f} MHz {w or 0:.0f} W", flush=True)
    clocks.close()
    save_rows(a.out, rows)


if __name__ == "__main__":
    main()
