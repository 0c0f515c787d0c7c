"""Warp instructions executed and warp stall samples by opcode, from the per-SASS-instruction CSV
that `ncu -i REPORT --page source --csv --print-source sass` writes (gzipped, as bench/gpu-s39b.sh
PHASE=src keeps it): the top opcodes of each file, with their share of the kernel's instructions
and of its stall samples.
  python3 bench/ncu_opcodes.py src-d256-bwd-cap0.csv.gz src-d256-bwd-cap30.csv.gz"""
import collections
import csv
import gzip
import sys


def load(path):
    """(opcode, instructions executed, stall samples) of each SASS line of the file's kernel."""
    rows = list(csv.reader(gzip.open(path, "rt")))
    header, data = rows[1], rows[2:]
    i_src, i_ex = header.index("Source"), header.index("Instructions Executed")
    i_stall = header.index("Warp Stall Sampling (All Samples)")
    out = []
    for r in data:
        try:
            executed, stalls = int(r[i_ex]), int(r[i_stall])
        except (IndexError, ValueError):
            continue
        words = r[i_src].split()
        if words and words[0].startswith("@"):  # a predicate guard
            words = words[1:]
        out.append((words[0].split(".")[0] if words else "?", executed, stalls))
    return out


def main():
    for path in sys.argv[1:]:
        lines = load(path)
        total, stalls = sum(x[1] for x in lines), sum(x[2] for x in lines)
        print(path, "warp instr executed", total, "stall samples", stalls)
        executed, stalled = collections.Counter(), collections.Counter()
        for op, n, s in lines:
            executed[op] += n
            stalled[op] += s
        for op, n in executed.most_common(22):
            print(f"  {op:10} {n:12d} {n / total * 100:5.1f}%  stalls {stalled[op] / stalls * 100:5.1f}%")


if __name__ == "__main__":
    main()
