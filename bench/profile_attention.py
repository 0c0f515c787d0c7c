"""One forward and one backward of flashkit attention per head dim, for Nsight Compute:
  ncu --kernel-name regex:BwdKernel --section SpeedOfLight --section WarpStateStats \
      python3 bench/profile_attention.py [--fwd-only] [--cudnn] [--flash] [--seqlen N] [hdim ...]
bf16, non-causal unless --causal, hidden 2048, batch * seqlen = 16k (default seqlen 4096, the FA2 protocol's
middle point). --cudnn also runs PyTorch SDPA's cudnn backend once on the same tensors (after
flashkit's calls), so one ncu run can profile both forwards; --flash runs SDPA's flash backend
(FlashAttention-2) forward and backward the same way. FLASHKIT_ATTENTION_PATH=sm80 picks the
sm80-class kernels (issue 3's comparison with FA2)."""
import argparse

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from flashkit import _C


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("hdims", nargs="*", type=int, default=[128])
    ap.add_argument("--fwd-only", action="store_true")
    ap.add_argument("--cudnn", action="store_true")
    ap.add_argument("--flash", action="store_true")
    ap.add_argument("--seqlen", type=int, default=4096)
    ap.add_argument("--causal", action="store_true")
    args = ap.parse_args()
    for d in args.hdims:
        s = args.seqlen
        b, h = max(1, 16384 // s), 2048 // d
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        o, do = torch.empty_like(q), torch.randn_like(q)
        lse = torch.empty(b, h, s, device="cuda", dtype=torch.float32)
        dq, dk, dv = (torch.empty_like(x) for x in (q, k, v))
        c = args.causal
        _C.attention_forward_into(q, k, v, o, lse, 0.0, c, 0)
        if not args.fwd_only:
            _C.attention_backward_into(q, k, v, o, do, lse, dq, dk, dv, 0.0, c, False, 0, None)
        if args.cudnn:
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                torch.nn.functional.scaled_dot_product_attention(
                    q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=c)
        if args.flash:
            qt, kt, vt = (x.transpose(1, 2).detach().requires_grad_() for x in (q, k, v))
            with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                out = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=c)
                if not args.fwd_only:
                    out.backward(do.transpose(1, 2))
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
