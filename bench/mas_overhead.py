"""Where the drop-in's time goes at a short text (bench/NOTES-mas.md v18): for B = 32, S = 4T,
N(0, 1) fp32 (bench/mas.py's inputs), (1) bench/mas.py's timer (L2 flushed, events around one
call on an idle stream: host work + launch + kernels) for the drop-in and for the extension call
alone; (2) the GPU time alone: a CUDA graph of [L2 flush, call] replayed, minus a graph of the
flush alone; (3) the host time of a call: calls enqueued behind a long GPU sleep, timed on the host.

usage: PYTHONPATH=python python3 bench/mas_overhead.py [--Ts 128,256] [--reps 30]
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
            # host time: enqueued behind a 20 ms sleep, so the GPU never waits for the host
            host = []
            for _ in range(5):
                torch.cuda.synchronize()
                torch.cuda._sleep(40_000_000)
                t0 = time.perf_counter()
                for _ in range(20):
                    call()
                host.append((time.perf_counter() - t0) / 20)
                torch.cuda.synchronize()
            # GPU time: graphs of [flush, call] and [flush]
            try:
                gpu = gpu_time(torch, timer, call, args.reps)
            except Exception as e:  # noqa: BLE001 (report, keep the other numbers)
                gpu = float("nan")
                print("graph failed:", e)
            print(f"T={T:5d} {name:16s} timer {med * 1e3:7.1f} us | host {statistics.median(host) * 1e6:6.1f} us"
                  f" | gpu (graph, cold L2) {gpu * 1e3:7.1f} us", flush=True)
        del value, mask, pth
        torch.cuda.empty_cache()


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
