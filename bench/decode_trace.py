"""Where a decode call's time goes, per CTA (bench/NOTES-decode.md, session 32). Needs an
extension whose decode objects were built with -DFK_DECODE_TRACE (src/cuda/decode/trace.h): each
call then syncs and prints one "decode trace:" line to stderr (the launch ramp, the first stage's
arrival, the spread of the CTAs' mainloop ends, Lean hosts' waits, the exits). Each shape and
schedule runs --calls times behind a 256 MiB L2 flush, as bench/decode.py times them; the CUDA
event time of each call is printed before its trace line, and cuDNN's beside them (--cudnn).
usage: FLASHKIT_EXT_DIR=<package with the traced _C> python3 bench/decode_trace.py \
           --shapes 128,1,56,65536 --schedules lean,split_kv"""
import argparse
import os
import sys

os.environ.setdefault("FLASHKIT_DECODE_TRACE", "1")
import torch  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
import decode as bench_decode  # noqa: E402


def timed(fn, flush):
    flush.zero_()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", nargs="*", default=["128,1,56,65536", "64,1,56,65536"])
    ap.add_argument("--schedules", default="lean,split_kv")
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--cudnn", action="store_true")
    args = ap.parse_args()
    C = bench_decode.load_extension()
    stream = torch.cuda.current_stream().cuda_stream
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    for spec in args.shapes:
        d, b, h, ctx = (int(x) for x in spec.split(","))
        q, k, v, lens, out, lse = bench_decode.decode_inputs(d, b, h, ctx)
        for sched in args.schedules.split(","):
            plan = C.make_decode_plan(b, 1, h, h, d, "bfloat16", [ctx] * b, schedule=sched, device="cuda")
            print(f"== d{d} b{b} h{h} ctx{ctx} {sched}: {plan}", flush=True)
            for i in range(args.calls):
                us = timed(lambda: C.decode(q, k, v, lens, None, out, lse, plan, 0.0, stream), flush)
                print(f"call {i}: {us:.1f} us (event, includes the trace's sync)", flush=True)
        if args.cudnn:
            qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))

            def sdpa():
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    torch.nn.functional.scaled_dot_product_attention(qt, kt, vt)
            sdpa()
            us = sorted(timed(sdpa, flush) for _ in range(5))
            print(f"== d{d} b{b} h{h} ctx{ctx} cudnn: median {us[2]:.1f} us", flush=True)
        sys.stderr.flush()


if __name__ == "__main__":
    main()
