"""Decode kernels for Nsight Compute, one call each after a warm-up, inside a profiler range:
  ncu --profile-from-start off --section SpeedOfLight ... python3 bench/profile_decode.py \
      [--shapes d,b,h,ctx ...] [--schedules split_kv,lean] [--headmajor] [--cudnn]
bf16, q_len 1, dense cache [b, ctx, h, d] (--headmajor: the same values stored [b, h, ctx, d] and
viewed [b, ctx, h, d]); --cudnn also runs PyTorch SDPA's cudnn backend on torch's contiguous
[b, h, ctx, d] copy, so one ncu run sees both. Knobs (FLASHKIT_DECODE_*) come from the environment."""
import argparse
import os
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(__file__))
import decode as bench_decode  # noqa: E402  (load_extension: _C without the package's __init__)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", nargs="*", default=["64,1,56,65536", "128,1,56,65536"])
    ap.add_argument("--schedules", default="split_kv")
    ap.add_argument("--headmajor", action="store_true")
    ap.add_argument("--cudnn", action="store_true")
    args = ap.parse_args()
    C = bench_decode.load_extension()
    stream = torch.cuda.current_stream().cuda_stream
    calls = []
    for spec in args.shapes:
        d, b, h, ctx = (int(x) for x in spec.split(","))
        q, k, v, lens, out, lse = bench_decode.decode_inputs(d, b, h, ctx)
        layouts = [("", k, v)]
        if args.headmajor:
            layouts.append(("headmajor", k.transpose(1, 2).contiguous().transpose(1, 2),
                            v.transpose(1, 2).contiguous().transpose(1, 2)))
        for sched in args.schedules.split(","):
            plan = C.make_decode_plan(b, 1, h, h, d, "bfloat16", [ctx] * b, schedule=sched, device="cuda")
            for name, kk, vv in layouts:
                print(spec, sched, name, plan, flush=True)
                calls.append(lambda kk=kk, vv=vv, plan=plan, q=q, lens=lens, out=out, lse=lse:
                             C.decode(q, kk, vv, lens, None, out, lse, plan, 0.0, stream))
        if args.cudnn:
            qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))

            def sdpa(qt=qt, kt=kt, vt=vt):
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    torch.nn.functional.scaled_dot_product_attention(qt, kt, vt)
            calls.append(sdpa)
    for fn in calls:  # warm-up (plans' first launches, cuDNN's graph build)
        fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for fn in calls:
        fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


if __name__ == "__main__":
    main()
