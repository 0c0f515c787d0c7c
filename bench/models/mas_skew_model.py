"""NumPy model of the MAS staged kernel's lane-skewed frame loop (forward.cuh, kSkew; v14).

It replays, warp by warp, the index logic of the kernel (lane l at frame s - l at step s, the
upstream value shuffled two steps earlier, lane 0's ring values, lane 31's ring stores, the stage
slots with their issue/wait points, the decision words assembled across two step blocks, the
extra step block) and checks the path walked back from its decision bits against the Cython
loop. Stage slots carry the chunk they hold, so a read of a refilled slot fails the model. Warps
run one after another here, so this checks data and indices, not the barriers' timing.

usage: python3 bench/models/mas_skew_model.py   (prints one line per case, exits 1 on a mismatch)
"""
import sys

import numpy as np


def cython_path(value, tx, ty, neg):
    v = value.astype(np.float32).copy()
    T, S = v.shape
    for y in range(ty):
        for x in range(max(0, tx + y - ty), min(tx, y + 1)):
            v_cur = np.float32(neg) if x == y else v[x, y - 1]
            v_prev = (np.float32(0) if y == 0 else np.float32(neg)) if x == 0 else v[x - 1, y - 1]
            v[x, y] = np.float32(v[x, y] + max(v_prev, v_cur))
    path = np.zeros((T, S), np.int32)
    index = tx - 1
    for y in range(ty - 1, -1, -1):
        path[index, y] = 1
        if index != 0 and (index == y or v[index, y - 1] < v[index - 1, y - 1]):
            index -= 1
    return path


def skew_bits(value, tx, ty, neg, K=2, kslots=16, kcols=8):
    """Decision words [block][row] as the skewed kernel stores them (one CTA, T <= 32 K x 8)."""
    T, S = value.shape
    warps = -(-T // (32 * K))
    nblocks = -(-ty // 32)
    nsteps = nblocks + 1
    kahead = kslots - 5
    kchunks = 32 // kcols
    bits = np.zeros((nblocks, warps * 32 * K), np.uint32)
    ring_above = None  # frames of the warp above's last row (None: the item's row -1)
    for w in range(warps):
        row0 = w * 32 * K
        rows = [[min(row0 + l * K + i, T - 1) for i in range(K)] for l in range(32)]
        # stage: slot -> (chunk, data[K][kcols]) per lane
        slot = [[(-1, None)] * kslots for _ in range(32)]

        def issue(g):
            for l in range(32):
                data = np.zeros((K, kcols), np.float32)
                for i in range(K):
                    for e in range(kcols):
                        f = g * kcols + e
                        if f < S:
                            data[i, e] = value[rows[l][i], f]
                slot[l][g % kslots] = (g, data)

        landed = -1  # chunks up to this one may be read (the waits)

        def read(l, f):
            g, e = f // kcols, f % kcols
            assert g <= landed, f"lane {l} reads chunk {g} before its wait (landed {landed})"
            tag, data = slot[l][g % kslots]
            assert tag == g, f"lane {l} frame {f}: slot holds chunk {tag}, needs {g}"
            return data[:, e].copy()

        for g in range(kahead):
            issue(g)
        landed = 0
        q = np.full((32, K), neg, np.float32)
        recv = np.full((32, 2), neg, np.float32)
        pend = np.zeros((32, K), np.uint32)
        v = [read(l, 0) if l == 0 else read(l, 0) for l in range(32)]
        ring = np.full(32 * nsteps + 64, np.nan, np.float32)  # this warp's last row by frame
        prev = np.float32(0) if w == 0 else np.float32(neg)
        for c in range(nsteps):
            if c < nblocks and ring_above is not None:
                r = ring_above[32 * c:32 * c + 32].copy()
                assert not np.isnan(r[:min(32, ty - 32 * c)]).any(), "upstream frame not written"
            else:
                r = np.full(32, neg, np.float32)
            warp_rows_end = row0 + 32 * K
            general = not (32 * c >= warp_rows_end + 32 and c * kchunks <= S * 4 // 32 - kchunks - kahead
                           and c + 1 < nsteps)
            cb = np.zeros((32, K), np.uint32)
            for j in range(32):
                s = 32 * c + j
                cur = [v[l].copy() for l in range(32)]
                if j % kcols == kcols - 1:
                    g = (s + 1) // kcols
                    issue(g + kahead - 1)
                    landed = g
                for l in range(32):
                    v[l] = read(l, max(s - l + 1, 0))
                newq = q.copy()
                shuffled = np.empty(32, np.float32)
                for l in range(32):
                    f = s - l
                    x0 = row0 + l * K
                    if general:
                        for i in range(K):
                            if x0 + i > f:
                                cur[l][i] = 0
                    nb = (prev if j == 0 else r[j - 1]) if l == 0 else recv[l, j & 1]
                    active = f >= 0 or not general
                    assert f >= 0 or general
                    for i in range(K):
                        vp = q[l, i - 1] if i > 0 else nb
                        vc = q[l, i]
                        take = vp > vc
                        qn = np.float32((vp if take else vc) + cur[l][i])
                        if active:
                            newq[l, i] = qn
                            if take:
                                cb[l, i] |= np.uint32(1 << j)
                q = newq
                for l in range(32):
                    shuffled[l] = q[l - 1, K - 1] if l > 0 else q[0, K - 1]
                recv[:, j & 1] = shuffled
                f31 = s - 31
                if 0 <= f31 < 32 * nblocks:
                    ring[f31] = q[31, K - 1]
            if c > 0:
                for l in range(32):
                    for i in range(K):
                        word = pend[l, i] | (np.uint32((int(cb[l, i]) << (32 - l)) & 0xffffffff) if l else 0)
                        pend[l, i] = np.uint32(int(cb[l, i]) >> l)
                        if c - 1 < nblocks:
                            bits[c - 1, row0 + l * K + i] = word
            else:
                for l in range(32):
                    for i in range(K):
                        pend[l, i] = np.uint32(int(cb[l, i]) >> l)
            prev = r[31]
        ring_above = ring
    return bits


def path_from_bits(bits, T, S, tx, ty):
    path = np.zeros((T, S), np.int32)
    index = tx - 1
    for y in range(ty - 1, -1, -1):
        path[index, y] = 1
        if index != 0 and (index == y or (int(bits[y // 32, index]) >> (y % 32)) & 1):
            index -= 1
    return path


def main():
    rng = np.random.default_rng(5)
    bad = 0
    cases = [(37, 100, 37, 100), (64, 256, 64, 256), (128, 512, 128, 512), (130, 300, 97, 251),
             (200, 700, 150, 640), (256, 600, 256, 600)]
    for T, S, tx, ty in cases:
        for kind in ("normal", "ties"):
            value = (rng.standard_normal((T, S)) if kind == "normal"
                     else rng.integers(-2, 1, (T, S))).astype(np.float32)
            want = cython_path(value, tx, ty, -1e9)
            got = path_from_bits(skew_bits(value, tx, ty, np.float32(-1e9)), T, S, tx, ty)
            n = int((want != got).sum())
            bad += n
            print(f"T={T} S={S} tx={tx} ty={ty} {kind}: {n} mismatching cells", flush=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
