"""Per-kernel GPU time of one PyTorch SDPA backward (torch.profiler), to set beside the harness's
own breakdown (nsys): which kernels a peer's backward launches and what each costs.
  python3 bench/kernel_breakdown.py --backend cudnn --hdim 128 --seqlen 2048 [--causal]"""
import argparse

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="cudnn")
    ap.add_argument("--hdim", type=int, default=128)
    ap.add_argument("--seqlen", type=int, default=2048)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--calls", type=int, default=10)
    a = ap.parse_args()
    s, d = a.seqlen, a.hdim
    b, h = max(1, 16384 // s), 2048 // d
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
               .requires_grad_(True) for _ in range(3))
    do = torch.randn_like(q)
    with sdpa_kernel([BACKENDS[a.backend]]):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=a.causal)
        for _ in range(3):
            torch.autograd.grad(out, (q, k, v), do, retain_graph=True)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(a.calls):
                torch.autograd.grad(out, (q, k, v), do, retain_graph=True)
            torch.cuda.synchronize()
    print(f"# {a.backend} bwd d{d} {'causal' if a.causal else 'full'} s{s} b{b} h{h}: us per call")
    for e in sorted(prof.key_averages(), key=lambda e: -e.device_time_total):
        if e.device_time_total > 0:
            print(f"{e.device_time_total / a.calls:10.1f}  {e.count // a.calls:3d}x  {e.key[:110]}")


if __name__ == "__main__":
    main()
