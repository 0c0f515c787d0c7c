"""attn_implementation="flashkit" in transformers: examples/llama_generate.py with fewer tokens
(greedy generation with a KV cache agrees with "sdpa", padded and not), and a training step of a
padded batch whose logits and gradients are as close to an fp32 model as "sdpa"'s are. Skipped
where torch or transformers is not installed."""
import importlib.util
import pathlib

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from flashkit.integrations import transformers as fk_transformers  # noqa: E402

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "llama_generate.py"


def load_example():
    spec = importlib.util.spec_from_file_location("llama_generate", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("left_pad", [0, 13])
def test_generation_agrees_with_sdpa(left_pad):
    agree, note, rate = load_example().run(tokens=48, batch=3, prompt=40, left_pad=left_pad,
                                           repeats=1)
    print(note, rate)
    assert agree, note


def test_training_step_matches_sdpa():
    """A right-padded batch (varlen path) through forward + backward: flashkit's logits on real
    tokens and its weight gradients are within 2x (+ a floor) of sdpa's distance to fp32."""
    example = load_example()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    models = example.build_models(device, dtype, seed=3)
    ref = example.build_models(device, torch.float32, seed=3)["sdpa"]
    ref.load_state_dict(models["sdpa"].state_dict())
    gen = torch.Generator().manual_seed(4)
    ids = torch.randint(2, 1024, (3, 96), generator=gen).to(device)
    mask = torch.ones_like(ids)
    mask[1, 70:] = 0
    mask[2, 9:] = 0
    labels = ids.masked_fill(mask == 0, -100)
    results = {}
    for name, model in (("fp32", ref), *models.items()):
        model.train()
        model.zero_grad()
        out = model(input_ids=ids, attention_mask=mask, labels=labels)
        out.loss.backward()
        grads = torch.cat([p.grad.float().flatten() for p in model.parameters()])
        results[name] = (out.logits.float()[mask.bool()], grads)
    for i, what in enumerate(("logits", "gradients")):
        ref_value = results["fp32"][i]
        err_fk = (results["flashkit"][i] - ref_value).abs().max().item()
        err_sdpa = (results["sdpa"][i] - ref_value).abs().max().item()
        scale = ref_value.abs().max().item()
        assert err_fk <= 2 * err_sdpa + 1e-4 * scale, f"{what}: {err_fk:.3g} vs sdpa {err_sdpa:.3g}"


def test_padding_path_has_no_host_sync():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    b, h, hk, s, d = 2, 8, 2, 64, 64
    q = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(b, hk, s, d, device="cuda", dtype=torch.bfloat16)
    mask = torch.ones(b, s, dtype=torch.bool, device="cuda")
    mask[0, :20] = False
    module = torch.nn.Module()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        out, weights = fk_transformers.attention_forward(module, q, k, k, mask, scaling=0.125)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert weights is None and out.shape == (b, s, h, d)
    assert (out[0, :20] == 0).all() and torch.isfinite(out).all()


def test_unsupported_inputs_raise():
    module = torch.nn.Module()
    q = torch.randn(1, 2, 4, 64)
    with pytest.raises(ValueError, match="^attention_mask: expected None or a 2D padding mask"):
        fk_transformers.attention_forward(module, q, q, q, torch.zeros(1, 1, 4, 4))
    with pytest.raises(ValueError, match="^output_attentions:"):
        fk_transformers.attention_forward(module, q, q, q, None, output_attentions=True)
