"""Naive torch attention for the torch tests (imported after pytest.importorskip("torch")): run in
float64 it is the reference; run in the tested dtype it measures that precision's own error, the
yardstick of DESIGN.md's tolerance rule (FA3's): |flashkit - ref| <= 2 |naive - ref| + 1e-5."""
import torch


def devices():
    return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def dtype_on(device):
    # The GPU test build (--kernels minimal) has bf16 kernels; the CPU backend is exact in fp32.
    return torch.bfloat16 if device == "cuda" else torch.float32


def attention(q, k, v, causal=False, scale=None, window=(-1, -1), softcap=0.0):
    """softmax(scale q k^T + masks) v over [b, s, h, d] in q's dtype, differentiable; masks are
    bottom-right aligned; a row that sees no key gives 0."""
    b, sq, h, d = q.shape
    sk, hk = k.shape[1], k.shape[2]
    k = k.repeat_interleave(h // hk, dim=2)
    v = v.repeat_interleave(h // hk, dim=2)
    s = torch.einsum("bihd,bjhd->bhij", q, k) * (d ** -0.5 if scale is None else scale)
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    rel = (torch.arange(sk, device=q.device)[None, :]
           - torch.arange(sq, device=q.device)[:, None] - (sk - sq))
    keep = torch.ones_like(rel, dtype=torch.bool)
    if causal:
        keep &= rel <= 0
    if window[0] >= 0:
        keep &= rel >= -window[0]
    if window[1] >= 0:
        keep &= rel <= window[1]
    s = s.masked_fill(~keep, float("-inf"))
    low = q.dtype in (torch.float16, torch.bfloat16)  # softmax in fp32 there, as usual
    p = torch.softmax(s, dim=-1, dtype=torch.float32 if low else q.dtype).nan_to_num(0.0)
    p = p.to(q.dtype)
    return torch.einsum("bhij,bjhd->bihd", p, v)


def assert_fa3_close(got, ref64, naive, what):
    """got within twice the naive low-precision error of the float64 reference (+1e-5)."""
    err = (got.double() - ref64).abs().max().item()
    bound = 2 * (naive.double() - ref64).abs().max().item() + 1e-5
    assert err <= bound, f"{what}: max error {err:.3g} exceeds {bound:.3g}"
