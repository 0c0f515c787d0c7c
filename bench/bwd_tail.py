"""One flashkit backward per shape, timed alone (median of 30 batches of 5 back-to-back calls) and
then once under torch.profiler, printing each kernel's start and end (us from the first kernel's
start), to see whether the dQ conversion / dQ pass runs beside the main kernel's last wave
(bench/NOTES-attention.md "Backward v12"; FLASHKIT_BWD_TAIL=0 turns it off).
  python3 bench/bwd_tail.py 128:2048 128:2048:causal 64:2048 256:2048"""
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(__file__))
from attention import Flashkit, flops  # noqa: E402
from timing import median_ms  # noqa: E402


def main():
    for spec in sys.argv[1:] or ["128:2048"]:
        parts = spec.split(":")
        d, s, causal = int(parts[0]), int(parts[1]), "causal" in parts[2:]
        b, h = max(1, 16384 // s), 2048 // d
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        fk = Flashkit(q, k, v, causal)
        fk.fwd()
        ms = median_ms(fk.bwd, reps=30, warmup=3, per_call=5)
        tf = 2.5 * flops(b, h, s, d, causal) / ms / 1e9
        print(f"d{d} {'causal' if causal else 'dense'} s{s} b{b} h{h}: bwd {ms * 1e3:.1f} us, {tf:.1f} TFLOP/s")
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fk.bwd()
            torch.cuda.synchronize()
        kernels = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
                         key=lambda e: e.time_range.start)
        t0 = kernels[0].time_range.start if kernels else 0
        for e in kernels:
            print(f"   {e.time_range.start - t0:8.1f} .. {e.time_range.end - t0:8.1f}  {e.name[:70]}")


if __name__ == "__main__":
    main()
