"""A/B of the Hopper dense forward's split tail (bench/NOTES-attention.md "Forward v11") in one
process: flashkit's forward with FLASHKIT_SM90_FWD_SPLIT=1 (the default) and =0, interleaved over
`ROUNDS` rounds (alternating which goes first), and cuDNN's forward on the same inputs; the FA2 protocol's dense shapes
(batch * seqlen = 16k, hidden 2048). Prints each configuration's median TFLOP/s over the rounds.
  python3 bench/fwd_split_ab.py [hdims, default 64,128,256] [seqlens, default 2048,4096,8192,16384]"""
import math
import os
import statistics
import sys

import torch

from attention import BACKENDS, Flashkit, flops, sdpa_fns, timed


def main():
    hdims = [int(x) for x in (sys.argv[1] if len(sys.argv) > 1 else "64,128,256").split(",")]
    seqlens = [int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "2048,4096,8192,16384").split(",")]
    rounds = int(os.environ.get("ROUNDS", "3"))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"{torch.cuda.get_device_name(0)}, {sms} SMs, {rounds} rounds", flush=True)
    for d in hdims:
        for s in seqlens:
            b, h = 16384 // s, 2048 // d
            q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            fk = Flashkit(q, k, v, False)
            cu = sdpa_fns(BACKENDS["cudnn"], q, k, v, False)[0]
            f = flops(b, h, s, d, False)
            res = {"split": [], "whole": [], "cudnn": []}
            for rnd in range(rounds):
                order = (("split", "1"), ("whole", "0"))
                for name, env in order if rnd % 2 == 0 else order[::-1]:  # alternate who goes first
                    os.environ["FLASHKIT_SM90_FWD_SPLIT"] = env
                    res[name].append(f / timed(fk.fwd) / 1e9)
                res["cudnn"].append(f / timed(cu) / 1e9)
            os.environ.pop("FLASHKIT_SM90_FWD_SPLIT", None)
            # the outputs of both, against each other
            os.environ["FLASHKIT_SM90_FWD_SPLIT"] = "1"
            fk.fwd()
            o1, l1 = fk.out.clone(), fk.lse.clone()
            os.environ["FLASHKIT_SM90_FWD_SPLIT"] = "0"
            fk.fwd()
            os.environ.pop("FLASHKIT_SM90_FWD_SPLIT", None)
            do = (fk.out.float() - o1.float()).abs().max().item()
            dl = (fk.lse - l1).abs().max().item()
            bm = 192 if d <= 64 else 128
            tiles = b * h * math.ceil(s / bm)
            med = {k2: statistics.median(v2) for k2, v2 in res.items()}
            print(f"d{d} s{s:5d} tiles {tiles} ({tiles / sms:.2f} waves)  split {med['split']:6.1f}  "
                  f"whole {med['whole']:6.1f}  ({med['split'] / med['whole']:.3f}x)  cuDNN {med['cudnn']:6.1f}  "
                  f"split/cuDNN {med['split'] / med['cudnn']:.3f}  max|dO| {do:.2e} max|dLSE| {dl:.2e}  "
                  f"rounds split {' '.join(f'{x:.0f}' for x in res['split'])} whole {' '.join(f'{x:.0f}' for x in res['whole'])}",
                  flush=True)


if __name__ == "__main__":
    main()
