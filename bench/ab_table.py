"""Pivots the lines of bench/sm90_fwd_ab.cu and bench/sdpa_time.py (`<method> d<h> <mask> s<len>
<ms> <TFLOP/s>`, several rounds) into one table per head dim: TFLOP/s per shape and method
(best of the rounds) and its ratio to the column named by --ref (default cudnn).
usage: python3 bench/ab_table.py ab.txt [--ref cudnn]"""
import argparse
import collections


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--ref", default="cudnn")
    a = ap.parse_args()
    best = collections.defaultdict(dict)
    methods = []
    for line in open(a.file):
        f = line.split()
        if len(f) != 6 or not f[1].startswith("d") or not f[3].startswith("s"):
            continue
        m, shape, tf = f[0], " ".join(f[1:4]), float(f[5])
        if m not in methods:
            methods.append(m)
        best[shape][m] = max(best[shape].get(m, 0.0), tf)
    # One table per head dim, with the methods that have numbers there.
    for hd in sorted({k.split()[0] for k in best}, key=lambda x: int(x[1:])):
        shapes = [k for k in best if k.split()[0] == hd]
        cols = [m for m in methods if any(m in best[k] for k in shapes)]
        print("shape".ljust(18) + "".join(m[:10].rjust(11) for m in cols))
        for k in shapes:
            r = best[k].get(a.ref)
            cells = "".join((f"{best[k][m]:5.0f} {best[k][m] / r:4.2f}" if r else f"{best[k][m]:10.0f}")
                            .rjust(11) if m in best[k] else "-".rjust(11) for m in cols)
            print(k.ljust(18) + cells)
        print()

if __name__ == "__main__":
    main()
