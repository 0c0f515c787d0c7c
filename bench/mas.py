"""GPU benchmark of monotonic alignment search (issue 5), Super-MAS's protocol: B = 32, S = 4T,
value ~ N(0, 1) fp32 [B, T, S], mask of ones, every method through its `maximum_path(value, mask)`
drop-in, side by side in one process on the same inputs. Each GPU method is timed two ways:
one call at a time from an idle stream (host time included: `ms_median`), and by Super-MAS's own
timing, triton's do_bench (calls queued behind L2 flushes: the GPU's time, `ms_queued`):

  flashkit GPU (unfused; fused from z, m, logs with C = 192), flashkit CPU, Super-MAS Triton,
  its TorchScript v1, and the Cython monotonic_align (glow-tts core.pyx, built here).

The peers are never part of the repository: they are read from .carry/peers/ (copied there from
their public repositories; see bench/NOTES-mas.md). Writes <out>/<date>-<gpu>-mas.json and a
log-scale plot like the Super-MAS paper's Figure 2 (--plot JSON redraws it from a JSON file).

usage: PYTHONPATH=python python3 bench/mas.py --out DIR [--Ts 128,256,...] [--batch 32]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
PEERS = os.path.join(HERE, "..", ".carry", "peers")
DATE = time.strftime("%Y-%m-%d")  # of the run: results/<date>-<gpu>-mas.json
WARMUP_MS = 50.0  # untimed calls of each GPU method before its timed ones (Timer.run)
CHANNELS = 192  # VITS's inter_channels: the fused likelihood's C


def build_cython():
    """glow-tts's monotonic_align/core.pyx, compiled as its setup.py does (no OpenMP flags)."""
    import numpy

    src = os.path.join(PEERS, "glow_tts_monotonic_align", "core.pyx")
    out = tempfile.mkdtemp(prefix="mas_cython_")
    subprocess.check_call([sys.executable, "-m", "cython", "-3", "-o",
                           os.path.join(out, "core.c"), src])
    so = os.path.join(out, "core" + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.check_call(["gcc", "-O3", "-shared", "-fPIC", "-o", so, os.path.join(out, "core.c"),
                           "-I" + sysconfig.get_paths()["include"], "-I" + numpy.get_include()])
    sys.path.insert(0, out)
    import core

    return core.maximum_path_c


def methods(torch, flashkit):
    sys.path.insert(0, PEERS)
    from jit_monotonic_align import maximum_path1
    from super_monotonic_align import maximum_path as super_mas

    cython_core = build_cython()

    def cython_glow_tts(value, mask):  # glow-tts's monotonic_align.maximum_path, verbatim
        value = value * mask
        device, dtype = value.device, value.dtype
        value = value.data.cpu().numpy().astype(np.float32)
        path = np.zeros_like(value).astype(np.int32)
        mask = mask.data.cpu().numpy()
        t_x_max = mask.sum(1)[:, 0].astype(np.int32)
        t_y_max = mask.sum(2)[:, 0].astype(np.int32)
        cython_core(path, value, t_x_max, t_y_max)
        return torch.from_numpy(path).to(device=device, dtype=dtype)

    def flashkit_cpu(value_np, mask_np):
        return flashkit.maximum_path(value_np, mask_np)

    return {
        "flashkit_gpu": (lambda v, m: flashkit.maximum_path(v, m, check=False), False),
        "super_mas_triton": (lambda v, m: super_mas(v, m), True),  # modifies value: fresh copy
        "torchscript_v1": (lambda v, m: maximum_path1(v, m), False),
        "cython": (cython_glow_tts, False),
        "flashkit_cpu": (flashkit_cpu, False),
    }


def neg_cent_vits(torch, z, m, logs):
    """VITS's neg_cent [b, mel, text] (models.py), in fp32 without TF32."""
    s_p_sq_r = torch.exp(-2 * logs)
    nc1 = torch.sum(-0.5 * np.log(2 * np.pi) - logs, [1], keepdim=True)
    nc2 = torch.matmul(-0.5 * (z ** 2).transpose(1, 2), s_p_sq_r)
    nc3 = torch.matmul(z.transpose(1, 2), (m * s_p_sq_r))
    nc4 = torch.sum(-0.5 * (m ** 2) * s_p_sq_r, [1], keepdim=True)
    return nc1 + nc2 + nc3 + nc4


class Timer:
    def __init__(self, torch):
        self.torch = torch
        self.flush = torch.empty(512 * 2**20, dtype=torch.uint8, device="cuda")

    def run(self, fn, reps, setup=None, warmup_ms=0.0):
        """Median ms of fn(state) over reps, L2 flushed before each. CUDA events bracket the
        call: the stream is idle when the first is recorded, so host work inside the call (CPU
        methods, launch overhead) is counted as well. warmup_ms: untimed calls first (at least 3,
        at least that long), so a GPU method is timed at the clocks of a busy GPU, not of one
        that idled through the CPU methods before it (session 6: the first call of a 0.08 ms
        method took 1.5x the later ones)."""
        torch = self.torch
        times, out = [], None
        t0, n = time.perf_counter(), 0
        while warmup_ms > 0 and (n < 3 or (time.perf_counter() - t0) * 1e3 < warmup_ms):
            state = setup() if setup else None
            self.flush.zero_()
            fn(state)
            torch.cuda.synchronize()
            n += 1
        for _ in range(reps):
            state = setup() if setup else None
            self.flush.zero_()
            torch.cuda.synchronize()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            out = fn(state)
            b.record()
            torch.cuda.synchronize()
            times.append(a.elapsed_time(b))
        return statistics.median(times), times, out

    def queued(self, fn):
        """Super-MAS's own protocol (its test.py: triton.testing.do_bench(fn, quantiles=[0.5, 0.2,
        0.8], rep=500)): calls queued back to back, each behind an L2 flush, CUDA events around
        each call, one synchronize at the end; the median. Host work inside a call is hidden
        whenever the GPU is busier than the host (the flush alone takes ~80 us), so this times
        the GPU's share of a call. triton's own function when importable (the peer needs it),
        else the same steps here. Returns (median ms, which timer)."""
        try:
            import triton.testing

            return triton.testing.do_bench(fn, quantiles=[0.5, 0.2, 0.8], rep=500)[0], "triton"
        except ImportError:
            pass
        torch = self.torch
        fn()
        torch.cuda.synchronize()
        est0, est1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        est0.record()
        for _ in range(5):
            self.flush.zero_()
            fn()
        est1.record()
        torch.cuda.synchronize()
        est = max(est0.elapsed_time(est1) / 5, 1e-3)
        for _ in range(max(1, int(25 / est))):
            fn()
        n = max(1, int(500 / est))
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(n)]
        for a, b in ev:
            self.flush.zero_()
            a.record()
            fn()
            b.record()
        torch.cuda.synchronize()
        return statistics.median(a.elapsed_time(b) for a, b in ev), "flashkit"


