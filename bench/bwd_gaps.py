"""Where a backward's time goes under load: for each shape, the method's backward back to back
for --warm seconds (the card at its power limit), then `--calls` calls under torch.profiler: each
kernel's GPU us per call, the kernels' sum, the calls' span per call (first kernel start to last
end, over the calls) and the event-timed ms per call of the same number of calls right after.
Span minus sum is time with no kernel of this stream running (host gaps, launch latency);
span against the event time shows what the profiler adds.
  python3 bench/bwd_gaps.py --methods flashkit,cudnn --hdim 256 --seqlens 2048,8192 --causal"""
import argparse
import time

import torch

from attention import HIDDEN, TOKENS, method_fns
from timing import batch_ms, profile_calls


def one(method, d, causal, s, warm_s, calls):
    b, h = TOKENS // s, HIDDEN // d
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    _, bwd = method_fns(method, q, k, v, causal)
    t0 = time.time()
    while time.time() - t0 < warm_s:
        batch_ms(bwd, 10)
    prof = profile_calls(bwd, calls, 0)
    ev = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    span = (max(e.time_range.end for e in ev) - min(e.time_range.start for e in ev)) / calls
    total = sum(e.time_range.end - e.time_range.start for e in ev) / calls
    ms = batch_ms(bwd, calls) / calls
    print(f"{method} d{d} {'causal' if causal else 'full'} s{s}: event {ms * 1e3:.0f} us, "
          f"span {span:.0f} us, kernels {total:.0f} us", flush=True)
    for e in sorted(prof.key_averages(), key=lambda e: -e.device_time_total):
        if e.device_time_total > 0:
            print(f"   {e.device_time_total / calls:9.1f} us {e.count // calls:3d}x  {e.key[:100]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--methods", default="flashkit,cudnn")
    ap.add_argument("--hdim", type=int, default=256)
    ap.add_argument("--seqlens", default="2048,4096,8192,16384")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--dense", action="store_true", help="also the dense shapes")
    ap.add_argument("--warm", type=float, default=1.0)
    ap.add_argument("--calls", type=int, default=20)
    a = ap.parse_args()
    masks = ([False] if a.dense or not a.causal else []) + ([True] if a.causal else [])
    for causal in masks:
        for s in (int(x) for x in a.seqlens.split(",")):
            for m in a.methods.split(","):
                one(m, a.hdim, causal, s, a.warm, a.calls)


if __name__ == "__main__":
    main()
