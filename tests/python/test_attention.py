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


# --- FP8 (e4m3) forward: uint8 arrays of e4m3 codes ---

def e4m3_table():
    """The 256 e4m3 (float8_e4m3fn) codes' values (NaN for 0x7f / 0xff), by the format's rule."""
    vals = np.empty(256, dtype=np.float64)
    for c in range(256):
        sign = -1.0 if c & 0x80 else 1.0
        e, m = (c >> 3) & 0xF, c & 0x7
        if e == 0xF and m == 0x7:
            vals[c] = np.nan
        elif e == 0:
            vals[c] = sign * m / 8 * 2.0**-6
        else:
            vals[c] = sign * (1 + m / 8) * 2.0 ** (e - 7)
    return vals


def quantize_e4m3(x):
    """Nearest e4m3 code of each value (ties to the even code), as uint8."""
    table = e4m3_table()
    codes = np.array([c for c in range(256) if not np.isnan(table[c])], dtype=np.uint8)
    vals = table[codes]
    dist = np.abs(x[..., None] - vals)
    best = dist.min(axis=-1, keepdims=True)
    # among equally near codes the even one (m's low bit 0)
    tie_ok = (dist == best) & ((codes & 1) == 0)
    pick = np.where(tie_ok.any(axis=-1), tie_ok.argmax(axis=-1), dist.argmin(axis=-1))
    return codes[pick]


@pytest.mark.parametrize("causal", [False, True])
def test_fp8_forward_matches_reference(causal):
    rng = np.random.default_rng(21 + causal)
    b, sq, sk, h, hk, d = 2, 37, 53, 4, 2, 32
    qd, kd, vd = 1 / 32, 1 / 16, 1 / 64
    q8 = quantize_e4m3(rng.standard_normal((b, sq, h, d)) / qd)
    k8 = quantize_e4m3(rng.standard_normal((b, sk, hk, d)) / kd)
    v8 = quantize_e4m3(rng.standard_normal((b, sk, hk, d)) / vd)
    table = e4m3_table()
    ref_out, ref_lse = reference(table[q8] * qd, table[k8] * kd, table[v8] * vd, causal=causal)
    out, lse = flashkit.attention_fp8(q8, k8, v8, q_descale=qd, k_descale=np.float32(kd),
                                      v_descale=np.array([vd], dtype=np.float32), causal=causal,
                                      return_lse=True)
    assert out.dtype == np.float32 and out.shape == q8.shape and lse.shape == (b, h, sq)
    # fp32 arithmetic on the dequantized values, out rounded to bf16 (8 significant bits)
    np.testing.assert_allclose(out, ref_out, atol=1e-2 * np.abs(ref_out).max(), rtol=2**-7)
    np.testing.assert_allclose(lse, ref_lse, atol=1e-4, rtol=1e-5)
    # the bf16 rounding itself: every out value is a bf16 value
    assert np.all((out.view(np.uint32) & 0xFFFF) == 0)


def test_fp8_forward_errors():
    q8 = np.zeros((1, 4, 2, 16), dtype=np.uint8)
    with pytest.raises(TypeError, match="q: expected a uint8"):
        flashkit.attention_fp8(q8.astype(np.float32), q8, q8)
    with pytest.raises(ValueError, match="hdim|head_dim|16"):
        bad = np.zeros((1, 4, 2, 20), dtype=np.uint8)
        flashkit.attention_fp8(bad, bad, bad)
    with pytest.raises(ValueError, match="v_descale: expected one element"):
        flashkit.attention_fp8(q8, q8, q8, v_descale=[1.0, 2.0])
    # the extension itself: a float64 descale, a non-bf16 out
    out = np.empty(q8.shape, dtype=np.uint16)
    lse = np.empty((1, 2, 4), dtype=np.float32)
    with pytest.raises(ValueError, match="q_descale"):
        flashkit._C.attention_forward_fp8(q8, q8, q8, out, lse, q_descale=np.ones(1), codes=True,
                                          out_bits=True)
    with pytest.raises(ValueError, match="out"):
        flashkit._C.attention_forward_fp8(q8, q8, q8, out.astype(np.float32), lse, codes=True)
    with pytest.raises(ValueError, match="q"):  # uint8 without codes=True is not fp8
        flashkit._C.attention_forward_fp8(q8, q8, q8, out, lse, out_bits=True)