def checks(torch, flashkit):
    """Torch CUDA through the drop-in equals NumPy on the CPU (both layouts, random lengths,
    tie-heavy values), and bad lengths raise the CPU's error with check=True."""
    rng = np.random.default_rng(0)
    b, t, s = 6, 50, 170
    tx = rng.integers(1, t + 1, b)
    ty = np.array([rng.integers(x, s + 1) for x in tx])
    mask = ((np.arange(t)[None, :, None] < tx[:, None, None])
            & (np.arange(s)[None, None, :] < ty[:, None, None])).astype(np.float32)
    for ties in (False, True):
        v = (rng.integers(-2, 1, (b, t, s)) if ties else rng.standard_normal((b, t, s)))
        v = v.astype(np.float32)
        for layout, vv, mm in (("glow-tts", v, mask),
                               ("vits", v.transpose(0, 2, 1).copy(), mask.transpose(0, 2, 1).copy())):
            cpu = flashkit.maximum_path(vv, mm)
            gpu = flashkit.maximum_path(torch.from_numpy(vv).cuda(), torch.from_numpy(mm).cuda())
            bad = int((gpu.cpu().numpy() != cpu).sum())
            print(f"check {layout:8s} ties={ties}: {bad} mismatching cells vs CPU", flush=True)
            assert bad == 0
    # The drop-in's one-call CUDA path with a bool mask, and its error for an item without a path.
    gm = torch.from_numpy(mask).cuda().bool()
    gpu = flashkit.maximum_path(torch.from_numpy(v).cuda(), gm)
    bad = int((gpu.cpu().numpy() != flashkit.maximum_path(v, mask)).sum())
    print(f"check bool mask: {bad} mismatching cells vs CPU", flush=True)
    assert bad == 0
    gm[1, :, :] = False
    gm[1, :7, 0] = True  # item 1: 7 text positions, 1 mel frame
    gm[1, 0, 0] = True
    try:
        flashkit.maximum_path(torch.from_numpy(v).cuda(), gm)
        raise AssertionError("no error for tx > ty through maximum_path")
    except ValueError as e:
        print("check bad lengths through maximum_path:", e, flush=True)
        assert "text_lengths[1]" in str(e)
    lengths = torch.tensor([5, 9], dtype=torch.int32, device="cuda")
    try:
        flashkit.monotonic_alignment_search(torch.zeros((2, 10, 8), device="cuda"), lengths,
                                            torch.tensor([8, 8], dtype=torch.int32, device="cuda"))
        raise AssertionError("no error for tx > ty")
    except ValueError as e:
        print("check bad lengths on CUDA:", e, flush=True)
        assert "text_lengths[1]" in str(e)


