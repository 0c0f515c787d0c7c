"""GPU timing shared by the bench scripts. median_ms: CUDA events, the median of `reps` timed
calls after `warmup` untimed ones (warm-up keeps module loads and allocator growth out of the
numbers); per_call > 1 times batches of that many back-to-back calls and returns the median per
call (the A/B harnesses' protocol, bench/ab_common.cuh: no host gaps between calls); batch_ms
times one such batch.
profile_calls: torch.profiler's record of back-to-back calls; profiled_us: from it, the calls'
kernel span and a named kernel's duration."""
import torch


def batch_ms(fn, calls):
    """ms of `calls` back-to-back calls of fn() between two CUDA events (waits for the last)."""
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(calls):
        fn()
    b.record()
    b.synchronize()
    return a.elapsed_time(b)


def median_ms(fn, reps=10, warmup=2, per_call=1):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = sorted(batch_ms(fn, per_call) / per_call for _ in range(reps))
    return times[len(times) // 2]


def profile_calls(fn, calls, warmup=3, warm=None):
    """torch.profiler's record of `calls` back-to-back calls of fn(), after `warmup` calls of
    warm() (fn by default) and a synchronize."""
    from torch.profiler import ProfilerActivity, profile
    for _ in range(warmup):
        (warm or fn)()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    return prof


def profiled_us(fn, calls=10, warmup=3, match=""):
    """GPU times of `calls` back-to-back calls of fn() by torch.profiler (after `warmup`): the
    span of all their kernels per call, and the median duration of the kernels whose name holds
    `match` (0 when none): the card's own clock, without the host gaps an event pair can hold."""
    prof = profile_calls(fn, calls, warmup)
    ev = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    span = (max(e.time_range.end for e in ev) - min(e.time_range.start for e in ev)) / calls
    hits = sorted(e.time_range.end - e.time_range.start for e in ev if match in e.name)
    return span, hits[len(hits) // 2] if hits else 0.0
