"""CPU benchmark of monotonic alignment search (issue 2, item 10): flashkit's CPU backend vs the
Cython `monotonic_align` (PyPI `monotonic-alignment-search`, glow-tts's core.pyx) on the same
machine and inputs, paths compared for equality. Writes bench/results/<date>-cpu-mas.json.

The Cython package is a peer, not a dependency: it is pip-installed at run time into the ignored
folder bench/peers/ and its compiled core is loaded by file (its Python wrapper needs torch).

usage: PYTHONPATH=python python3 bench/mas_cpu.py [--batch 32 --text 512 --mel 2048 --repeats 5]
"""
import argparse
import glob
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
PEERS = os.path.join(HERE, "peers", "cpu")
PEER_PKG = "monotonic-alignment-search==0.2.1"


def load_cython_core():
    """maximum_path_c from the PyPI wheel, installed into bench/peers/cpu when missing."""
    pattern = os.path.join(PEERS, "monotonic_alignment_search", "core*.so")
    if not glob.glob(pattern):
        subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                               "--target", PEERS, PEER_PKG])
    so = glob.glob(pattern)[0]
    spec = importlib.util.spec_from_file_location("monotonic_alignment_search.core", so)
    core = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(core)
    return core, so


def uses_openmp(so):
    out = subprocess.run(["ldd", so], capture_output=True, text=True).stdout
    return "gomp" in out or "libomp" in out


def median_ms(fn, repeats, setup=lambda: None):
    times = []
    for _ in range(repeats):
        state = setup()
        t0 = time.perf_counter()
        fn(state)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), times


def inputs(args):
    rng = np.random.default_rng(0)
    value = (rng.standard_normal((args.batch, args.text, args.mel), dtype=np.float32) - 2.0)
    tx = np.full(args.batch, args.text, np.int32)
    ty = np.full(args.batch, args.mel, np.int32)
    return value, tx, ty


def time_flashkit(args):
    """flashkit only (run in a subprocess per thread count: OpenMP reads OMP_NUM_THREADS once)."""
    import flashkit
    from flashkit import _C

    value, tx, ty = inputs(args)
    path = np.empty(value.shape, np.int32)
    run = lambda _: _C.monotonic_alignment_search(value, tx, ty, path, None, -1e9)  # noqa: E731
    run(None)  # warm-up: first-touch of the output pages
    ms, all_ms = median_ms(run, args.repeats)
    mask = np.ones(value.shape, np.float32)
    flashkit.maximum_path(value, mask)
    dropin_ms, _ = median_ms(lambda _: flashkit.maximum_path(value, mask), args.repeats)
    np.save(args.save_path, path)
    return {"ms_median": ms, "ms_all": all_ms, "dropin_ms_median": dropin_ms,
            "threads": flashkit.build_info()["cpu_threads"]}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--text", type=int, default=512)
    p.add_argument("--mel", type=int, default=2048)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--out", default=os.path.join(HERE, "results", "2026-11-21-cpu-mas.json"))
    p.add_argument("--flashkit-only", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--save-path", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.flashkit_only:
        print(json.dumps(time_flashkit(args)))
        return

    core, so = load_cython_core()
    value, tx, ty = inputs(args)

    # Cython: maximum_path_c updates `value` in place and needs a zeroed int32 path, so each
    # repeat gets a fresh copy (not timed) and the zeroing is timed with the core call.
    def cy_setup():
        return value.copy()

    def cy_run(v):
        path = np.zeros(v.shape, np.int32)
        core.maximum_path_c(path, v, tx, ty, -1e9)
        cy_run.path = path

    print(f"Cython monotonic_align on b{args.batch} t{args.text} s{args.mel} ...", flush=True)
    cy_ms, cy_all = median_ms(cy_run, args.repeats, cy_setup)
    cy_path = cy_run.path

    results = {}
    ncpu = os.cpu_count()
    for threads in sorted({1, ncpu}):
        save = os.path.join(PEERS, f"flashkit_path_{threads}.npy")
        os.makedirs(PEERS, exist_ok=True)
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        out = subprocess.check_output(
            [sys.executable, __file__, "--flashkit-only", "--save-path", save,
             "--batch", str(args.batch), "--text", str(args.text), "--mel", str(args.mel),
             "--repeats", str(args.repeats)], env=env, text=True)
        r = json.loads(out.strip().splitlines()[-1])
        fk_path = np.load(save)
        r["paths_identical"] = bool(np.array_equal(fk_path, cy_path))
        r["mismatching_cells"] = int((fk_path != cy_path).sum())
        r["speedup_vs_cython"] = cy_ms / r["ms_median"]
        os.remove(save)
        results[f"{threads}_threads"] = r
        print(f"flashkit cpu, {threads} thread(s): {r['ms_median']:.2f} ms "
              f"(drop-in maximum_path {r['dropin_ms_median']:.2f} ms), "
              f"{r['speedup_vs_cython']:.1f}x vs Cython, paths identical: {r['paths_identical']}")

    print(f"Cython: {cy_ms:.1f} ms (OpenMP: {uses_openmp(so)})")
    doc = {
        "what": "MAS CPU: flashkit vs Cython monotonic_align (glow-tts core.pyx, PyPI "
                + PEER_PKG + "), same machine, same inputs, full lengths, NEG -1e9",
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": ncpu,
                    "python": platform.python_version()},
        "problem": {"batch": args.batch, "text": args.text, "mel": args.mel, "dtype": "float32",
                    "value": "standard normal - 2", "repeats": args.repeats},
        "cython": {"ms_median": cy_ms, "ms_all": cy_all, "openmp": uses_openmp(so),
                   "timed": "np.zeros(path int32) + maximum_path_c (value copy untimed)"},
        "flashkit": results,
        "flashkit_timed": "_C.monotonic_alignment_search into a preallocated int32 path (writes "
                          "all B*T*S cells); dropin_ms: flashkit.maximum_path incl. allocation",
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=2)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
