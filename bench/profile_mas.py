"""flashkit's GPU MAS alone, for profiling: bench/mas.py's inputs (B = 32, S = 4T, N(0, 1) fp32,
mask of ones) and timer (L2 flushed, median of reps), three variants per T: the drop-in
maximum_path, the kernels writing durations only, the kernels writing the path. --once makes one
call of each instead, then one more after an L2 flush (to run under ncu: --kernel-name
regex:mas_forward; with FLASHKIT_MAS_TRACE=1, the phase clocks of both). --fused times the fused
likelihood instead (bench/mas.py's z, m, logs with C = 192 channels; durations only, and the path).

usage: PYTHONPATH=python python3 bench/profile_mas.py [--Ts 128,2048] [--reps 10] [--once] [--fused]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def inputs(torch, B, T):
    """bench/mas.py's problem at text length T: N(0, 1) fp32 value [B, T, 4T], a mask of ones,
    full lengths, and a path buffer; the generator they were drawn from (seeded with T)."""
    S = 4 * T
    gen = torch.Generator(device="cuda").manual_seed(T)
    value = torch.randn((B, T, S), dtype=torch.float32, device="cuda", generator=gen)
    mask = torch.ones((B, T, S), dtype=torch.int32, device="cuda")
    tx = torch.full((B,), T, dtype=torch.int32, device="cuda")
    ty = torch.full((B,), S, dtype=torch.int32, device="cuda")
    pth = torch.empty((B, T, S), dtype=torch.float32, device="cuda")
    return gen, value, mask, tx, ty, pth


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--Ts", default="128,2048")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--once", action="store_true")
    p.add_argument("--fused", action="store_true")
    p.add_argument("--out", help="ignored (tests/gpu/run passes it to every bench script)")
    args = p.parse_args()
    import torch

    import flashkit
    from flashkit import _C as fk_C
    from mas import CHANNELS, WARMUP_MS, Timer

    timer = Timer(torch)
    B = args.batch
    for T in [int(t) for t in args.Ts.split(",")]:
        S = 4 * T
        gen, value, mask, tx, ty, pth = inputs(torch, B, T)
        dur = torch.empty((B, T), dtype=torch.int32, device="cuda")
        stream = torch.cuda.current_stream().cuda_stream
        if args.fused:
            del value, mask
            C = CHANNELS
            z = torch.randn((B, C, S), device="cuda", generator=gen)
            m = torch.randn((B, C, T), device="cuda", generator=gen)
            logs = 0.5 * torch.randn((B, C, T), device="cuda", generator=gen)
            value = mask = None
            variants = {
                "fused durations": lambda _: flashkit.monotonic_alignment_search_fused(
                    z, m, logs, tx, ty, return_path=False, return_durations=True, check=False),
                "fused path": lambda _: flashkit.monotonic_alignment_search_fused(
                    z, m, logs, tx, ty, check=False),
            }
        else:
            variants = {
                "drop-in": lambda _: flashkit.maximum_path(value, mask, check=False),
                "kernels durations": lambda _: fk_C.monotonic_alignment_search(
                    value, tx, ty, None, dur, -1e9, None, stream),
                "kernels path": lambda _: fk_C.monotonic_alignment_search(
                    value, tx, ty, pth, None, -1e9, None, stream),
            }
        for name, call in variants.items():
            call(None)
            if args.once:  # and once more from a flushed L2, as the timed calls run
                torch.cuda.synchronize()
                timer.flush.zero_()
                torch.cuda.synchronize()
                call(None)
                torch.cuda.synchronize()
                continue
            med, _, _ = timer.run(call, args.reps, warmup_ms=WARMUP_MS)
            print(f"T={T:5d} {name:18s} {med * 1e3:9.1f} us", flush=True)
        del value, mask, pth, variants
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
