"""FlashAttention-2 paper protocol (Figs. 4-6) on one GPU: batch * seqlen = 16k tokens, hidden
2048 (heads = 2048 / hdim), hdim 64/128/256, causal off/on, seqlen 512..16k, bf16. Times forward,
backward and forward+backward (CUDA events, median after warm-up) of flashkit (through
flashkit._C on torch tensors) and PyTorch SDPA's flash (FA2), cudnn, efficient and math
backends, all in this process on the same inputs; then peak memory of forward+backward vs
seqlen for flashkit and math. Writes <out>/<date>-<gpu>-<name>.json (+ PNGs when
matplotlib is there; bench/plot_attention.py draws them from the JSON otherwise).
"flashkit" is the library's own choice of kernels (the Hopper forward and backward on sm_90 where
they exist); "flashkit-sm80" forces the sm80-class ones (FLASHKIT_ATTENTION_PATH=sm80).
usage: PYTHONPATH=python python3 bench/attention.py --out DIR [--quick]  (or FK_BENCH_QUICK=1)
       [--methods flashkit,flashkit-sm80,flash,cudnn] [--fwd-only] [--name attention-sm90]
       [--hdims 64,128] [--seqlens 2048,8192] [--protocol sustained]
--protocol burst (the default): each method and pass timed alone (timed() below: a ~150 ms burst
after its own warm-up). --protocol sustained: the card held under load and the methods
interleaved per shape, with their SM clocks and power recorded (bench/sustained.py says why).
"flashkit-fp8": the FP8 forward (flashkit.attention_fp8 on e4m3 copies of the
inputs, unit descales), forward only."""
import argparse
import json
import os
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from flashkit import _C
from sustained import ClockLog, interleaved
from timing import median_ms

DATE = time.strftime("%Y-%m-%d")  # of the run, for the result files' names

TOKENS, HIDDEN = 16384, 2048
SEQLENS = [512, 1024, 2048, 4096, 8192, 16384]
BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}


def timed(fn, budget_ms=150.0, per_call=5):
    """Median per call of repeats (3..20, about budget_ms in all) of `per_call` back-to-back calls
    after two warm-up calls. Batches, not single calls between two events: a single call's time
    would include the host's dispatch before its first kernel (torch.autograd.grad's is ~0.1-0.2
    ms, which made cuDNN's 2k backward read 18% slow against the harnesses' batched timing)."""
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    est = (time.perf_counter() - t0) * 1e3
    reps = max(3, min(20, int(budget_ms / max(est * per_call, 1e-3))))
    return median_ms(fn, reps, warmup=0, per_call=per_call)


def flops(b, h, s, d, causal):
    f = 4 * b * h * s * s * d
    return f / 2 if causal else f


class Flashkit:
    def __init__(self, q, k, v, causal, path="auto"):
        self.path = path
        self.q, self.k, self.v, self.causal = q, k, v, causal
        b, s, h, d = q.shape
        self.out = torch.empty_like(q)
        self.lse = torch.empty(b, h, s, device=q.device, dtype=torch.float32)
        self.dout = torch.randn_like(q)
        self.dq, self.dk, self.dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        n = _C.attention_backward_workspace_bytes(q, k, causal)
        self.ws = torch.empty(max(n, 1), device=q.device, dtype=torch.uint8)
        self.stream = torch.cuda.current_stream().cuda_stream

    def fwd(self):
        os.environ["FLASHKIT_ATTENTION_PATH"] = self.path  # read by the library on every call
        _C.attention_forward_into(self.q, self.k, self.v, self.out, self.lse, 0.0, self.causal, self.stream)

    def bwd(self):
        os.environ["FLASHKIT_ATTENTION_PATH"] = self.path
        _C.attention_backward_into(self.q, self.k, self.v, self.out, self.dout, self.lse, self.dq,
                                   self.dk, self.dv, 0.0, self.causal, False, self.stream, self.ws)


