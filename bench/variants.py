"""Attention variants' cost over the plain kernel on one GPU (issue 6's bar: each variant <= 10%
over plain at hdim 128, seqlen 8k; block-sparse runtime within 1.3x of density x dense): forward
and backward TFLOP/s of flashkit.attention with softcap, ALiBi, a sliding window, dropout and
block masks, next to the plain kernel and to PyTorch SDPA where it has the variant (flash backend
for plain and dropout, the efficient backend with attn_mask for ALiBi, window and block masks;
SDPA has no softcap). TFLOP/s count visible (query, key) pairs only, for every peer alike, so a
masked SDPA run that computes every pair shows as slower. Writes <out>/variants.json.
--protocol sustained: flashkit's cases only (no SDPA), interleaved with the card held under load
(bench/sustained.py), each case's SM clock and power recorded; writes variants-sustained.json."""
import argparse
import json
import os
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import flashkit

from sustained import ClockLog, interleaved
from timing import median_ms


def visible(s, causal, window):
    """[s, s] bool: the (query, key) pairs a square problem computes under causal and window."""
    left, right = window
    i = torch.arange(s, device="cuda")[:, None]
    j = torch.arange(s, device="cuda")[None, :]
    keep = torch.ones(s, s, dtype=torch.bool, device="cuda")
    if left >= 0:
        keep &= j >= i - left
    if right >= 0:
        keep &= j <= i + right
    if causal:
        keep &= j <= i
    return keep


def random_block_mask(s, density, block, causal, gen):
    """Each query block keeps round(density * visible blocks) random key blocks of its row (at
    least one, its diagonal when causal): equal work per row, so time should scale with density."""
    n = s // block
    mask = torch.zeros(n, n, dtype=torch.uint8)
    for i in range(n):
        cols = i + 1 if causal else n
        keep = max(1, round(density * cols))
        chosen = torch.randperm(cols, generator=gen)[:keep]
        if causal and i not in chosen:
            chosen[0] = i
        mask[i, chosen] = 1
    return mask.cuda()


def alibi_bias(slopes, s, causal):
    i = torch.arange(s, device="cuda")[:, None]
    j = torch.arange(s, device="cuda")[None, :]
    bias = -slopes[:, None, None] * (i - j).abs()[None].float()
    if causal:
        bias = bias.masked_fill(j > i, float("-inf"))
    return bias[None].to(torch.bfloat16)


def time_pair(run, q, k, v, do, fwd_only=False):
    """(forward ms, backward ms) of run(q, k, v) -> out; backward = (fwd + bwd) - fwd. Batches of
    5 back-to-back calls, as bench/attention.py times them: a single call between two events also
    timed the host's dispatch before its first kernel, which at 0.2-0.6 ms of GPU time (sparse
    masks, windows) was most of the number (session 10: 0.4 ms for a 0.23 ms forward kernel)."""
    fwd = median_ms(lambda: run(q, k, v), per_call=5)
    if fwd_only:
        return fwd, float("nan")

    def both():
        q.grad = k.grad = v.grad = None
        run(q, k, v).backward(do)
    return fwd, median_ms(both, per_call=5) - fwd