def test_quantize_e4m3_matches_the_format():
    table = e4m3_table()
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.standard_normal(4000) * 50, [0.0, -0.0, 448.0, 465.0, 1e6, -1e6,
                                                          2.0**-9, 2.0**-10, 3 * 2.0**-10]])
    codes, d = flashkit.quantize_e4m3(x, descale=1.0)
    assert codes.dtype == np.uint8 and d == 1.0
    clipped = np.clip(x, -448, 448)  # saturating
    np.testing.assert_array_equal(table[codes], table[quantize_e4m3(clipped)])
    np.testing.assert_array_equal(flashkit.dequantize_e4m3(codes), table[codes].astype(np.float32))
    # per-tensor scaling: the largest magnitude lands on 448
    codes, d = flashkit.quantize_e4m3(x[:4000])
    assert d == np.float32(np.abs(x[:4000]).max() / 448)
    assert np.abs(flashkit.dequantize_e4m3(codes, d)).max() == np.float32(448 * d)


def test_fp8_per_head_descales():
    rng = np.random.default_rng(8)
    b, sq, sk, h, hk, d = 2, 20, 30, 4, 2, 16
    table = e4m3_table()
    ds = [rng.uniform(0.01, 0.05, size=(b, hk)).astype(np.float32) for _ in range(3)]
    q8, k8, v8 = (quantize_e4m3(rng.standard_normal(shape) * 20)
                  for shape in ((b, sq, h, d), (b, sk, hk, d), (b, sk, hk, d)))
    expand = lambda x, dd, g: x * np.repeat(dd, g, axis=1)[:, None, :, None]  # noqa: E731
    ref_out, ref_lse = reference(expand(table[q8], ds[0], h // hk), expand(table[k8], ds[1], 1),
                                 expand(table[v8], ds[2], 1), causal=True)
    out, lse = flashkit.attention_fp8(q8, k8, v8, q_descale=ds[0], k_descale=ds[1],
                                      v_descale=ds[2], causal=True, return_lse=True)
    np.testing.assert_allclose(out, ref_out, atol=1e-2 * np.abs(ref_out).max(), rtol=2**-7)
    np.testing.assert_allclose(lse, ref_lse, atol=1e-4, rtol=1e-5)
    with pytest.raises(ValueError, match=r"k_descale: expected one element or shape \(2, 2\)"):
        flashkit.attention_fp8(q8, k8, v8, k_descale=np.ones((2, 4), np.float32))


def test_fp8_varlen_matches_dense():
    rng = np.random.default_rng(9)
    lens_q, lens_k = [3, 40, 17], [25, 40, 30]
    q8 = quantize_e4m3(rng.standard_normal((sum(lens_q), 4, 16)) * 20)
    k8 = quantize_e4m3(rng.standard_normal((sum(lens_k), 2, 16)) * 20)
    v8 = quantize_e4m3(rng.standard_normal((sum(lens_k), 2, 16)) * 20)
    cu = lambda lens: np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)  # noqa: E731
    d = dict(q_descale=0.02, k_descale=0.03, v_descale=0.05, causal=True)
    out, lse = flashkit.attention_fp8(q8, k8, v8, cu_seqlens_q=cu(lens_q), cu_seqlens_k=cu(lens_k),
                                      return_lse=True, **d)
    assert lse.shape == (4, sum(lens_q))
    oq = ok = 0
    for nq, nk in zip(lens_q, lens_k):
        one, one_lse = flashkit.attention_fp8(q8[None, oq:oq + nq], k8[None, ok:ok + nk],
                                              v8[None, ok:ok + nk], return_lse=True, **d)
        np.testing.assert_allclose(out[oq:oq + nq], one[0], atol=1e-6)
        np.testing.assert_allclose(lse[:, oq:oq + nq], one_lse[0], atol=1e-5)
        oq, ok = oq + nq, ok + nk
