"""flashkit.attention_forward / attention_backward on NumPy arrays vs a float64 NumPy reference
(fresh random inputs), and errors that name the argument."""
import numpy as np
import pytest

import flashkit


def reference(q, k, v, causal=False, scale=None, dout=None):
    """float64 attention over [b, s, h, d]; returns out, lse and, given dout, dq, dk, dv."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    b, sq, h, d = q.shape
    sk, hk = k.shape[1], k.shape[2]
    g = h // hk
    k = np.repeat(k, g, axis=2)
    v = np.repeat(v, g, axis=2)
    scale = 1 / np.sqrt(d) if scale is None else scale
    s = np.einsum("bihd,bjhd->bhij", q, k) * scale
    if causal:
        i = np.arange(sq)[:, None]
        j = np.arange(sk)[None, :]
        s = np.where(j <= i + sk - sq, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    e = np.exp(s - m)
    l = e.sum(axis=-1, keepdims=True)
    p = np.where(l > 0, e / np.where(l > 0, l, 1), 0)
    with np.errstate(divide="ignore"):
        lse = (m + np.log(l))[..., 0]
    out = np.einsum("bhij,bjhd->bihd", p, v)
    if dout is None:
        return out, lse
    do = dout.astype(np.float64)
    dv = np.einsum("bhij,bihd->bjhd", p, do)
    dp = np.einsum("bihd,bjhd->bhij", do, v)
    ds = p * (dp - (p * dp).sum(-1, keepdims=True)) * scale
    dq = np.einsum("bhij,bjhd->bihd", ds, k)
    dk = np.einsum("bhij,bihd->bjhd", ds, q)
    fold = lambda x: x.reshape(b, sk, hk, g, d).sum(axis=3)  # noqa: E731
    return out, lse, dq, fold(dk), fold(dv)


@pytest.mark.parametrize("dtype,tol", [(np.float32, 2e-5), (np.float16, 4e-3)])
@pytest.mark.parametrize("causal,sq,sk,h,hk", [(False, 33, 47, 4, 4), (True, 70, 40, 4, 2),
                                               (True, 17, 129, 2, 1)])
def test_forward_backward_match_float64(dtype, tol, causal, sq, sk, h, hk):
    rng = np.random.default_rng(sq * 1000 + sk)
    q = rng.standard_normal((2, sq, h, 64)).astype(dtype)
    k = rng.standard_normal((2, sk, hk, 64)).astype(dtype)
    v = rng.standard_normal((2, sk, hk, 64)).astype(dtype)
    dout = rng.standard_normal(q.shape).astype(dtype)
    out, lse = flashkit.attention_forward(q, k, v, causal=causal)
    ref_out, ref_lse, rdq, rdk, rdv = reference(q, k, v, causal, dout=dout)
    assert out.dtype == dtype and lse.shape == (2, h, sq) and lse.dtype == np.float32
    np.testing.assert_allclose(out.astype(np.float64), ref_out, atol=tol, rtol=0)
    np.testing.assert_allclose(lse, ref_lse, atol=1e-4, rtol=0)
    dq, dk, dv = flashkit.attention_backward(q, k, v, out, lse, dout, causal=causal)
    for got, want in ((dq, rdq), (dk, rdk), (dv, rdv)):
        np.testing.assert_allclose(got.astype(np.float64), want, atol=3 * tol, rtol=0)


def test_softmax_scale_and_strided_input():
    rng = np.random.default_rng(3)
    qkv = rng.standard_normal((1, 50, 3, 2, 32)).astype(np.float32)
    q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]  # views, last dim contiguous
    out, _ = flashkit.attention_forward(q, k, v, softmax_scale=0.5)
    np.testing.assert_allclose(out, reference(q, k, v, scale=0.5)[0], atol=2e-5, rtol=0)


def test_errors_name_the_argument():
    rng = np.random.default_rng(4)
    q = rng.standard_normal((1, 8, 2, 32)).astype(np.float32)
    with pytest.raises(ValueError, match="^k: expected dtype float32 like q"):
        flashkit.attention_forward(q, q.astype(np.float16), q)
    with pytest.raises(ValueError, match="^q: expected hdim"):
        x = rng.standard_normal((1, 8, 2, 12)).astype(np.float32)
        flashkit.attention_forward(x, x, x)
    out = np.full_like(q, 7.0)
    lse = np.full((1, 2, 8), 7.0, dtype=np.float32)
    with pytest.raises(ValueError, match="^dropout_p:"):
        flashkit._C.attention_forward(q, q, q, out, lse, dropout_p=1.0)
    assert (out == 7.0).all() and (lse == 7.0).all()