def peak_bytes(torch, fn):
    """Device memory the call takes beyond its inputs: the torch allocator's peak growth plus
    memory taken outside it (flashkit's cached workspace, cudaMalloc'd on first use)."""
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    reserved0, free0 = torch.cuda.memory_reserved(), torch.cuda.mem_get_info()[0]
    torch.cuda.reset_peak_memory_stats()
    out = fn()
    torch.cuda.synchronize()
    outside = max(0, (free0 - torch.cuda.mem_get_info()[0]) -
                  (torch.cuda.memory_reserved() - reserved0))
    del out
    return torch.cuda.max_memory_allocated() - base + outside


def mismatches(a, b):
    return int((a.float() != b.float()).sum().item())


def sweep(args):
    import torch

    import flashkit
    from flashkit import _C as fk_C

    torch.backends.cuda.matmul.allow_tf32 = False
    gpu = torch.cuda.get_device_name()
    checks(torch, flashkit)
    ms = methods(torch, flashkit)
    timer = Timer(torch)
    rows, B = [], args.batch
    for T in [int(t) for t in args.Ts.split(",")]:
        S = 4 * T
        gen = torch.Generator(device="cuda").manual_seed(T)
        value = torch.randn((B, T, S), dtype=torch.float32, device="cuda", generator=gen)
        mask = torch.ones((B, T, S), dtype=torch.int32, device="cuda")
        value_np, mask_np = value.cpu().numpy(), mask.cpu().numpy()
        print(f"T={T} S={S}", flush=True)
        paths = {}
        for name, (fn, mutates) in ms.items():
            slow = name in ("cython", "torchscript_v1", "flashkit_cpu")
            if name == "cython" and T > args.cython_max_t:
                continue
            reps = 1 if slow and T >= 1024 else (3 if slow else args.reps)
            if name == "flashkit_cpu":
                call = lambda _: fn(value_np, mask_np)  # noqa: E731
                setup = None
            elif mutates:
                call = lambda v: fn(v, mask)  # noqa: E731
                setup = value.clone
            else:
                call = lambda _: fn(value, mask)  # noqa: E731
                setup = None
            if name.startswith("flashkit_gpu"):
                call(setup() if setup else None)  # warm-up: workspace growth, module load
            mem = 0 if name in ("cython", "flashkit_cpu") else peak_bytes(
                torch, lambda: call(setup() if setup else None))
            med, all_ms, out = timer.run(call, reps, setup, 0.0 if slow else WARMUP_MS)
            out = torch.as_tensor(out).to("cuda")
            paths[name] = out
            row = {"T": T, "S": S, "method": name, "ms_median": med, "ms_all": all_ms,
                   "peak_mem_bytes": mem}
            q = ""
            if not slow:  # the GPU methods also by Super-MAS's protocol (on a copy it may modify)
                v_q = value.clone()
                row["ms_queued"], row["queued_timer"] = timer.queued(lambda: fn(v_q, mask))
                q = f"  queued {row['ms_queued']:8.3f} ms"
                del v_q
            rows.append(row)
            print(f"  {name:18s} {med:10.3f} ms{q}  mem {mem / 2**20:8.1f} MiB", flush=True)
        # Where flashkit's time goes: the kernels alone (preallocated outputs, int32 lengths):
        # forward + backtrack only (durations), then with the path written too.
        tx = torch.full((B,), T, dtype=torch.int32, device="cuda")
        ty = torch.full((B,), S, dtype=torch.int32, device="cuda")
        dur = torch.empty((B, T), dtype=torch.int32, device="cuda")
        pth = torch.empty((B, T, S), dtype=torch.float32, device="cuda")
        stream = torch.cuda.current_stream().cuda_stream
        for name, outs in (("flashkit_gpu_kernels_durations", (None, dur)),
                           ("flashkit_gpu_kernels_path", (pth, None))):
            call = lambda _: fk_C.monotonic_alignment_search(value, tx, ty, *outs, -1e9,  # noqa: E731
                                                          None, stream)
            call(None)
            med, all_ms, _ = timer.run(call, args.reps, warmup_ms=WARMUP_MS)
            rows.append({"T": T, "S": S, "method": name, "ms_median": med, "ms_all": all_ms,
                         "peak_mem_bytes": 0})
            print(f"  {name:18s} {med:10.3f} ms", flush=True)
        del pth, dur
        ref_name = "cython" if "cython" in paths else "flashkit_cpu"
        for r in rows:
            if r["T"] == T and r["method"] in paths:
                r["mismatching_cells_vs_" + ref_name] = mismatches(paths[r["method"]],
                                                                   paths[ref_name])
        del paths

        # Fused: z, m, logs with C channels -> path, vs unfused on VITS's neg_cent from torch.
        C = CHANNELS
        z = torch.randn((B, C, S), device="cuda", generator=gen)
        m = torch.randn((B, C, T), device="cuda", generator=gen)
        logs = 0.5 * torch.randn((B, C, T), device="cuda", generator=gen)
        tx = torch.full((B,), T, dtype=torch.int32, device="cuda")
        ty = torch.full((B,), S, dtype=torch.int32, device="cuda")
        fused = lambda _: flashkit.monotonic_alignment_search_fused(  # noqa: E731
            z, m, logs, tx, ty, check=False)
        unfused = lambda _: flashkit.monotonic_alignment_search(  # noqa: E731
            neg_cent_vits(torch, z, m, logs).transpose(1, 2), tx, ty, check=False)
        fused(None)
        unfused(None)
        for name, call in (("flashkit_gpu_fused", fused),
                           ("flashkit_gpu_unfused_with_torch_neg_cent", unfused)):
            mem = peak_bytes(torch, lambda: call(None))
            med, all_ms, out = timer.run(call, args.reps, warmup_ms=WARMUP_MS)
            rows.append({"T": T, "S": S, "C": C, "method": name, "ms_median": med,
                         "ms_all": all_ms, "peak_mem_bytes": mem})
            print(f"  {name:18s} {med:10.3f} ms  mem {mem / 2**20:8.1f} MiB", flush=True)
            if name == "flashkit_gpu_fused":
                p_fused = out
        p_unf = out
        diff_items = int(((p_fused != p_unf).flatten(1).any(1)).sum().item())
        rows[-2]["mismatching_cells_vs_unfused"] = mismatches(p_fused, p_unf)
        rows[-2]["mismatching_items_vs_unfused"] = diff_items
        del z, m, logs, value, mask, value_np, mask_np
        torch.cuda.empty_cache()

    doc = {"what": "MAS, Super-MAS protocol: B=32, S=4T, value ~ N(0,1) fp32, mask of ones; "
                   "each method through its maximum_path drop-in; median of reps, L2 flushed "
                   "(ms_median: one call at a time from an idle stream, host time included; "
                   "ms_queued: Super-MAS's test.py timing, do_bench: calls queued, GPU time)",
           "gpu": gpu, "torch": torch.__version__, "batch": B, "rows": rows,
           "peers": {"super_mas": open(os.path.join(PEERS, "super_monotonic_align",
                                                    "COMMIT")).read().strip(),
                     "glow_tts": open(os.path.join(PEERS, "glow_tts_monotonic_align",
                                                   "COMMIT")).read().strip()}}
    tag = "h200" if "H200" in gpu else ("h100" if "H100" in gpu else "gpu")
    path = os.path.join(args.out, f"{DATE}-{tag}-mas.json")
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    print("wrote", path)
    summary(doc)
    plot(doc, path.replace(".json", ".png"))


