"""Greedy generation with a small random-weight Llama (built from a config: nothing is
downloaded) under attn_implementation="sdpa" and "flashkit": checks that the generated tokens
agree and prints tokens/s for both. Runs on the GPU (bf16, output projection in fp32) when
there is one, else on the CPU (fp32). tests/python/test_torch_transformers.py runs it with fewer tokens.

    python examples/llama_generate.py [--tokens 256] [--batch 4] [--prompt 64] [--profile]
"""
import argparse
import time

import torch
from transformers import AutoModelForCausalLM, LlamaConfig

from flashkit.integrations.transformers import register


def build_models(device, dtype, seed=0):
    """The same random Llama twice: with "sdpa" and with "flashkit" attention."""
    register()
    torch.manual_seed(seed)
    models = {}
    for name in ("sdpa", "flashkit"):
        # One config each: the model keeps (and reads at every call) its config's implementation.
        config = LlamaConfig(vocab_size=1024, hidden_size=512, intermediate_size=1024,
                             num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2,
                             max_position_embeddings=4096, initializer_range=0.05,
                             bos_token_id=0, eos_token_id=1, pad_token_id=0)
        models[name] = AutoModelForCausalLM.from_config(config, attn_implementation=name,
                                                        dtype=dtype).to(device).eval()
    models["flashkit"].load_state_dict(models["sdpa"].state_dict())
    for model in models.values():
        model.lm_head = Fp32Head(model.lm_head)
    return models


class Fp32Head(torch.nn.Linear):
    """The output projection in fp32 (the same weights, widened): bf16 logits tie exactly at
    random weights, and a tie broken either way would hide what this example compares — the
    attention backends."""

    def __init__(self, head):
        super().__init__(head.in_features, head.out_features, bias=False,
                         device=head.weight.device, dtype=torch.float32)
        with torch.no_grad():
            self.weight.copy_(head.weight)

    def forward(self, x):
        return super().forward(x.float())


@torch.no_grad()
def generate(model, ids, mask, tokens):
    """Greedy generation of exactly `tokens` new tokens with transformers' KV cache; returns the
    new tokens and the seconds it took."""
    if ids.is_cuda:
        torch.cuda.synchronize()
    start = time.perf_counter()
    out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=tokens,
                         min_new_tokens=tokens, do_sample=False, pad_token_id=0)
    if ids.is_cuda:
        torch.cuda.synchronize()
    return out[:, ids.shape[1]:], time.perf_counter() - start


@torch.no_grad()
def compare(models, ids, mask, new_a, new_b):
    """(True, note) when the two generations agree, or differ only after a step where the
    reference's top two logits lie within the two backends' logit difference (a near-tie that
    rounding may break either way); else (False, note)."""
    differ = (new_a != new_b).any(dim=0).nonzero()
    if differ.numel() == 0:
        return True, f"all {new_a.numel()} tokens agree"
    t = int(differ[0])
    prefix = torch.cat([ids, new_a[:, :t]], dim=1)
    prefix_mask = torch.cat([mask, torch.ones_like(new_a[:, :t])], dim=1)
    logits = {name: m(input_ids=prefix, attention_mask=prefix_mask).logits[:, -1].float()
              for name, m in models.items()}
    rows = new_a[:, t] != new_b[:, t]
    top2 = logits["sdpa"][rows].topk(2, dim=-1).values
    margin = (top2[:, 0] - top2[:, 1]).max().item()
    noise = (logits["sdpa"] - logits["flashkit"]).abs().max().item()
    note = (f"tokens agree for {t} of {new_a.shape[1]} steps; at step {t} the top-2 margin is "
            f"{margin:.4g} vs a backend logit difference of {noise:.4g}")
    return margin <= 2 * noise, note


def run(tokens=256, batch=4, prompt=64, left_pad=0, seed=0, device=None, repeats=3):
    """Builds the models, generates with both, returns (agree, note, tokens/s per backend).
    left_pad > 0 pads the first sequence on the left by that many tokens (a padding mask).
    Timed `repeats` times per backend, alternating backends: tokens/s of the median run and of
    the first."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    models = build_models(device, dtype, seed)
    gen = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(2, 1024, (batch, prompt), generator=gen).to(device)
    mask = torch.ones_like(ids)
    mask[0, :left_pad] = 0
    ids[0, :left_pad] = 0
    seconds, new = {name: [] for name in models}, {}
    for model in models.values():
        generate(model, ids, mask, 4)  # warm-up: kernels loaded, caches allocated
    for _ in range(repeats):
        for name, model in models.items():
            new[name], s = generate(model, ids, mask, tokens)
            seconds[name].append(s)
    # The first timed run is reported too: sdpa's cuDNN backend builds an execution plan for
    # every new key length it meets (milliseconds each), so a first generation pays for one
    # plan per step and later ones reuse them.
    rate = {name: {"median": batch * tokens / sorted(s)[len(s) // 2],
                   "first": batch * tokens / s[0]} for name, s in seconds.items()}
    agree, note = compare(models, ids, mask, new["sdpa"], new["flashkit"])
    return agree, note, rate


def profile(tokens=32, batch=4, prompt=64, device=None, rows=12):
    """Where generation spends its time under each backend: torch.profiler's top ops by total
    CPU time (host overheads dominate a model this small)."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    models = build_models(device, torch.bfloat16 if device == "cuda" else torch.float32)
    ids = torch.randint(2, 1024, (batch, prompt)).to(device)
    mask = torch.ones_like(ids)
    for name, model in models.items():
        generate(model, ids, mask, 4)
        with torch.profiler.profile() as prof:
            generate(model, ids, mask, tokens)
        print(f"--- {name}: {tokens} tokens")
        print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=rows))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--prompt", type=int, default=64)
    parser.add_argument("--device", default=None)
    parser.add_argument("--profile", action="store_true",
                        help="print torch.profiler's top ops per backend instead")
    args = parser.parse_args()
    if args.profile:
        return profile(device=args.device)
    agree, note, rate = run(args.tokens, args.batch, args.prompt, device=args.device)
    for name, r in rate.items():
        print(f"{name:9s} {r['median']:10.1f} tokens/s (median of 3; first run {r['first']:.1f})"
              f"  batch {args.batch}, {args.tokens} new tokens")
    print(("OK: " if agree else "MISMATCH: ") + note)
    raise SystemExit(0 if agree else 1)


if __name__ == "__main__":
    main()
