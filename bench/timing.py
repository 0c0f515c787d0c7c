"""CUDA-event timing shared by the bench scripts: the median of `reps` timed calls after
`warmup` untimed ones (warm-up keeps module loads and allocator growth out of the numbers).
per_call > 1 times batches of that many back-to-back calls and returns the median per call (the
A/B harnesses' protocol, bench/ab_common.cuh: no host gaps between calls)."""
import torch


def median_ms(fn, reps=10, warmup=2, per_call=1):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(per_call):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / per_call)
    times.sort()
    return times[len(times) // 2]