def sdpa_fns(backend, q, k, v, causal):
    # SDPA wants [b, h, s, d]; transposed views of the same [b, s, h, d] storage.
    qt, kt, vt = (x.detach().transpose(1, 2).requires_grad_() for x in (q, k, v))
    dout = torch.randn_like(qt)

    def fwd():
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)

    with torch.no_grad():
        fwd()  # raises here when the backend cannot take this problem
    out = fwd()

    def bwd():
        torch.autograd.grad(out, (qt, kt, vt), dout, retain_graph=True)

    def fwd_nograd():
        with torch.no_grad():
            fwd()

    return fwd_nograd, bwd


def timed_clocked(fn, clocks):
    """timed(fn) and the medians of the SM clock and board power sampled meanwhile (None, None
    without a clock log)."""
    t0 = time.time()
    ms = timed(fn)
    return (ms,) + (clocks.between(t0, time.time()) if clocks else (None, None))


def shapes(hdims, seqlens):
    """The protocol's problems in order: (hdim, causal, seqlen, batch, heads, q, k, v, flops),
    fresh random inputs [b, s, h, d] for each."""
    for d in hdims:
        h = HIDDEN // d
        for causal in (False, True):
            for s in seqlens:
                b = TOKENS // s
                q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
                yield d, causal, s, b, h, q, k, v, flops(b, h, s, d, causal)


def shape_line(d, causal, s, rows):
    """One printed line of a shape's rows: TFLOP/s forward / backward (and clocks when known)."""
    line = f"d{d:<3} {'causal' if causal else 'full  '} s{s:<5}"
    for r in rows:
        if "fwd_tflops" in r:
            line += f" | {r['method']} {r['fwd_tflops']:.0f}/{r.get('bwd_tflops', 0):.0f}"
            if r.get("fwd_sm_mhz"):
                line += f" @{r['fwd_sm_mhz']:.0f}/{r.get('bwd_sm_mhz') or 0:.0f}MHz"
    return line


def method_fns(m, q, k, v, causal):
    """(fwd, bwd) callables of method m on one shape; bwd None where the method has none."""
    if m == "flashkit-fp8":
        import flashkit
        q8, k8, v8 = (x.to(torch.float8_e4m3fn) for x in (q, k, v))
        return (lambda: flashkit.attention_fp8(q8, k8, v8, causal=causal)), None
    if m.startswith("flashkit"):
        fk = Flashkit(q, k, v, causal, "sm80" if m == "flashkit-sm80" else "auto")
        fk.fwd()
        return fk.fwd, fk.bwd
    return sdpa_fns(BACKENDS[m], q, k, v, causal)


def measure_speed(hdims, seqlens, methods, fwd_only=False, clocks=None):
    """The burst protocol: each method and pass timed alone (timed()), in the order given; with a
    ClockLog, each row also carries the SM clock (MHz) and board power (W) of its timed bursts."""
    rows = []
    for d, causal, s, b, h, q, k, v, f in shapes(hdims, seqlens):
        for m in methods:
            row = {"method": m, "hdim": d, "causal": causal, "seqlen": s, "batch": b, "heads": h}
            try:
                if m == "math" and s > 4096:
                    raise RuntimeError("skipped: quadratic memory/time")
                fwd, bwd = method_fns(m, q, k, v, causal)
                tf, mhz, w = timed_clocked(fwd, clocks)
                row.update(fwd_ms=tf, fwd_tflops=f / tf / 1e9, fwd_sm_mhz=mhz, fwd_watts=w)
                if bwd and not fwd_only:
                    tb, mhz, w = timed_clocked(bwd, clocks)
                    row.update(bwd_ms=tb, bwd_tflops=2.5 * f / tb / 1e9,
                               fwd_bwd_tflops=3.5 * f / (tf + tb) / 1e9, bwd_sm_mhz=mhz,
                               bwd_watts=w)
            except Exception as e:  # a backend that cannot run this shape
                row["error"] = str(e).splitlines()[0][:120] if str(e) else type(e).__name__
            rows.append(row)
            torch.cuda.empty_cache()
        print(shape_line(d, causal, s, rows[-len(methods):]), flush=True)
    return rows


