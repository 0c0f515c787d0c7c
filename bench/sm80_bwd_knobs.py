"""The sm80-class backward under A/B knobs read per launch, interleaved in one process with torch's
flash backend (FlashAttention-2) on the same tensors (issue 3):
  python3 bench/sm80_bwd_knobs.py --knobs "base=;bulk1=FLASHKIT_SM80_BWD_BULK=1" [--hdims 64,128]
Each knob set is a name and a comma-separated list of VAR=VALUE assignments, applied to the
process environment around flashkit's calls (the library reads them per launch). bf16, FA2's
protocol (hidden 2048, batch * seqlen = 16k), backward TFLOP/s (5 GEMMs, x0.5 causal), median
of `--reps` batches of `--calls` back-to-back calls, `--rounds` interleaved rounds; the sm80
path is forced (FLASHKIT_ATTENTION_PATH=sm80)."""
import argparse
import os

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from flashkit import _C
from timing import median_ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--knobs", required=True)
    ap.add_argument("--hdims", default="64,128")
    ap.add_argument("--seqlens", default="2048,8192")
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--fwd", action="store_true", help="time the forward too (rows '... fwd')")
    args = ap.parse_args()
    os.environ["FLASHKIT_ATTENTION_PATH"] = "sm80"
    knobs = []
    for item in args.knobs.split(";"):
        name, _, assigns = item.partition("=")
        knobs.append((name, [a.split("=", 1) for a in assigns.split(",") if a]))
    all_vars = {v for _, kv in knobs for v, _ in kv}
    results = {}
    for d in map(int, args.hdims.split(",")):
        for s in map(int, args.seqlens.split(",")):
            for causal in (c == "1" for c in args.causal.split(",")):
                b, h = max(1, 16384 // s), 2048 // d
                torch.manual_seed(0)
                q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
                do = torch.randn_like(q)
                o = torch.empty_like(q)
                lse = torch.empty(b, h, s, device="cuda", dtype=torch.float32)
                dq, dk, dv = (torch.empty_like(x) for x in (q, k, v))
                _C.attention_forward_into(q, k, v, o, lse, 0.0, causal, 0)
                qt, kt, vt = (x.transpose(1, 2).detach().requires_grad_() for x in (q, k, v))
                with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                    out = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
                dot = do.transpose(1, 2)

                def ours():
                    _C.attention_backward_into(q, k, v, o, do, lse, dq, dk, dv, 0.0, causal, False, 0, None)

                def flash():
                    torch.autograd.grad(out, (qt, kt, vt), dot, retain_graph=True)

                def ours_fwd():
                    _C.attention_forward_into(q, k, v, o, lse, 0.0, causal, 0)

                def flash_fwd():
                    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                        torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)

                for passname, mine, peer, gemms in [("bwd", ours, flash, 5)] + (
                        [("fwd", ours_fwd, flash_fwd, 2)] if args.fwd else []):
                    flops = gemms * 2 * b * h * s * s * d * (0.5 if causal else 1.0)
                    key = f"d{d} {'causal' if causal else 'dense '} {s // 1024:>2}k {passname}"
                    run_rounds(args, knobs, all_vars, results, key, mine, peer, flops)


def run_rounds(args, knobs, all_vars, results, key, ours, flash, flops):
    """`rounds` interleaved rounds (order reversed every other round) of each knob set and FA2."""
    for r in range(args.rounds):
        order = knobs + [("flash", None)]
        if r % 2:
            order = order[::-1]
        for name, kv in order:
            if kv is None:
                fn = flash
            else:
                for var in all_vars:
                    os.environ.pop(var, None)
                for var, val in kv:
                    os.environ[var] = val
                fn = ours
            ms = median_ms(fn, reps=args.reps, warmup=2, per_call=args.calls)
            results.setdefault(key, {}).setdefault(name, []).append(flops / ms / 1e9)
        for var in all_vars:
            os.environ.pop(var, None)
    row = results[key]
    print(key, "  ".join(f"{n} {' / '.join(f'{x:.0f}' for x in xs)}" for n, xs in row.items()),
          "  ratio", " ".join(f"{n} {max(xs) / max(row['flash']):.3f}" for n, xs in row.items()
                              if n != "flash"), flush=True)


if __name__ == "__main__":
    main()
