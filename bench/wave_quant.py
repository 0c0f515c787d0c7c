"""Wave quantization probe: flashkit's forward and backward (and cuDNN's, same process) at shapes
whose tile counts are an exact multiple of the SM count against the FA2 protocol's shapes
(2048 tiles of 128 rows at hdim 128 = 15.5 waves on 132 SMs). If the time follows the waves,
the rate at an exact multiple is higher by waves / ceil(waves) (bench/NOTES-attention.md,
session 27). ROUNDS=n repeats the list n times (the card's warming moves single passes by up to
10%). PROFILE=1 times flashkit alone by torch.profiler instead (bench/timing.py profiled_us: the
kernel span of a call, and the main kernel's duration), without cuDNN.
  usage: python3 bench/wave_quant.py d:s:b:h[:causal] ...  (default: the d128 set)"""
import math
import os
import sys

import torch

from attention import BACKENDS, Flashkit, flops, sdpa_fns, timed
from timing import profiled_us

DEFAULT = ["128:4096:4:16", "128:4224:4:16", "128:4224:4:15", "128:2048:8:16", "128:2112:8:16",
           "128:8192:2:16", "128:8448:2:16"]


def main():
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rounds = int(os.environ.get("ROUNDS", "1"))
    for spec in (sys.argv[1:] or DEFAULT) * rounds:
        p = spec.split(":")
        d, s, b, h, causal = int(p[0]), int(p[1]), int(p[2]), int(p[3]), "causal" in p[4:]
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        fk = Flashkit(q, k, v, causal)
        f = flops(b, h, s, d, causal)
        r = {"spec": spec, "tiles": b * h * math.ceil(s / 128)}
        r["waves"] = r["tiles"] / sms
        if os.environ.get("PROFILE") == "1":
            fk.fwd()
            for name, fn, mult in (("fwd", fk.fwd, 1.0), ("bwd", fk.bwd, 2.5)):
                span, main_us = profiled_us(fn, match="sm90")
                r[name] = mult * f / span / 1e6
                print(f"{spec:18s} tiles {r['tiles']:5d} waves {r['waves']:6.2f}  {name} span {span:8.1f} us"
                      f" = {r[name]:6.1f} TFLOP/s, main kernel {main_us:8.1f} us", flush=True)
            continue
        cf, cb = sdpa_fns(BACKENDS["cudnn"], q, k, v, causal)
        for name, fn, mult in (("fk_fwd", fk.fwd, 1.0), ("fk_bwd", fk.bwd, 2.5)):
            fk.fwd()
            r[name] = mult * f / timed(fn) / 1e9
        r["cu_fwd"] = f / timed(cf) / 1e9
        r["cu_bwd"] = 2.5 * f / timed(cb) / 1e9
        print(f"{spec:18s} tiles {r['tiles']:5d} waves {r['waves']:6.2f} eff {r['waves'] / math.ceil(r['waves']):.3f}"
              f"  fwd {r['fk_fwd']:6.1f} (cuDNN {r['cu_fwd']:6.1f})  bwd {r['fk_bwd']:6.1f} (cuDNN {r['cu_bwd']:6.1f})",
              flush=True)


if __name__ == "__main__":
    main()