def measure_speed_sustained(hdims, seqlens, methods, fwd_only=False, rounds=2):
    """measure_speed under bench/sustained.py's protocol: per shape, the methods interleaved with
    the card under load; rows also carry each pass's SM clock (MHz) and board power (W)."""
    rows = []
    clocks = ClockLog()
    try:
        for d, causal, s, b, h, q, k, v, f in shapes(hdims, seqlens):
            fns, shape_rows = {}, {}
            for m in methods:
                row = {"method": m, "hdim": d, "causal": causal, "seqlen": s, "batch": b,
                       "heads": h, "protocol": "sustained"}
                shape_rows[m] = row
                rows.append(row)
                try:
                    fns[m] = method_fns(m, q, k, v, causal)
                    fns[m][0]()
                    if fns[m][1] and not fwd_only:
                        fns[m][1]()
                    torch.cuda.synchronize()
                except Exception as e:  # a backend that cannot run this shape
                    row["error"] = str(e).splitlines()[0][:120] if str(e) else type(e).__name__
                    fns.pop(m, None)
            for pas, factor in (("fwd", 1.0), ("bwd", 2.5)):
                if pas == "bwd" and fwd_only:
                    continue
                got = interleaved({m: fn[0 if pas == "fwd" else 1] for m, fn in fns.items()
                                   if fn[0 if pas == "fwd" else 1]}, clocks, rounds)
                for m, (ms, mhz, w) in got.items():
                    shape_rows[m].update({f"{pas}_ms": ms, f"{pas}_tflops": factor * f / ms / 1e9,
                                          f"{pas}_sm_mhz": mhz, f"{pas}_watts": w})
            for r in shape_rows.values():
                if "fwd_ms" in r and "bwd_ms" in r:
                    r["fwd_bwd_tflops"] = 3.5 * f / (r["fwd_ms"] + r["bwd_ms"]) / 1e9
            del fns
            torch.cuda.empty_cache()
            print(shape_line(d, causal, s, shape_rows.values()), flush=True)
    finally:
        clocks.close()
    return rows


