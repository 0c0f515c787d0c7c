"""PyTorch SDPA forward timed like bench/sm90_fwd_ab.cu (bf16, [b, s, h, d] tensors seen as
[b, h, s, d], batch * seqlen = 16k, hidden 2048; 3 warm-up calls, median of 7 x 10 calls with
CUDA events), one line per shape in the harness's format, so an A/B call's table has the peers
measured on the same machine. --bwd: the backward alone (torch.autograd.grad of one forward's
output, retained graph, no .grad accumulation; TFLOP/s as 2.5 forwards), like bench/sm90_bwd_ab.cu.
  python3 bench/sdpa_time.py [--hdim 128] [--backends cudnn,flash] [--bwd]"""
import argparse

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from timing import median_ms

BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hdim", type=int, default=128)
    ap.add_argument("--backends", default="cudnn")
    ap.add_argument("--seqlens", default="2048,4096,8192,16384")
    ap.add_argument("--bwd", action="store_true")
    a = ap.parse_args()
    d = a.hdim
    for name in a.backends.split(","):
        for causal in (False, True):
            for s in map(int, a.seqlens.split(",")):
                b, h = max(1, 16384 // s), 2048 // d
                q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
                           .requires_grad_(a.bwd) for _ in range(3))
                do = torch.randn_like(q)
                with sdpa_kernel([BACKENDS[name]]):
                    fwd = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    if a.bwd:
                        out = fwd()  # one graph, differentiated again each call (no .grad sums)
                        t = median_ms(lambda: torch.autograd.grad(out, (q, k, v), do, retain_graph=True), 7, 3, 10)
                    else:
                        t = median_ms(fwd, 7, 3, 10)
                flops = 4.0 * b * h * s * s * d / (2 if causal else 1) * (2.5 if a.bwd else 1)
                print(f"{name} d{d} {'causal' if causal else 'full'} s{s} {t:.4f} {flops / (t * 1e-3) / 1e12:.1f}",
                      flush=True)


if __name__ == "__main__":
    main()
