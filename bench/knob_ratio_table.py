"""Pivots bench/sm80_bwd_knobs.py logs of several extensions (one log per round and extension,
named r<round>-<extension>.log, as gpu_prelude.sh's ab_rounds writes them) into one table: per
shape, each extension's ratio to FA2 measured in its own process, every round, and the best.
usage: python3 bench/knob_ratio_table.py LOGDIR/r*-*.log"""
import collections
import os
import re
import sys


def main():
    ratios = collections.defaultdict(lambda: collections.defaultdict(list))
    names = []
    for path in sys.argv[1:]:
        m = re.match(r"r(\d+)-(.+)\.log$", os.path.basename(path))
        if not m:
            continue
        ext = m.group(2)
        if ext not in names:
            names.append(ext)
        for line in open(path):
            if " ratio " not in line or not line.startswith("d"):
                continue
            shape = line[:line.index(" base ")] if " base " in line else line.split("  ")[0]
            found = re.search(r"ratio base ([0-9.]+)", line)
            if found:
                ratios[shape][ext].append(float(found.group(1)))
    print("shape".ljust(22) + "".join(n[:16].rjust(22) for n in names))
    for shape, row in ratios.items():
        cells = []
        for n in names:
            xs = row.get(n, [])
            cells.append((" / ".join(f"{x:.3f}" for x in xs) + (f" ({max(xs):.3f})" if xs else "-")).rjust(22))
        print(shape.ljust(22) + "".join(cells))


if __name__ == "__main__":
    main()