def measure_memory(seqlens):
    """Peak bytes allocated during forward+backward beyond the inputs (hdim 128, hidden 2048)."""
    rows = []
    d, h = 128, HIDDEN // 128
    for s in seqlens:
        b = TOKENS // s
        for m in ("flashkit", "math"):
            q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            row = {"method": m, "seqlen": s, "batch": b, "heads": h, "hdim": d}
            try:
                if m == "flashkit":
                    fk = Flashkit(q, k, v, False)  # outputs, dout, grads and workspace all counted
                    fk.fwd()
                    fk.bwd()
                    del fk
                else:
                    qt, kt, vt = (x.transpose(1, 2).requires_grad_() for x in (q, k, v))
                    with sdpa_kernel(SDPBackend.MATH):
                        out = F.scaled_dot_product_attention(qt, kt, vt)
                    out.backward(torch.randn_like(out))
                    del out, qt, kt, vt
                torch.cuda.synchronize()
                row["peak_bytes"] = torch.cuda.max_memory_allocated() - base
            except torch.OutOfMemoryError:
                row["error"] = "out of memory"
            rows.append(row)
            del q, k, v
            torch.cuda.empty_cache()
        print("memory s%-5d " % s + " ".join(f"{r['method']} {r.get('peak_bytes', 0) / 2**20:.0f} MiB"
                                              for r in rows[-2:]), flush=True)
    return rows


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="bench/results")
    p.add_argument("--quick", action="store_true", help="flashkit and flash only, seqlen 2k and 8k")
    p.add_argument("--methods", default="flashkit,flash,cudnn,efficient,math")
    p.add_argument("--fwd-only", action="store_true", help="time the forward only, no memory sweep")
    p.add_argument("--no-memory", action="store_true", help="no memory sweep")
    p.add_argument("--name", default="attention", help="file name after <date>-<gpu>-")
    p.add_argument("--hdims", default="64,128,256", help="head dims to time")
    p.add_argument("--seqlens", default=",".join(map(str, SEQLENS)), help="sequence lengths to time")
    p.add_argument("--protocol", default="burst", choices=["burst", "sustained"],
                   help="burst: each method timed alone; sustained: interleaved under load (sustained.py)")
    p.add_argument("--rounds", type=int, default=2, help="sustained: rounds of the interleaving")
    args = p.parse_args()
    args.quick = args.quick or bool(os.environ.get("FK_BENCH_QUICK"))  # tests/gpu/run passes no args
    gpu = torch.cuda.get_device_name()
    tag = "h200" if "H200" in gpu else "h100" if "H100" in gpu else gpu.replace(" ", "_").lower()
    t0 = time.time()
    if args.quick:
        speed = measure_speed([64, 128, 256], [2048, 8192], ["flashkit", "flash"])
        memory = []
    else:
        seqlens = [int(x) for x in args.seqlens.split(",")]
        hdims, methods = [int(x) for x in args.hdims.split(",")], args.methods.split(",")
        if args.protocol == "burst":
            clocks = ClockLog()
            try:
                speed = measure_speed(hdims, seqlens, methods, args.fwd_only, clocks)
            finally:
                clocks.close()
        else:
            speed = measure_speed_sustained(hdims, seqlens, methods, args.fwd_only, args.rounds)
        memory = [] if args.fwd_only or args.no_memory else measure_memory(seqlens)
    res = {"gpu": gpu, "torch": torch.__version__, "dtype": "bf16", "protocol": args.protocol,
           "tokens": TOKENS, "hidden": HIDDEN,
           "flops": "4*b*h*s*s*d (/2 causal); bwd x2.5; fwd+bwd x3.5", "speed": speed, "memory": memory,
           "seconds": round(time.time() - t0, 1)}
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"{DATE}-{tag}-{args.name}{'-quick' if args.quick else ''}.json")
    with open(path, "w") as f:
        json.dump(res, f, indent=1)
    print("wrote", path)
    # The bars: flashkit >= flash (issue 7) and >= cudnn (issue 8) at seqlen >= 2k for every
    # (hdim, causal), per pass.
    ours = "flashkit" if any(r["method"] == "flashkit" for r in speed) else "flashkit-sm80"
    for peer in ("flash", "cudnn"):
        worst = {}
        for r in speed:
            if r["method"] != ours or r["seqlen"] < 2048 or "fwd_tflops" not in r:
                continue
            ref = next((x for x in speed if x["method"] == peer and x["hdim"] == r["hdim"]
                        and x["causal"] == r["causal"] and x["seqlen"] == r["seqlen"] and "fwd_tflops" in x), None)
            for pas in ("fwd", "bwd"):
                if ref and f"{pas}_tflops" in r and f"{pas}_tflops" in ref:
                    worst[pas] = min(worst.get(pas, 9), r[f"{pas}_tflops"] / ref[f"{pas}_tflops"])
        print(f"{ours} / {peer}, worst over seqlen >= 2k:", {k: round(v, 3) for k, v in worst.items()})
    # Issue 8 item 6: the FP8 forward against our bf16 forward (hdim 128, 8k is the bar's cell).
    for r in speed:
        if r["method"] == "flashkit-fp8" and "fwd_tflops" in r:
            bf = next((x for x in speed if x["method"] == "flashkit" and x["hdim"] == r["hdim"]
                       and x["causal"] == r["causal"] and x["seqlen"] == r["seqlen"] and "fwd_tflops" in x), None)
            if bf:
                print(f"fp8 / bf16 forward d{r['hdim']} {'causal' if r['causal'] else 'dense'} s{r['seqlen']}: "
                      f"{r['fwd_tflops']:.0f} / {bf['fwd_tflops']:.0f} = {r['fwd_tflops'] / bf['fwd_tflops']:.3f}")
    try:
        import plot_attention
        plot_attention.plot(path, args.out)
    except ImportError:
        print("matplotlib missing: run bench/plot_attention.py on the JSON")


if __name__ == "__main__":
    main()
