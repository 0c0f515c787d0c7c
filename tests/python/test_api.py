"""The array-agnostic API (flashkit.attention / attention_varlen / decode / make_decode_plan /
merge_states) on NumPy arrays against float64 NumPy references on fresh random inputs; zero-copy
through NumPy and a bare DLPack producer; `import flashkit` without torch."""
import subprocess
import sys

import numpy as np
import pytest

import flashkit
from flashkit import _C


def reference(q, k, v, causal=False, window=(-1, -1), softcap=0.0, alibi=None):
    """float64 attention over [b, s, h, d] with bottom-right causal/window, softcap, ALiBi."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    b, sq, h, d = q.shape
    sk, hk = k.shape[1], k.shape[2]
    k, v = np.repeat(k, h // hk, axis=2), np.repeat(v, h // hk, axis=2)
    s = np.einsum("bihd,bjhd->bhij", q, k) / np.sqrt(d)
    if softcap > 0:
        s = softcap * np.tanh(s / softcap)
    rel = np.arange(sk)[None, :] - (np.arange(sq)[:, None] + sk - sq)  # j - diagonal
    if alibi is not None:
        s = s - alibi.astype(np.float64)[None, :, None, None] * np.abs(rel)
    keep = np.ones_like(rel, dtype=bool)
    if causal:
        keep &= rel <= 0
    if window[0] >= 0:
        keep &= rel >= -window[0]
    if window[1] >= 0:
        keep &= rel <= window[1]
    s = np.where(keep, s, -np.inf)
    m = s.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    e = np.exp(s - m)
    l = e.sum(-1, keepdims=True)
    p = np.where(l > 0, e / np.where(l > 0, l, 1), 0)
    with np.errstate(divide="ignore"):
        lse = (m + np.log(l))[..., 0]
    return np.einsum("bhij,bjhd->bihd", p, v), lse


def randn(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("opts", [dict(causal=True), dict(window=(5, 2)),
                                  dict(causal=True, softcap=3.0), dict(alibi=True)])
def test_attention_matches_float64(opts):
    rng = np.random.default_rng(len(str(opts)))
    q, k, v = randn(rng, 2, 23, 4, 32), randn(rng, 2, 31, 2, 32), randn(rng, 2, 31, 2, 32)
    alibi = rng.uniform(0.1, 1.0, 4).astype(np.float32) if opts.pop("alibi", False) else None
    out, lse = flashkit.attention(q, k, v, alibi_slopes=alibi, return_lse=True, **opts)
    ro, rl = reference(q, k, v, alibi=alibi, **opts)
    assert out.shape == q.shape and out.dtype == q.dtype and lse.dtype == np.float32
    np.testing.assert_allclose(out, ro, atol=2e-5)
    np.testing.assert_allclose(lse, rl, atol=2e-5)


def test_attention_varlen_matches_each_sequence():
    rng = np.random.default_rng(7)
    lq, lk = [5, 0, 12], [9, 4, 12]
    q = randn(rng, sum(lq) + 3, 4, 16)
    k, v = randn(rng, sum(lk), 2, 16), randn(rng, sum(lk), 2, 16)
    cq = np.cumsum([0] + lq).astype(np.int32)
    ck = np.cumsum([0] + lk).astype(np.int32)
    out, lse = flashkit.attention_varlen(q, k, v, cq, ck, 12, 12, causal=True, return_lse=True)
    for i in range(3):
        qs, ks = slice(cq[i], cq[i + 1]), slice(ck[i], ck[i + 1])
        ro, rl = reference(q[None, qs], k[None, ks], v[None, ks], causal=True)
        np.testing.assert_allclose(out[qs], ro[0], atol=2e-5)
        np.testing.assert_allclose(lse[:, qs], rl[0], atol=2e-5)
    assert (out[sum(lq):] == 0).all() and np.isneginf(lse[:, sum(lq):]).all()  # past the end


def decode_reference(q, k, v, lens):
    """float64 decode: the q tokens are the last q_len of each sequence, causal among themselves."""
    out = np.zeros(q.shape)
    for b, n in enumerate(lens):
        # Query i of t sees keys [0, n - t + i]: bottom-right causal attention over n keys.
        out[b] = reference(q[None, b], k[None, b, :n], v[None, b, :n], causal=True)[0][0]
    return out


@pytest.mark.parametrize("schedule", ["auto", "split_kv", "flash_decoding", "lean"])
def test_decode_dense_and_paged(schedule):
    rng = np.random.default_rng(3)
    b, t, hq, hkv, d, ctx, page = 3, 2, 8, 2, 32, 96, 16
    lens = np.array([5, 96, 40], np.int32)
    q, k, v = randn(rng, b, t, hq, d), randn(rng, b, ctx, hkv, d), randn(rng, b, ctx, hkv, d)
    out = flashkit.decode(q, k, v, lens, schedule=schedule)
    np.testing.assert_allclose(out, decode_reference(q, k, v, lens), atol=2e-5)
    # The same caches paged: sequence b's page j lives at a shuffled page of the pool.
    pages = ctx // page
    perm = rng.permutation(b * pages)
    table = perm.reshape(b, pages).astype(np.int32)
    kp = np.empty((b * pages, page, hkv, d), np.float32)
    vp = np.empty_like(kp)
    kp[table.ravel()] = k.reshape(b * pages, page, hkv, d)
    vp[table.ravel()] = v.reshape(b * pages, page, hkv, d)
    plan = flashkit.make_decode_plan(q, kp, lens, table, schedule=schedule)
    assert isinstance(plan, flashkit.DecodePlan) and plan.schedule != "auto"
    for _ in range(2):  # a plan is reusable
        out_p, lse = flashkit.decode(q, kp, vp, lens, table, plan=plan, return_lse=True)
        np.testing.assert_allclose(out_p, out, atol=1e-6)
    assert lse.shape == (b, hq, t)


def test_merge_states_equals_attention_over_the_union():
    rng = np.random.default_rng(5)
    q, k, v = randn(rng, 1, 4, 2, 16), randn(rng, 1, 30, 2, 16), randn(rng, 1, 30, 2, 16)
    parts = [flashkit.attention(q, k[:, a:e], v[:, a:e], return_lse=True)
             for a, e in [(0, 7), (7, 30)]]
    o_parts = np.stack([o for o, _ in parts])
    lse_parts = np.stack([l for _, l in parts])  # [P, b, h, s] while o is [P, b, s, h, d]
    out, lse = flashkit.merge_states(o_parts, lse_parts.transpose(0, 1, 3, 2))
    ro, rl = reference(q, k, v)
    np.testing.assert_allclose(out, ro, atol=2e-5)
    np.testing.assert_allclose(lse, rl.transpose(0, 2, 1), atol=2e-5)


class DLPackOnly:
    """A producer known to flashkit only through the DLPack protocol (like CuPy or JAX)."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kwargs):
        return self.a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_arrays_are_read_and_written_in_place():
    rng = np.random.default_rng(11)
    # q, k, v strided views (every other head of a wider array); out a view into a larger buffer.
    big = randn(rng, 2, 9, 8, 16)
    q, k, v = big[:, :, 0::2], big[:, :, 1::2], big[:, :, 1::2] * 2
    buf = np.full((2, 9, 4, 24), np.nan, np.float32)
    out = buf[..., 4:20]
    lse = np.full((2, 4, 9), np.nan, np.float32)
    _C.attention_forward(DLPackOnly(q), DLPackOnly(k), DLPackOnly(v), DLPackOnly(out),
                         DLPackOnly(lse))
    np.testing.assert_allclose(buf[..., 4:20], reference(q, k, v)[0], atol=2e-5)
    assert np.isnan(buf[..., :4]).all() and np.isnan(buf[..., 20:]).all()  # nothing else written
    assert np.isfinite(lse).all()


