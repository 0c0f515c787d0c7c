"""Host time per call of flashkit's torch entry points on problems too small for the GPU to
matter (wall time of back-to-back calls, then a sync): what a short kernel cannot hide.
  python3 bench/host_overhead.py [--device cuda|cpu]"""
import argparse
import time

import torch

import flashkit


def per_call_us(fn, device, n=300):
    for _ in range(20):
        fn()
    if device == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    if device == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t) / n * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--out", help="ignored (tests/gpu/run passes it to every bench script)")
    ap.add_argument("--profile", action="store_true",
                    help="also where forward + backward spends its host time (cProfile, torch.profiler)")
    args = ap.parse_args()
    dev = args.device
    dt = torch.bfloat16 if dev == "cuda" else torch.float32
    b, s, h, d = 1, 128, 2, 64
    q, k, v = (torch.randn(b, s, h, d, device=dev, dtype=dt, requires_grad=True) for _ in range(3))
    qn, kn, vn = (t.detach() for t in (q, k, v))
    do = torch.randn(b, s, h, d, device=dev, dtype=dt)
    mask = torch.ones(1, 1, 1, 1, dtype=torch.uint8, device=dev)

    def both():
        q.grad = k.grad = v.grad = None
        flashkit.attention(q, k, v).backward(do)

    cases = {
        "attention fwd, no grad": lambda: flashkit.attention(qn, kn, vn),
        "attention fwd, grad": lambda: flashkit.attention(q, k, v),
        "attention fwd, grad, block mask": lambda: flashkit.attention(q, k, v, block_mask=mask),
        "attention fwd + bwd": both,
    }
    ctx = 256
    qd = torch.randn(b, 1, h, d, device=dev, dtype=dt)
    kc, vc = (torch.randn(b, ctx, h, d, device=dev, dtype=dt) for _ in range(2))
    seqlens = torch.full((b,), ctx, dtype=torch.int32, device=dev)
    plan = flashkit.make_decode_plan(qd, kc, [ctx] * b)
    cases["decode with plan"] = lambda: flashkit.decode(qd, kc, vc, seqlens, plan=plan)
    value = torch.randn(4, 32, 128, device=dev)
    pmask = torch.ones(4, 32, 128, device=dev)
    cases["maximum_path"] = lambda: flashkit.maximum_path(value, pmask, check=False)
    print(f"# host time per call ({dev}, torch {torch.__version__})")
    for name, fn in cases.items():
        print(f"{per_call_us(fn, dev):8.1f} us  {name}")
    if args.profile:
        import cProfile
        import pstats
        from torch.profiler import ProfilerActivity, profile
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(100):
            both()
        pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(15)
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev == "cuda" else [])
        with profile(activities=acts) as prof:
            for _ in range(50):
                both()
            if dev == "cuda":
                torch.cuda.synchronize()
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))


if __name__ == "__main__":
    main()
