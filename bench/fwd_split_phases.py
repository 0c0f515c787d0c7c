"""Per-kernel forward times (torch.profiler, median of 10) of the split tail's phases at hdim 128
dense 2k / 4k: FLASHKIT_SM90_FWD_SPLIT = 1 (split), 2 (parts only: no slots, no store: wrong
output, timing only), 3 (parts + slots + count, no merge or store), 0 (whole tiles), four
rotations of the order. Needs the build of branch v11-split-tail (bench/NOTES-attention.md
"Forward v11"); on main the knob does not exist.  PYTHONPATH=python:bench python3 bench/fwd_split_phases.py"""
import os, sys, torch
sys.path.insert(0, "bench")
from attention import Flashkit
from torch.profiler import profile, ProfilerActivity
modes = ["1", "2", "3", "0"]
for s in (2048, 4096):
    b, h, d = 16384 // s, 16, 128
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    fk = Flashkit(q, k, v, False)
    res = {m: [] for m in modes}
    for rnd in range(4):
        order = modes[rnd % 4:] + modes[:rnd % 4]
        for env in order:
            os.environ["FLASHKIT_SM90_FWD_SPLIT"] = env
            for _ in range(3): fk.fwd()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(10): fk.fwd()
                torch.cuda.synchronize()
            kern = sorted(e.time_range.end - e.time_range.start for e in prof.events()
                          if e.device_type == torch.autograd.DeviceType.CUDA and "sm90" in e.name)
            res[env].append(kern[len(kern) // 2])
    names = {"1": "split", "2": "parts only (no slots, no store)", "3": "parts + slots + count, no merge/store", "0": "whole"}
    for m in modes:
        print(f"s{s} {names[m]:40s} " + " ".join(f"{x:.1f}" for x in res[m]), flush=True)
