"""Decode attention side by side on one GPU (run by tests/gpu/run --bench bench/decode.py, with
--out DIR): flashkit's four schedules (single; split-KV, FlashDecoding's splits merged in the
kernel; flash_decoding, the same splits merged by a second kernel, the paper's baseline; Lean) against PyTorch SDPA's flash, cuDNN
and efficient backends on a trimmed version of the LeanAttention paper's sweep (context 1k..512k,
heads 16..128, batch 1..16, hdim 64 and 128; q_len 1, bf16, dense cache). Median of per-call CUDA
event times with L2 flushed between calls, every column of a shape timed twice (in order, then in
reverse order; the faster median is kept, both are in the JSON's us_passes) (--flush write, the protocol: a 256 MiB memset, which
leaves L2 full of dirty lines; --flush read: a 256 MiB read, clean lines); TB/s counts the bytes of
K and V read. --headmajor adds flashkit split-KV/Lean on the same data stored [b, h, ctx, d]
(torch's layout) as a strided view. --variants "split_kv@FLASHKIT_DECODE_EVICT_FIRST=0,
cudnn@flush=read,lean@page=16,..." times more columns per shape in the same process on the same
inputs: a schedule (or cudnn) with library knobs (read by flashkit at every call), its own flush,
or (page=P) the cache as a shuffled pool of P-token pages with a block table.
Writes <date>-<gpu>-decode.json and a speedup plot (like the paper's Figure 7) into --out."""
import argparse
import faulthandler
import glob
import importlib.util
import json
import math
import os
import subprocess
import sys
import time

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

faulthandler.enable()
DATE = time.strftime("%Y-%m-%d")  # of the run, for the result files' names


