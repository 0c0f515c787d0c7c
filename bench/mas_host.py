"""Host time of the pieces of a maximum_path call on CUDA (bench/NOTES-mas.md v18): each piece
run N times behind a long GPU sleep (so the GPU never waits for the host), timed on the host.
B = 32, T (default 128), S = 4T, fp32, mask of ones.

usage: PYTHONPATH=python python3 bench/mas_host.py [--T 128] [--n 200]
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--T", type=int, default=128)
    p.add_argument("--n", type=int, default=200)
    args = p.parse_args()
    import torch

    import flashkit
    from flashkit import _C
    from flashkit import mas as fmas
    from profile_mas import inputs

    _, value, mask, tx, ty, pth = inputs(torch, 32, args.T)
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
        best = []
        for _ in range(3):
            torch.cuda.synchronize()
            torch.cuda._sleep(200_000_000)
            t0 = time.perf_counter()
            for _ in range(args.n):
                fn()
            best.append((time.perf_counter() - t0) / args.n)
            torch.cuda.synchronize()
        print(f"{name:42s} {min(best) * 1e6:7.2f} us (min of 3 x {args.n})", flush=True)


if __name__ == "__main__":
    main()
