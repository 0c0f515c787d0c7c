"""Table of A/B decode runs (bench/gpu-s18.sh PART=ab): argv = result folders named r<round>-<variant>,
each holding one bench/decode.py JSON; prints us per (shape, column) with one column per variant."""
import glob
import json
import os
import sys


def load_runs(dirs, pattern, key):
    """{folder name: the `key` list of the one JSON matching `pattern` in it} (folders without one
    are left out)."""
    runs = {}
    for d in dirs:
        f = glob.glob(os.path.join(d, pattern))
        if f:
            runs[os.path.basename(d.rstrip("/"))] = json.load(open(f[0]))[key]
    return runs


def main():
    runs = load_runs(sys.argv[1:], "*-decode.json", "rows")
    names = list(runs)
    cols = []
    for rows in runs.values():
        for r in rows:
            cols += [c for c in r["us"] if c not in cols]
    shapes = []
    for rows in runs.values():
        for r in rows:
            key = (r["hdim"], r["batch"], r["heads"], r["ctx"])
            if key not in shapes:
                shapes.append(key)
    print("shape / column | " + " | ".join(n for n in names))
    for key in shapes:
        for c in cols:
            vals = []
            for n in names:
                r = next((r for r in runs[n] if (r["hdim"], r["batch"], r["heads"], r["ctx"]) == key), None)
                u = r["us"].get(c) if r else None
                vals.append(f"{u:7.1f}" if u else "      -")
            if any(v.strip() != "-" for v in vals):
                name = c.replace("flashkit_", "").replace("FLASHKIT_DECODE_", "")
                print(f"d{key[0]} b{key[1]} h{key[2]} {key[3] // 1024}k {name} | " + " | ".join(vals))


if __name__ == "__main__":
    main()