def load_extension(pkg=None):
    """flashkit._C alone (the package __init__ pulls in other families' Python layers) from the
    folder `pkg`, else the one the FLASHKIT_EXT_DIR environment variable names (an A/B base
    build), else python/flashkit."""
    pkg = pkg or os.environ.get("FLASHKIT_EXT_DIR") or os.path.join(os.path.dirname(__file__), "..", "python", "flashkit")
    path = glob.glob(os.path.join(pkg, "_C*.so"))[0]
    spec = importlib.util.spec_from_file_location("_C", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod



def load_ab_pair():
    """(the extension under test, the A/B base or None): load_extension()'s, and the one in the
    folder FLASHKIT_BASE_EXT_DIR names (main's build in an A/B call)."""
    base_dir = os.environ.get("FLASHKIT_BASE_EXT_DIR")
    return load_extension(), load_extension(base_dir) if base_dir else None

PROBE = """
import sys; sys.path.insert(0, 'bench'); import torch, decode as d
C = d.load_extension()
q = torch.randn(1, 1, 4, 64, device='cuda', dtype=torch.bfloat16)
k = torch.randn(1, 300, 4, 64, device='cuda', dtype=torch.bfloat16)
o = torch.empty_like(q); l = torch.empty(1, 4, 1, device='cuda')
p = C.make_decode_plan(1, 1, 4, 4, 64, 'bfloat16', [300], schedule='lean', device='cuda')
C.decode(q, k, k, torch.tensor([300], device='cuda', dtype=torch.int32), None, o, l, p, 0.0, 0)
torch.cuda.synchronize(); print('probe ok', p)
"""


def cli_us(b, h, ctx, d, sched, head_major=False):
    """flashkit bench decode (same timing rule: median, L2 flushed per call) when the extension
    cannot run next to torch in this process."""
    r = subprocess.run(["build-gpu/flashkit", "bench", "decode", "--device", "cuda", "--batch", str(b),
                        "--heads", str(h), "--kv-heads", str(h), "--hdim", str(d), "--ctx", str(ctx),
                        "--schedule", sched, "--repeats", str(REPEATS), "--head-major", str(int(head_major))],
                       capture_output=True, text=True)
    for line in r.stdout.splitlines():
        if " us, " in line:
            return float(line.split()[0])
    return None

SHAPES = [  # (batch, heads, ctx): anchors first, then the paper's context/heads/batch sweeps
    (1, 56, 8192), (1, 56, 1024), (1, 56, 65536), (1, 32, 262144), (1, 16, 524288),
    (2, 128, 65536), (4, 32, 131072), (16, 16, 8192), (3, 40, 16384), (16, 128, 4096),
    (8, 64, 16384), (1, 128, 32768),
]
HDIMS = [64, 128]
# --quick: the shapes the performance bar names (8k anchor, >= 64k, Lean vs split-KV),
# and two whose tiles just exceed one wave of 264 CTAs (272, 288: FA2's rule keeps one split, so
# split-KV runs a second wave of 8 / 24 CTAs), where stream-K's balance should show most.
QUICK = [(1, 56, 8192, 64), (1, 56, 65536, 64), (1, 56, 65536, 128), (1, 16, 524288, 64),
         (4, 32, 131072, 128), (3, 40, 16384, 64), (1, 128, 32768, 128), (16, 128, 4096, 64),
         (17, 16, 32768, 64), (9, 32, 16384, 128)]
REPEATS = 15
FLUSH_READ = False


def parse_variant(spec):
    """'split_kv@K=V+K2=V2' -> ('split_kv', {K: V, K2: V2}); the key 'flush' is the bench's own."""
    sched, _, knobs = spec.partition("@")
    return sched, dict(kv.split("=", 1) for kv in knobs.split("+") if kv)


BENCH_KEYS = ("flush", "layout", "page")  # variant keys the bench reads itself, not FLASHKIT_* knobs


def with_env(knobs, fn):
    """fn() with the FLASHKIT_* knobs set (and FLUSH_READ for flush=read), then restored."""
    global FLUSH_READ
    saved, flush_read = {k_: os.environ.get(k_) for k_ in knobs}, FLUSH_READ
    for k_, v_ in knobs.items():
        if k_ == "flush":
            FLUSH_READ = v_ == "read"
        elif k_ not in BENCH_KEYS:
            os.environ[k_] = v_
    try:
        return fn()
    finally:
        FLUSH_READ = flush_read
        for k_, v_ in saved.items():
            if k_ in BENCH_KEYS:
                continue
            if v_ is None:
                os.environ.pop(k_, None)
            else:
                os.environ[k_] = v_


DTYPE = "bfloat16"  # --dtype


def decode_inputs(d, b, h, ctx, dev="cuda"):
    """q [b, 1, h, d], K / V caches [b, ctx, h, d] (random, DTYPE), lengths (all ctx), and the
    out / lse buffers of one decode shape."""
    dt = getattr(torch, DTYPE)
    q = torch.randn(b, 1, h, d, device=dev, dtype=dt)
    k = torch.randn(b, ctx, h, d, device=dev, dtype=dt)
    v = torch.randn(b, ctx, h, d, device=dev, dtype=dt)
    lens = torch.full((b,), ctx, device=dev, dtype=torch.int32)
    return q, k, v, lens, torch.empty_like(q), torch.empty(b, h, 1, device=dev, dtype=torch.float32)


def paged_copy(k, v, page, cache):
    """k and v [b, ctx, h, d] as a page pool [b * ctx / page, page, h, d] in shuffled order and
    its block table [b, ctx / page] (int32), made once per page size (cache)."""
    if page not in cache:
        b, ctx, h, d = k.shape
        pages = ctx // page
        perm = torch.randperm(b * pages, generator=torch.Generator().manual_seed(page))
        table = perm.view(b, pages).to(device=k.device, dtype=torch.int32)
        kp = torch.empty(b * pages, page, h, d, dtype=k.dtype, device=k.device)
        vp = torch.empty_like(kp)
        kp[table.flatten().long()] = k.reshape(b * pages, page, h, d)
        vp[table.flatten().long()] = v.reshape(b * pages, page, h, d)
        cache[page] = (kp, vp, table)
    return cache[page]


def timed(fn, flush):
    for _ in range(3):
        fn()
    times = []
    for _ in range(REPEATS):
        if FLUSH_READ:
            flush.sum(dtype=torch.int32)  # reads 256 MiB: L2 left holding clean lines
        else:
            flush.zero_()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2] * 1e3  # us


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--budget", type=float, default=200, help="seconds; later shapes are skipped")
    ap.add_argument("--flush", choices=["write", "read"], default="write")
    ap.add_argument("--headmajor", action="store_true")
    ap.add_argument("--variants", default="", help="comma list of SCHED@KNOB=VAL+KNOB=VAL (see top)")
    ap.add_argument("--skip", default="", help="comma list of columns not timed (e.g. single,torch_efficient)")
    ap.add_argument("--shapes", nargs="*", default=None, help="d,b,h,ctx ... instead of the sweep")
    ap.add_argument("--dtype", choices=["bfloat16", "float16"], default="bfloat16")
    args = ap.parse_args()
    global FLUSH_READ, DTYPE
    FLUSH_READ = args.flush == "read"
    DTYPE = args.dtype
    os.makedirs(args.out, exist_ok=True)
    dev = torch.device("cuda")
    gpu = torch.cuda.get_device_name()
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    stream = torch.cuda.current_stream().cuda_stream
    probe = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True)
    print(probe.stdout.strip(), probe.stderr.strip()[-1500:])
    if probe.returncode != 0 and os.path.exists("/usr/local/cuda/bin/cuda-gdb"):
        bt = subprocess.run(["/usr/local/cuda/bin/cuda-gdb", "-q", "-batch", "-ex", "run", "-ex", "bt",
                             "--args", sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
        print("probe backtrace:\n" + "\n".join((bt.stdout + bt.stderr).splitlines()[-30:]))
    C = load_extension() if probe.returncode == 0 else None
    print("flashkit via", "the Python extension" if C else "the flashkit CLI (extension probe failed)")
    rows = []
    t_start = time.time()
    todo = QUICK if args.quick else [(b, h, ctx, d) for (b, h, ctx) in SHAPES for d in HDIMS]
    if args.shapes:
        todo = [tuple(int(x) for x in s_.split(","))[1:] + (int(s_.split(",")[0]),) for s_ in args.shapes]
    variants = [parse_variant(s) for s in args.variants.split(",") if s]
    skip = set(args.skip.split(",")) - {""}
    tag = gpu.replace("NVIDIA ", "").replace(" ", "-").lower()
    path = os.path.join(args.out, f"{DATE}-{tag}-decode.json")
    knobs = {k_: v_ for k_, v_ in os.environ.items() if k_.startswith("FLASHKIT_DECODE_")}
    print("knobs:", knobs, "flush:", args.flush)
    for (b, h, ctx, d) in todo:
        if time.time() - t_start > args.budget:
            print("time budget reached, skipping", (b, h, ctx, d))
            continue
        kv_bytes = 2 * b * h * ctx * d * 2
        q, k, v, lens, out, lse = decode_inputs(d, b, h, ctx, dev)
        row = {"batch": b, "heads": h, "kv_heads": h, "ctx": ctx, "hdim": d, "kv_bytes": kv_bytes, "us": {}}
        # Every column is a closure returning its us; all of them run twice, in order and then in
        # reverse order, and each keeps the faster median: the first columns timed on a shape's
        # fresh tensors read 5-15% slow (NOTES-decode.md, sessions 18 and 31), whatever they were.
        cols = []  # (name, run)
        first_out = {}  # name -> out after its first run, for the max-diff checks

        def flashkit_col(name, sched, kk, vv, knobs=None, table=None):
            def run():
                def go():
                    page = int(kk.shape[1]) if table is not None else 0
                    plan = C.make_decode_plan(b, 1, h, h, d, DTYPE, [ctx] * b, page_size=page,
                                              schedule=sched, device="cuda")
                    if sched != "single":
                        row[name.replace("flashkit_", "") + "_plan"] = repr(plan)
                    us = timed(lambda: C.decode(q, kk, vv, lens, table, out, lse, plan, 0.0, stream), flush)
                    first_out.setdefault(name, out.clone())
                    return us
                return with_env(knobs or {}, go)
            cols.append((name, run))

        def torch_col(name, backend, qq, kk, vv, knobs=None):
            def run():
                try:
                    with sdpa_kernel(backend):
                        f = lambda: torch.nn.functional.scaled_dot_product_attention(qq, kk, vv)
                        if name not in first_out:
                            first_out[name] = f().transpose(1, 2)  # [b, h, 1, d] -> [b, 1, h, d]
                        return with_env(knobs or {}, lambda: timed(f, flush))
                except RuntimeError as e:
                    row.setdefault("errors", {})[name] = str(e).splitlines()[0][:160]
                    return None
            cols.append((name, run))

        paged_cache = {}  # page size -> (k pages, v pages, block table) of this shape
        qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))  # torch's [b, h, s, d]
        khm = vhm = None
        for sched in ["single", "split_kv", "flash_decoding", "lean", "auto"]:
            if sched in skip:
                continue
            if C is not None:
                flashkit_col("flashkit_" + sched, sched, k, v)
            else:  # the CLI's own timing (same rule) when the extension cannot run beside torch
                cols.append(("flashkit_" + sched, lambda s_=sched: cli_us(b, h, ctx, d, s_)))
        if args.headmajor and C is not None:  # the same values stored [b, h, ctx, d], viewed [b, ctx, h, d]
            khm = kt.transpose(1, 2)
            vhm = vt.transpose(1, 2)
            for sched in ["split_kv", "lean"]:
                flashkit_col(f"flashkit_{sched}_headmajor", sched, khm, vhm)
            # cuDNN on flashkit's own [b, ctx, h, d] storage, viewed [b, h, ctx, d] (strided)
            torch_col("torch_cudnn_strided", SDPBackend.CUDNN_ATTENTION, q.transpose(1, 2),
                      k.transpose(1, 2), v.transpose(1, 2))
        for name, backend in [("torch_flash", SDPBackend.FLASH_ATTENTION),
                              ("torch_cudnn", SDPBackend.CUDNN_ATTENTION),
                              ("torch_efficient", SDPBackend.EFFICIENT_ATTENTION)]:
            if name not in skip:
                torch_col(name, backend, qt, kt, vt)
        for spec, (sched, kn) in zip(args.variants.split(","), variants):
            if sched == "cudnn":
                torch_col(spec, SDPBackend.CUDNN_ATTENTION, qt, kt, vt, kn)
            elif C is not None and "page" in kn:  # the same values in a shuffled page pool
                kp, vp, table = paged_copy(k, v, int(kn["page"]), paged_cache)
                flashkit_col(spec, sched, kp, vp, kn, table)
            elif C is not None:
                headmajor = kn.get("layout") == "headmajor"
                flashkit_col(spec, sched, kt.transpose(1, 2) if headmajor else k,
                             vt.transpose(1, 2) if headmajor else v, kn)
        passes = {}
        for order in (cols, cols[::-1]):
            for name, run in order:
                passes.setdefault(name, []).append(run())
        for name, _ in cols:
            ts = [t for t in passes[name] if t]
            row["us"][name] = min(ts) if ts else None
        row["us_passes"] = passes
        ref = first_out.get("flashkit_single") if "flashkit_single" in first_out else next(
            (o for n, o in first_out.items() if n.startswith("flashkit_")), None)
        if ref is not None:
            for name, o in first_out.items():
                key = "max_diff_vs_torch" if name.startswith("torch_") or name.startswith("cudnn") else "max_diff_vs_single"
                if o.shape == ref.shape:
                    row.setdefault(key, {})[name.replace("flashkit_", "")] = (o.float() - ref.float()).abs().max().item()
        row["TBps"] = {k_: (kv_bytes / (us * 1e-6) / 1e12 if us else None) for k_, us in row["us"].items()}
        rows.append(row)
        dump(path, gpu, rows, knobs, args.flush)  # after every row: a stopped run keeps them
        u = row["us"]
        best = min(v_ for n, v_ in u.items() if n.startswith("flashkit_") and v_ and "headmajor" not in n)
        print(f"d{d} b{b} h{h} ctx{ctx}: " + "  ".join(
            f"{n}={v_:.1f}us" if v_ else f"{n}=n/a" for n, v_ in u.items()) +
            f"  best TB/s={kv_bytes / (best * 1e-6) / 1e12:.2f}  lean TB/s={row['TBps'].get('flashkit_lean') or math.nan:.2f}"
            f"  lean/split={(u.get('flashkit_split_kv') or math.nan) / (u.get('flashkit_lean') or math.nan):.2f}x"
            f"  lean/fd={(u.get('flashkit_flash_decoding') or math.nan) / (u.get('flashkit_lean') or math.nan):.2f}x"
            f"  cudnn/best={(u.get('torch_cudnn') or math.nan) / best:.2f}x"
            f"  maxdiff={max((row.get('max_diff_vs_single') or {0: 0}).values()):.2g}"
            f"  [{row.get('split_kv_plan', '')}]", flush=True)
        del q, k, v, out, qt, kt, vt, khm, vhm, cols, first_out
        torch.cuda.empty_cache()
    print("wrote", path)
    plot(rows, os.path.join(args.out, f"{DATE}-{tag}-decode-speedup.png"), gpu)


