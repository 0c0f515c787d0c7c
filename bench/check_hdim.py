"""Forward and gradients of flashkit.attention against the float64 reference (the torch tests'
rule, tests/python/test_torch_attention.py) at the given head dims, on CUDA, for whichever path
FLASHKIT_ATTENTION_PATH picks: partial tiles (sq 200, sk 170), GQA 2:1, causal and not. For builds
that carry kernels the minimal test build lacks (e.g. the sm80-class hdim 256 ones):
  FLASHKIT_ATTENTION_PATH=sm80 PYTHONPATH=python:tests/python python3 bench/check_hdim.py 256"""
import sys

import torch

import flashkit
from test_torch_attention import check_against_reference, inputs


def main():
    for d in [int(x) for a in sys.argv[1:] or ["256"] for x in a.split(",")]:
        for causal in (False, True):
            q, k, v, dout = inputs("cuda", 2, 200, 170, 4, 2, d, seed=d + causal)
            leaves = [t.clone().requires_grad_() for t in (q, k, v)]
            out = flashkit.attention(*leaves, causal=causal)
            out.backward(dout)
            check_against_reference(q, k, v, dout, out.detach(), [t.grad for t in leaves], causal=causal)
            print(f"hdim {d} causal {causal}: forward and gradients within the tolerance", flush=True)


if __name__ == "__main__":
    main()