def sustained_rows(cases, wanted, causal, q, k, v, do, clocks, args, bhd):
    """flashkit's cases of one mask setting timed under bench/sustained.py's protocol: the
    forwards interleaved, then the forward + backward pairs (backward = pair - forward)."""
    b, h, d = bhd
    fwd, both, errors = {}, {}, {}
    for name, kw, _, keep in cases:
        if wanted and name not in wanted and name != "plain":
            continue
        def run(kw=kw):
            return flashkit.attention(q, k, v, causal=causal, **kw)
        try:  # a variant the build does not support stays out of the interleaving
            run()
        except Exception as e:
            errors[name] = str(e)[:200]
            continue
        fwd[name] = run

        def pair(run=run):
            q.grad = k.grad = v.grad = None
            run().backward(do)
        both[name] = pair
    got_f = interleaved(fwd, clocks, args.rounds)
    got_b = {} if args.fwd_only else interleaved(both, clocks, args.rounds)
    rows = [{"variant": n, "causal": causal, "error": e} for n, e in errors.items()]
    for name, kw, _, keep in cases:
        if name not in fwd:
            continue
        pairs = int(keep.sum())
        tf = lambda ms, mult: mult * 4 * b * h * pairs * d / ms / 1e9  # noqa: E731
        f_ms, f_mhz, f_w = got_f[name]
        row = {"variant": name, "causal": causal, "pairs": pairs, "fwd_ms": f_ms,
               "fwd_tflops": tf(f_ms, 1), "fwd_sm_mhz": f_mhz, "fwd_watts": f_w}
        if name in got_b:
            p_ms, p_mhz, p_w = got_b[name]
            row.update(bwd_ms=p_ms - f_ms, bwd_tflops=tf(p_ms - f_ms, 2.5), bwd_sm_mhz=p_mhz,
                       bwd_watts=p_w)
        else:
            row.update(bwd_ms=float("nan"), bwd_tflops=float("nan"))
        rows.append(row)
    return rows


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="bench/results")
    p.add_argument("--seqlen", type=int, default=8192)
    p.add_argument("--hdim", type=int, default=128)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--variants", default="",
                   help="comma-separated variant names to run (default: all)")
    p.add_argument("--fwd-only", action="store_true",
                   help="forward only (e.g. hdim 256 variants, whose backward a minimal build lacks)")
    p.add_argument("--densities", default="0.5,0.25,0.1",
                   help="block-sparse densities (1 keeps every block: the mask kernel's own cost)")
    p.add_argument("--protocol", default="burst", choices=["burst", "sustained"])
    p.add_argument("--rounds", type=int, default=2, help="sustained: rounds of the interleaving")
    args = p.parse_args()
    sustained = args.protocol == "sustained"
    clocks = ClockLog() if sustained else None
    b, s, h, d = args.batch, args.seqlen, args.heads, args.hdim
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    do = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)
    qt, kt, vt, dot = (t.detach().transpose(1, 2).contiguous() for t in (q, k, v, do))
    qt.requires_grad_(), kt.requires_grad_(), vt.requires_grad_()
    slopes = torch.rand(h, device="cuda", dtype=torch.float32) * 0.1
    block = 128

    def sdpa(backend, **kw):
        def run(q_, k_, v_):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q_, k_, v_, **kw)
        return run

    # The first case timed in a process ran up to 8% slow (session 21: plain's forward 644 vs 691
    # TFLOP/s in two calls, the same kernel at 1.57 ms in both by torch.profiler), and plain is
    # every ratio's denominator: ~1 s of untimed plain forward + backward first, at full clocks.
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 1.0:
        q.grad = k.grad = v.grad = None
        flashkit.attention(q, k, v).backward(do)
        torch.cuda.synchronize()

    rows = []
    for causal in (False, True):
        win = (1024, 0) if causal else (1024, 1024)
        # (name, flashkit options, SDPA peer or None, the visible (query, key) pairs as [s, s])
        cases = [("plain", {}, sdpa(SDPBackend.FLASH_ATTENTION, is_causal=causal),
                  visible(s, causal, (-1, -1))),
                 ("softcap", {"softcap": 30.0}, None, visible(s, causal, (-1, -1))),
                 ("alibi", {"alibi_slopes": slopes},
                  sdpa(SDPBackend.EFFICIENT_ATTENTION, attn_mask=alibi_bias(slopes, s, causal)),
                  visible(s, causal, (-1, -1))),
                 ("window", {"window": win},
                  sdpa(SDPBackend.EFFICIENT_ATTENTION, attn_mask=visible(s, causal, win)),
                  visible(s, causal, win)),
                 ("dropout", {"dropout_p": 0.1},
                  sdpa(SDPBackend.FLASH_ATTENTION, is_causal=causal, dropout_p=0.1),
                  visible(s, causal, (-1, -1)))]
        for density in (float(x) for x in args.densities.split(",")):
            bm = random_block_mask(s, density, block, causal, gen)
            dense = bm.repeat_interleave(block, 0).repeat_interleave(block, 1).bool()
            dense &= visible(s, causal, (-1, -1))
            cases.append((f"blocksparse_{density}", {"block_mask": bm[None, None]},
                          sdpa(SDPBackend.EFFICIENT_ATTENTION, attn_mask=dense), dense))
        wanted = set(filter(None, args.variants.split(",")))
        if sustained:
            rows += sustained_rows(cases, wanted, causal, q, k, v, do, clocks, args, (b, h, d))
            continue
        for name, kw, peer, keep in cases:
            if wanted and name not in wanted and name != "plain":
                continue
            pairs = int(keep.sum())
            row = {"variant": name, "causal": causal, "pairs": pairs}
            tf = lambda ms, mult: mult * 4 * b * h * pairs * d / ms / 1e9  # noqa: E731
            try:
                fwd, bwd = time_pair(lambda q_, k_, v_: flashkit.attention(
                    q_, k_, v_, causal=causal, **kw), q, k, v, do, args.fwd_only)
                row.update(fwd_ms=fwd, bwd_ms=bwd, fwd_tflops=tf(fwd, 1), bwd_tflops=tf(bwd, 2.5))
            except Exception as e:  # a variant the build does not support
                row["error"] = str(e)[:200]
            if peer is not None:
                try:
                    fwd, bwd = time_pair(peer, qt, kt, vt, dot, args.fwd_only)
                    row.update(sdpa_fwd_ms=fwd, sdpa_bwd_ms=bwd, sdpa_fwd_tflops=tf(fwd, 1),
                               sdpa_bwd_tflops=tf(bwd, 2.5))
                except Exception as e:
                    row["sdpa_error"] = str(e)[:200]
            rows.append(row)
            torch.cuda.empty_cache()
    for causal in (False, True):
        base = next(r for r in rows if r["variant"] == "plain" and r["causal"] == causal)
        for r in rows:
            if r["causal"] != causal or "fwd_ms" not in r or "fwd_ms" not in base:
                continue
            if r["variant"].startswith("blocksparse"):  # time vs density x dense time
                dens = r["pairs"] / base["pairs"]
                r["fwd_time_over_density_x_dense"] = r["fwd_ms"] / (dens * base["fwd_ms"])
                r["bwd_time_over_density_x_dense"] = r["bwd_ms"] / (dens * base["bwd_ms"])
            else:  # cost per visible pair over plain
                r["fwd_cost_over_plain"] = base["fwd_tflops"] / r["fwd_tflops"] - 1
                r["bwd_cost_over_plain"] = base["bwd_tflops"] / r["bwd_tflops"] - 1
    if clocks:
        clocks.close()
    res = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "batch": b,
           "protocol": args.protocol,
           "seqlen": s, "heads": h, "hdim": d, "dtype": "bfloat16", "block_mask_block": block,
           "rows": rows}
    os.makedirs(args.out, exist_ok=True)
    name = f"variants-d{d}{'-fwd' if args.fwd_only else ''}.json" if args.variants or args.fwd_only \
        else "variants.json"
    if sustained:
        name = name.replace(".json", "-sustained.json")
    with open(os.path.join(args.out, name), "w") as f:
        json.dump(res, f, indent=1)
    print(f"{'variant':17} {'causal':6} {'fwd TF/s':>8} {'bwd TF/s':>8} {'cost f/b':>14} "
          f"{'sdpa fwd':>8} {'sdpa bwd':>8}")
    for r in rows:
        if "error" in r:
            print(f"{r['variant']:17} {str(r['causal']):6} error: {r['error']}")
            continue
        if "fwd_time_over_density_x_dense" in r:
            cost = (f"{r['fwd_time_over_density_x_dense']:5.2f}x/"
                    f"{r['bwd_time_over_density_x_dense']:5.2f}x")
        else:
            cost = (f"{100 * r.get('fwd_cost_over_plain', 0):+5.1f}%/"
                    f"{100 * r.get('bwd_cost_over_plain', 0):+5.1f}%")
        peer = (f"{r['sdpa_fwd_tflops']:8.1f} {r['sdpa_bwd_tflops']:8.1f}"
                if "sdpa_fwd_tflops" in r else f"{'-':>8} {'-':>8}")
        if r.get("fwd_sm_mhz"):
            peer += f"  @{r['fwd_sm_mhz']:.0f}/{r.get('bwd_sm_mhz') or 0:.0f} MHz"
        print(f"{r['variant']:17} {str(r['causal']):6} {r['fwd_tflops']:8.1f} "
              f"{r['bwd_tflops']:8.1f} {cost:>14} {peer}")


if __name__ == "__main__":
    main()
