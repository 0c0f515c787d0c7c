"""Pivots the lines of bench/sm90_fwd_ab.cu and bench/sdpa_time.py (`<method> d<h> <mask> s<len>
<ms> <TFLOP/s>`, several rounds) into one table: TFLOP/s per shape and method (best of the
rounds), and each method's ratio to the column named by --ref (default cudnn).
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
    print("shape".ljust(20) + "".join(m.rjust(9) for m in methods))
    for shape, row in best.items():
        print(shape.ljust(20) + "".join(f"{row.get(m, 0):9.0f}" for m in methods))
    if any(a.ref in row for row in best.values()):
        print(f"ratio to {a.ref}:")
        for shape, row in best.items():
            r = row.get(a.ref)
            print(shape.ljust(20) + "".join(f"{row.get(m, 0) / r:9.3f}" if r else "      -" for m in methods))


if __name__ == "__main__":
    main()
