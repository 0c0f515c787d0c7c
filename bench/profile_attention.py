"""One forward and one backward of flashkit attention per head dim, for Nsight Compute:
  ncu --kernel-name regex:BwdKernel --section SpeedOfLight --section WarpStateStats \
      python3 bench/profile_attention.py [hdim ...]
bf16, non-causal, batch 4 x seqlen 4096, hidden 2048 (the FA2 protocol's middle point)."""
import sys

import torch

from flashkit import _C


def main():
    for d in [int(x) for x in sys.argv[1:]] or [128]:
        b, s, h = 4, 4096, 2048 // d
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        o, do = torch.empty_like(q), torch.randn_like(q)
        lse = torch.empty(b, h, s, device="cuda", dtype=torch.float32)
        dq, dk, dv = (torch.empty_like(x) for x in (q, k, v))
        _C.attention_forward_into(q, k, v, o, lse, 0.0, False, 0)
        _C.attention_backward_into(q, k, v, o, do, lse, dq, dk, dv, 0.0, False, False, 0, None)
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