def dump(path, gpu, rows, knobs, flush):
    result = {"gpu": gpu, "torch": torch.__version__, "dtype": DTYPE, "q_len": 1, "repeats": REPEATS,
              "timing": f"median of per-call CUDA events, 256 MiB L2 flush ({flush}) between calls",
              "knobs": knobs, "rows": rows}
    with open(path, "w") as f:
        json.dump(result, f, indent=1)


def plot(rows, path, gpu):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(15, 5), sharey=True)
    peers = ["flashkit_single", "flashkit_split_kv", "flashkit_flash_decoding", "torch_flash", "torch_cudnn",
             "torch_efficient"]
    for ax, d in zip(axes, HDIMS):
        sub = [r for r in rows if r["hdim"] == d]
        x = range(len(sub))
        width = 0.13
        for i, p in enumerate(peers):
            ys = [(r["us"][p] / r["us"]["flashkit_lean"]) if r["us"].get(p) else 0 for r in sub]
            ax.bar([xi + (i - 2.5) * width for xi in x], ys, width, label=f"Lean vs {p}")
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xticks(list(x))
        ax.set_xticklabels([f"b{r['batch']} h{r['heads']}\n{r['ctx'] // 1024}k" for r in sub], fontsize=7)
        ax.set_title(f"hdim {d}: speedup of flashkit Lean (bf16, q_len 1)")
        ax.set_yscale("log", base=2)
    axes[0].set_ylabel("time(peer) / time(Lean)")
    axes[0].legend(fontsize=7)
    fig.suptitle(gpu)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print("wrote", path)


if __name__ == "__main__":
    main()
