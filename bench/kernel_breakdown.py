"""Per-kernel GPU time of one attention backward (torch.profiler): PyTorch SDPA's (cudnn, flash)
or flashkit's, the latter also with a random block mask (bench/variants.py's, --density) or a
window (--window L,R), dropout (--dropout P), softcap (--softcap C) or ALiBi (--alibi), to see which kernels a backward launches and what each costs.
  python3 bench/kernel_breakdown.py --backend cudnn --hdim 128 --seqlen 2048 [--causal]
  python3 bench/kernel_breakdown.py --backend flashkit --seqlen 8192 --density 0.1"""
import argparse

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from timing import profile_calls

BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="cudnn")
    ap.add_argument("--hdim", type=int, default=128)
    ap.add_argument("--seqlen", type=int, default=2048)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--density", type=float, default=0.0, help="flashkit: random block mask")
    ap.add_argument("--window", default="", help="flashkit: L,R")
    ap.add_argument("--dropout", type=float, default=0.0, help="flashkit: dropout_p")
    ap.add_argument("--softcap", type=float, default=0.0, help="flashkit: softcap")
    ap.add_argument("--alibi", action="store_true", help="flashkit: ALiBi, slopes 2^(-8 (h + 1) / H)")
    a = ap.parse_args()
    s, d = a.seqlen, a.hdim
    b, h = max(1, 16384 // s), 2048 // d
    if a.backend == "flashkit":
        return flashkit_breakdown(a, b, s, h, d)
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
               .requires_grad_(True) for _ in range(3))
    do = torch.randn_like(q)
    with sdpa_kernel([BACKENDS[a.backend]]):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=a.causal)
        bwd = lambda: torch.autograd.grad(out, (q, k, v), do, retain_graph=True)  # noqa: E731
        report(bwd, bwd, a.calls,
               f"{a.backend} bwd d{d} {'causal' if a.causal else 'full'} s{s} b{b} h{h}")


def report(warm, call, calls, title):
    """Kernels of `calls` runs of call() (after 3 of warm()), GPU us per call, largest first."""
    prof = profile_calls(call, calls, 3, warm)
    print(f"# {title}: us per call")
    for e in sorted(prof.key_averages(), key=lambda e: -e.device_time_total):
        if e.device_time_total > 0:
            print(f"{e.device_time_total / calls:10.1f}  {e.count // calls:3d}x  {e.key[:110]}")


def flashkit_breakdown(a, b, s, h, d):
    import flashkit
    from variants import random_block_mask
    kw = {}
    if a.density > 0:
        gen = torch.Generator().manual_seed(0)
        kw["block_mask"] = random_block_mask(s, a.density, 128, a.causal, gen)[None, None]
    if a.window:
        kw["window"] = tuple(int(x) for x in a.window.split(","))
    if a.dropout > 0:
        kw["dropout_p"] = a.dropout
    if a.softcap > 0:
        kw["softcap"] = a.softcap
    if a.alibi:
        kw["alibi_slopes"] = torch.tensor([2.0 ** (-8.0 * (i + 1) / h) for i in range(h)],
                                          device="cuda", dtype=torch.float32)
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    do = torch.randn_like(q)
    out = flashkit.attention(q, k, v, causal=a.causal, **kw)
    bwd = lambda: torch.autograd.grad(out, (q, k, v), do, retain_graph=True)  # noqa: E731

    def both():
        flashkit.attention(q, k, v, causal=a.causal, **kw)
        bwd()
    report(bwd, both, a.calls,
           f"flashkit fwd + bwd d{d} {'causal' if a.causal else 'full'} s{s} b{b} h{h} "
           f"{sorted(kw)} density {a.density} window {a.window or '-'} dropout {a.dropout} "
           f"softcap {a.softcap} alibi {a.alibi}")


if __name__ == "__main__":
    main()
