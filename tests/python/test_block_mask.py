"""flashkit.block_mask patterns, and a block-sparse CPU attention run with one against a NumPy
float64 reference in which the dropped blocks are masked out."""
import numpy as np
import pytest

import flashkit


def reference(q, k, v, keep):
    """float64 attention over [b, s, h, d] with a boolean [sq, sk] keep matrix."""
    s = np.einsum("bqhd,bkhd->bhqk", q.astype(np.float64), k.astype(np.float64)) / np.sqrt(q.shape[-1])
    s = np.where(keep[None, None], s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("bhqk,bkhd->bqhd", p, v.astype(np.float64))


def test_local_global_shape_and_pattern():
    m = flashkit.block_mask.local_global(1000, 1000, local=1, global_=1, block=(128, 128))
    assert m.shape == (8, 8) and m.dtype == np.uint8
    want = np.array([[abs(i - j) < 1 or j < 1 or i < 1 for j in range(8)] for i in range(8)])
    np.testing.assert_array_equal(m, want.astype(np.uint8))


def test_butterfly_density():
    m = flashkit.block_mask.butterfly(16 * 64, block=(64, 64))
    assert m.shape == (16, 16)
    assert m.sum() == 16 * 5  # diagonal + log2(16) partners per row


def test_block_sparse_attention_matches_masked_reference():
    rng = np.random.default_rng(0)
    b, s, h, d, blk = 1, 256, 2, 32, 64
    q, k, v = (rng.standard_normal((b, s, h, d)).astype(np.float32) for _ in range(3))
    mask = flashkit.block_mask.local_global(s, s, local=1, global_=1, block=(blk, blk))
    out = flashkit.attention(q, k, v, block_mask=mask[None, None], block_mask_block=(blk, blk))
    keep = np.kron(mask, np.ones((blk, blk), dtype=np.uint8)).astype(bool)
    np.testing.assert_allclose(out, reference(q, k, v, keep), atol=2e-5, rtol=1e-4)


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="^local:"):
        flashkit.block_mask.local_global(256, 256, local=-1)
    with pytest.raises(ValueError, match="^mask: expected a square"):
        flashkit._C.block_mask_butterfly(np.zeros((2, 3), np.uint8))
