"""The Hopper backward's wave quantization (bench/NOTES-attention.md, session 27): hdim 128 dense
at 4096 / 8192 keys (2048 key-block CTAs = 15.5 waves on 132 SMs) against 4224 / 8448 (2112 =
16 waves), three rounds; per call the span of the backward's kernels and the main kernel's
duration, by torch.profiler.  PYTHONPATH=python:bench python3 bench/bwd_wave_probe.py"""
import sys, torch
sys.path.insert(0, "bench")
from attention import Flashkit, flops
from torch.profiler import profile, ProfilerActivity
for rnd in range(3):
    for s in (4096, 4224, 8192, 8448):
        b, h, d = (4, 16, 128) if s < 8000 else (2, 16, 128)
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        fk = Flashkit(q, k, v, False); fk.fwd()
        for _ in range(3): fk.bwd()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(5): fk.bwd()
            torch.cuda.synchronize()
        ev = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        main = sorted(e.time_range.end - e.time_range.start for e in ev if "Bwd" in e.name and "Kernel" in e.name or "bwd_kernel" in e.name.lower())
        t0 = min(e.time_range.start for e in ev); t1 = max(e.time_range.end for e in ev)
        span = (t1 - t0) / 5
        f = 2.5 * flops(b, h, s, d, False)
        names = sorted(set(e.name[:40] for e in ev))
        print(f"r{rnd} s{s} b{b}: span/call {span:.1f} us = {f/span/1e6:.1f} TFLOP/s; main kernel median {main[len(main)//2] if main else -1:.1f}  tiles {b*h*(s//128)}", flush=True)
        if rnd == 0 and s == 4096: print(names)
