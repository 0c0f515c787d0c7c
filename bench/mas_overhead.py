"""Where the drop-in's time goes at a short text (bench/NOTES-mas.md v18): for B = 32, S = 4T,
N(0, 1) fp32 (bench/mas.py's inputs), (1) bench/mas.py's timer (L2 flushed, events around one
call on an idle stream: host work + launch + kernels) for the drop-in and for the extension call
alone; (2) the GPU time alone: a CUDA graph of [L2 flush, call] replayed, minus a graph of the
flush alone; (3) the host time of a call: calls enqueued behind a long GPU sleep, timed on the host
(--pieces: also of each piece of a drop-in call: the allocation, the checks, the extension call).

usage: PYTHONPATH=python python3 bench/mas_overhead.py [--Ts 128,256] [--reps 30] [--pieces]
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--Ts", default="128,256")
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--pieces", action="store_true", help="also the host time of each piece")
    p.add_argument("--out", help="ignored")
    args = p.parse_args()
    import torch

    import flashkit
    from flashkit import _C as fk_C
    from mas import WARMUP_MS, Timer
    from profile_mas import inputs

    timer = Timer(torch)
    B = 32
    for T in [int(t) for t in args.Ts.split(",")]:
        _, value, mask, tx, ty, pth = inputs(torch, B, T)
        calls = {
            "drop-in": lambda: flashkit.maximum_path(value, mask, check=False),
            "extension, path": lambda: fk_C.monotonic_alignment_search(
                value, tx, ty, pth, None, -1e9, None, torch.cuda.current_stream().cuda_stream),
        }
        for name, call in calls.items():
            med, _, _ = timer.run(lambda _: call(), args.reps, warmup_ms=WARMUP_MS)
            host = host_time(torch, call, 20, 5)
            # GPU time: graphs of [flush, call] and [flush]
            try:
                gpu = gpu_time(torch, timer, call, args.reps)
            except Exception as e:  # noqa: BLE001 (report, keep the other numbers)
                gpu = float("nan")
                print("graph failed:", e)
            print(f"T={T:5d} {name:16s} timer {med * 1e3:7.1f} us | host {host * 1e6:6.1f} us"
                  f" | gpu (graph, cold L2) {gpu * 1e3:7.1f} us", flush=True)
        if args.pieces:
            host_pieces(torch, flashkit, value, mask, tx, ty, pth)
        del value, mask, pth
        torch.cuda.empty_cache()


def host_time(torch, fn, n, rounds):
    """Host seconds of one fn() call: n calls enqueued behind a long GPU sleep (so the GPU never
    waits for the host), the smallest of `rounds` rounds."""
    best = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        torch.cuda._sleep(200_000_000)
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best.append((time.perf_counter() - t0) / n)
        torch.cuda.synchronize()
    return min(best)


def host_pieces(torch, flashkit, value, mask, tx, ty, pth):
    """Host time of the pieces of a maximum_path call on CUDA."""
    from flashkit import _C
    from flashkit import mas as fmas

    stream = torch.cuda.current_stream().cuda_stream
    fast = fmas._torch_cuda_fast(value, mask)
    shape, vstride, mstride = value.shape, value.stride(), mask.stride()
    pieces = {
        "torch.empty_like(value)": lambda: torch.empty_like(value, memory_format=torch.contiguous_format),
        "_torch_cuda_fast": lambda: fmas._torch_cuda_fast(value, mask),
        "data_ptr/stride/get_device x7": lambda: (value.data_ptr(), value.stride(), value.get_device(),
                                                  mask.data_ptr(), mask.stride(), mask.get_device(),
                                                  pth.data_ptr()),
        "_raw_stream": lambda: fmas._raw_stream(0),
        "_C.maximum_path_raw (launch incl.)": lambda: _C.maximum_path_raw(
            value.data_ptr(), fast[0], shape, vstride, 0, mask.data_ptr(), fast[1], mstride, 0,
            pth.data_ptr(), False, -1e9, 0, stream),
        "flashkit.maximum_path (drop-in)": lambda: flashkit.maximum_path(value, mask, check=False),
        "_C.monotonic_alignment_search (tensors)": lambda: _C.monotonic_alignment_search(
            value, tx, ty, pth, None, -1e9, None, stream),
        "torch.cuda._sleep(0) (a bare launch)": lambda: torch.cuda._sleep(0),
    }
    for name, fn in pieces.items():
        fn()
        print(f"  host {name:42s} {host_time(torch, fn, 200, 3) * 1e6:7.2f} us", flush=True)


def gpu_time(torch, timer, call, reps):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            timer.flush.zero_()
            call()
    torch.cuda.current_stream().wait_stream(s)
    g_both, g_flush = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    with torch.cuda.graph(g_both):
        timer.flush.zero_()
        call()
    with torch.cuda.graph(g_flush):
        timer.flush.zero_()

    def replay(g, n=reps):
        out = []
        for _ in range(n):
            torch.cuda.synchronize()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            g.replay()
            b.record()
            torch.cuda.synchronize()
            out.append(a.elapsed_time(b))
        return statistics.median(out)

    replay(g_both, 3)
    return replay(g_both) - replay(g_flush)


if __name__ == "__main__":
    main()
