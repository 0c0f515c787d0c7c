"""The sustained, interleaved timing protocol (bench/attention.py --protocol sustained, and
bench/NOTES-attention.md "Clocks under load"). Under back-to-back attention work an H200 holds its
power limit (~690 W) and lowers its SM clock from 1980 MHz to 1575-1860 MHz, by an amount that
depends on the kernel; a method timed in a short burst after an idle gap runs partly at boost
clock, one timed right after another method's burst does not. So each shape here is timed with
the card held under load throughout: a heat-up on the first method, then `rounds` rounds in
which every method (in alternating order) runs `settle` seconds untimed and then `window`
seconds timed (batches of 5 calls between CUDA events), back to back. A method's time is the
median of its rounds' per-call means; its SM clock and board power are the medians of
nvidia-smi's samples (every 50 ms) inside its timed windows."""
import json
import shutil
import statistics
import subprocess
import threading
import time

import torch

from timing import batch_ms


class ClockLog:
    """nvidia-smi's SM clock (MHz), board power (W) and temperature (C), sampled every 50 ms in the
    background, each sample stamped with the host time it arrived (time.time())."""

    def __init__(self):
        self.samples = []
        self.proc = None
        if shutil.which("nvidia-smi") is None:
            return
        dev = str(torch.cuda.current_device())
        self.proc = subprocess.Popen(
            ["nvidia-smi", "-i", dev, "--query-gpu=clocks.sm,power.draw,temperature.gpu",
             "--format=csv,noheader,nounits", "-lms", "50"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                clk, pw, temp = (float(x) for x in line.split(","))
            except ValueError:
                continue
            self.samples.append((time.time(), clk, pw, temp))

    def window(self, t0, t1):
        """The (clock, power, temperature) samples that arrived in [t0, t1]."""
        return [x[1:] for x in self.samples if t0 <= x[0] <= t1]

    def between(self, t0, t1):
        """Medians of (clock, power) over the samples that arrived in [t0, t1]; None if none."""
        got = self.window(t0, t1)
        if not got:
            return None, None
        return statistics.median(x[0] for x in got), statistics.median(x[1] for x in got)

    def close(self):
        if self.proc:
            self.proc.terminate()


def run_for(fn, seconds):
    """fn() back to back for about `seconds` (untimed), then a synchronize."""
    t_end = time.time() + seconds
    while time.time() < t_end:
        for _ in range(3):
            fn()
        torch.cuda.synchronize()


def timed_window(fn, seconds, per_batch=5):
    """Mean ms per call over batches of per_batch calls between CUDA events, for about `seconds`."""
    total, calls = 0.0, 0
    t_end = time.time() + seconds
    while time.time() < t_end or calls == 0:
        total += batch_ms(fn, per_batch)
        calls += per_batch
    return total / calls


def interleaved(fns, clocks, rounds=2, heat=0.5, settle=0.2, window=0.4):
    """fns: {name: fn}. Returns {name: (ms per call, SM MHz, W)} timed as the module says."""
    names = list(fns)
    if not names:
        return {}
    run_for(fns[names[0]], heat)
    got = {n: [] for n in names}
    for r in range(rounds):
        for n in (names if r % 2 == 0 else names[::-1]):
            run_for(fns[n], settle)
            t0 = time.time()
            ms = timed_window(fns[n], window)
            got[n].append((ms,) + clocks.between(t0, time.time()))
    out = {}
    for n, runs in got.items():
        ms = statistics.median(x[0] for x in runs)
        clk = [x[1] for x in runs if x[1] is not None]
        pw = [x[2] for x in runs if x[2] is not None]
        out[n] = (ms, statistics.median(clk) if clk else None, statistics.median(pw) if pw else None)
    return out


def save_rows(path, rows):
    """rows (dicts) into the JSON file `path` ({"gpu", "rows"}); nothing when path is empty."""
    if path:
        with open(path, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
