"""One forward of flashkit.attention per score variant (plain, softcap, window, ALiBi, dropout),
bf16, hdim 128, b2 h16 s8k (issue 6's shape), for Nsight Compute:
  ncu --section SourceCounters -k regex:Fwd python3 bench/profile_variants.py [--causal] [names]
so the variants' kernels can be set beside plain's instruction by instruction."""
import argparse

import torch

import flashkit


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("names", nargs="*", default=["plain", "softcap", "window"])
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--seqlen", type=int, default=8192)
    ap.add_argument("--hdim", type=int, default=128)
    args = ap.parse_args()
    s, d = args.seqlen, args.hdim
    b, h = max(1, 16384 // s), 2048 // d
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    slopes = torch.tensor([2 ** (-8 * (i + 1) / h) for i in range(h)], device="cuda")
    options = {"plain": {}, "softcap": {"softcap": 30.0}, "alibi": {"alibi_slopes": slopes},
               "window": {"window": (1024, 0) if args.causal else (1024, 1024)},
               "dropout": {"dropout_p": 0.1}}
    with torch.no_grad():
        for name in args.names:
            flashkit.attention(q, k, v, causal=args.causal, **options[name])
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