def summary(doc):
    by = {}
    for r in doc["rows"]:
        by.setdefault(r["T"], {})[r["method"]] = r
    print(f"\n{'T':>5} {'flashkit':>9} {'fused':>9} {'super-mas':>10} {'speedup':>8} "
          f"{'cython':>9} {'mismatch':>8} | queued: {'flashkit':>9} {'super-mas':>10} {'speedup':>8}")
    for T, d in sorted(by.items()):
        fk, sm = d["flashkit_gpu"]["ms_median"], d["super_mas_triton"]["ms_median"]
        cy = d.get("cython", {}).get("ms_median", float("nan"))
        mm = [v for k, v in d["flashkit_gpu"].items() if k.startswith("mismatching")]
        fq = d["flashkit_gpu"].get("ms_queued", float("nan"))
        sq = d["super_mas_triton"].get("ms_queued", float("nan"))
        print(f"{T:5d} {fk:9.3f} {d['flashkit_gpu_fused']['ms_median']:9.3f} {sm:10.3f} "
              f"{sm / fk:7.1f}x {cy:9.1f} {mm[0] if mm else -1:8d} |         {fq:9.3f} {sq:10.3f} "
              f"{sq / fq:7.1f}x")


def plot(doc, png):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot (bench/mas.py --plot JSON draws it elsewhere)")
        return
    series = {}
    for r in doc["rows"]:
        series.setdefault(r["method"], []).append((r["T"], r["ms_median"]))
        if "ms_queued" in r and r["method"] in ("flashkit_gpu", "super_mas_triton"):
            series.setdefault(r["method"] + " (queued)", []).append((r["T"], r["ms_queued"]))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, pts in sorted(series.items()):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name,
                linestyle="--" if name.endswith("(queued)") else "-")
    ax.set_yscale("log")
    ax.set_xlabel("T (text length), S = 4T, B = %d" % doc["batch"])
    ax.set_ylabel("ms (median)")
    ax.set_title("MAS on %s" % doc["gpu"])
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    print("wrote", png)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=os.path.join(HERE, "results"))
    p.add_argument("--Ts", default="128,256,512,1024,1536,2048")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--cython-max-t", type=int, default=2048)
    p.add_argument("--plot", help="redraw the plot of this JSON file and exit")
    args = p.parse_args()
    if args.plot:
        with open(args.plot) as f:
            doc = json.load(f)
        summary(doc)
        plot(doc, args.plot.replace(".json", ".png"))
        return
    os.makedirs(args.out, exist_ok=True)
    sweep(args)


if __name__ == "__main__":
    main()