def test_dlpack_capsules_are_views():
    """What flashkit.torch_ops hands the extension: unversioned DLPack capsules of the arrays."""
    rng = np.random.default_rng(12)
    q, k, v = randn(rng, 1, 6, 2, 16), randn(rng, 1, 6, 2, 16), randn(rng, 1, 6, 2, 16)
    out = np.full_like(q, np.nan)
    lse = np.full((1, 2, 6), np.nan, np.float32)
    _C.attention_forward(*(a.__dlpack__() for a in (q, k, v, out, lse)), causal=True)
    np.testing.assert_allclose(out, reference(q, k, v, causal=True)[0], atol=2e-5)


def test_errors_name_the_argument():
    q = np.zeros((1, 4, 2, 16), np.float32)
    with pytest.raises(TypeError, match="^q: expected a NumPy array or a torch tensor"):
        flashkit.attention(q.tolist(), q, q)
    with pytest.raises(ValueError, match="^k: expected hdim 16 like q, got 8"):
        flashkit.attention(q, q[..., :8], q[..., :8])
    with pytest.raises(ValueError, match="^schedule:"):
        flashkit.decode(q[:, :1], q, q, np.array([4], np.int32), schedule="fastest")


def test_import_does_not_import_torch():
    code = "import sys, flashkit; flashkit.attention; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("order", ["flashkit, torch", "torch, flashkit"])
def test_imports_beside_torch_in_either_order(order):
    """A fresh process imports both and runs flashkit on a torch tensor (the extension exports
    only its init function; on the GPU machine torch imported second once crashed)."""
    pytest.importorskip("torch")
    code = (f"import {order}\n"
            "import flashkit, torch\n"
            "dev = 'cuda' if torch.cuda.is_available() and flashkit.build_info()['gpus'] else 'cpu'\n"
            "q = torch.randn(1, 40, 2, 64, device=dev, dtype=torch.bfloat16 if dev == 'cuda' else torch.float32)\n"
            "assert flashkit.attention(q, q, q, causal=True).isfinite().all()\n")
    subprocess.run([sys.executable, "-c", code], check=True)
