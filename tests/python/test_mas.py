"""flashkit.maximum_path / monotonic_alignment_search on NumPy arrays vs a pure-NumPy port of
the Cython loop (glow-tts monotonic_align/core.pyx), on random, tie-heavy and random-length
inputs, both layouts; and the error cases."""
import numpy as np
import pytest

import flashkit


def cython_port(value, t_x, t_y, neg=-1e9):
    """glow-tts's maximum_path_each, line by line, on an fp32 copy of value[T, S]."""
    v = np.array(value, dtype=np.float32)
    neg = np.float32(neg)
    path = np.zeros(v.shape, np.int32)
    for y in range(t_y):
        for x in range(max(0, t_x + y - t_y), min(t_x, y + 1)):
            v_cur = neg if x == y else v[x, y - 1]
            if x == 0:
                v_prev = np.float32(0.0) if y == 0 else neg
            else:
                v_prev = v[x - 1, y - 1]
            v[x, y] = (v_prev if v_prev > v_cur else v_cur) + v[x, y]  # Cython's max, fp32 add
    index = t_x - 1
    for y in range(t_y - 1, -1, -1):
        path[index, y] = 1
        if index != 0 and (index == y or v[index, y - 1] < v[index - 1, y - 1]):
            index -= 1
    return path


def random_lengths(rng, b, t, s):
    tx = rng.integers(1, t + 1, size=b)
    ty = np.array([rng.integers(x, s + 1) for x in tx])
    tx[0], ty[0] = t, s  # one full item, one diagonal item
    tx[1] = ty[1] = min(tx[1], ty[1])
    return tx.astype(np.int32), ty.astype(np.int32)


def rect_mask(tx, ty, t, s, dtype=np.float32):
    return ((np.arange(t)[None, :, None] < tx[:, None, None])
            & (np.arange(s)[None, None, :] < ty[:, None, None])).astype(dtype)


def expected_paths(value, tx, ty, neg=-1e9):
    return np.stack([cython_port(value[i], tx[i], ty[i], neg) for i in range(len(tx))])


@pytest.mark.parametrize("ties", [False, True])
def test_glow_tts_layout_matches_cython(ties):
    rng = np.random.default_rng(1 + ties)
    b, t, s = 6, 19, 47
    value = (rng.integers(-2, 1, (b, t, s)) if ties else rng.standard_normal((b, t, s)) - 2)
    value = value.astype(np.float32)
    tx, ty = random_lengths(rng, b, t, s)
    mask = rect_mask(tx, ty, t, s)
    want = expected_paths(value, tx, ty)
    # Outside the mask glow-tts zeroes value; flashkit never reads it: fill it with garbage.
    value[mask == 0] = np.nan
    got = flashkit.maximum_path(value, mask)
    assert got.dtype == np.float32 and got.shape == value.shape
    np.testing.assert_array_equal(got, want)
    assert got.sum() == ty.sum()  # one cell per frame: equality above is not trivially met


@pytest.mark.parametrize("ties", [False, True])
def test_vits_layout_matches_cython(ties):
    rng = np.random.default_rng(3 + ties)
    b, t, s = 5, 14, 40
    text_mel = (rng.integers(-2, 1, (b, t, s)) if ties else rng.standard_normal((b, t, s)))
    text_mel = text_mel.astype(np.float32)
    tx, ty = random_lengths(rng, b, t, s)
    neg_cent = np.ascontiguousarray(text_mel.transpose(0, 2, 1))  # vits: [b, mel, text]
    mask = np.ascontiguousarray(rect_mask(tx, ty, t, s).transpose(0, 2, 1))
    got = flashkit.maximum_path(neg_cent, mask)  # auto: d1 > d2 -> vits
    assert got.flags["C_CONTIGUOUS"] and got.shape == neg_cent.shape
    np.testing.assert_array_equal(got, expected_paths(text_mel, tx, ty).transpose(0, 2, 1))
    np.testing.assert_array_equal(flashkit.maximum_path(neg_cent, mask, layout="vits"), got)


@pytest.mark.parametrize("neg", [-1e9, -1e32, -np.inf])
def test_low_level_api_each_neg_with_durations(neg):
    rng = np.random.default_rng(5)
    b, t, s = 5, 23, 61
    value = rng.integers(-3, 1, (b, t, s)).astype(np.float32)
    value[rng.random(value.shape) < 0.1] = -np.inf
    tx, ty = random_lengths(rng, b, t, s)
    path, dur = flashkit.monotonic_alignment_search(value, tx, ty, neg=neg, return_durations=True)
    want = expected_paths(value, tx, ty, neg)
    np.testing.assert_array_equal(path, want)
    assert dur.dtype == np.int32
    np.testing.assert_array_equal(dur, want.sum(axis=2))
    only = flashkit.monotonic_alignment_search(value, tx, ty, neg=neg, return_path=False,
                                               return_durations=True)
    np.testing.assert_array_equal(only, dur)


def test_half_input_and_path_dtypes():
    rng = np.random.default_rng(6)
    b, t, s = 4, 12, 30
    value = (rng.standard_normal((b, t, s)) - 1).astype(np.float16)
    tx, ty = random_lengths(rng, b, t, s)
    want = expected_paths(value.astype(np.float32), tx, ty)
    got = flashkit.maximum_path(value, rect_mask(tx, ty, t, s, np.bool_))
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, want)
    for dt in (np.int32, np.uint8, np.bool_, np.float64):
        p = flashkit.monotonic_alignment_search(value, tx, ty, path_dtype=dt)
        assert p.dtype == dt
        np.testing.assert_array_equal(p.astype(np.int32), want)
    # float64 values are searched in fp32, as the originals' astype(np.float32) does.
    p64 = flashkit.maximum_path(value.astype(np.float64), rect_mask(tx, ty, t, s))
    assert p64.dtype == np.float64
    np.testing.assert_array_equal(p64, want)


def test_text_longer_than_mel_names_the_item():
    value = np.zeros((3, 8, 10), np.float32) + 1.0
    with pytest.raises(ValueError, match=r"text_lengths\[1\]: expected <= mel_lengths\[1\] \(4\), "
                                         r"got 6: no monotonic path"):
        flashkit.monotonic_alignment_search(value, [8, 6, 2], [10, 4, 2])
    mask = rect_mask(np.array([8, 6, 2]), np.array([10, 4, 2]), 8, 10)
    with pytest.raises(ValueError, match=r"text_lengths\[1\]"):
        flashkit.maximum_path(value, mask, layout="glow-tts")


def test_errors_name_the_argument():
    value = np.ones((2, 4, 6), np.float32)
    mask = np.ones((2, 4, 6), np.float32)
    with pytest.raises(ValueError, match="mask: expected shape"):
        flashkit.maximum_path(value, mask[:, :3])
    with pytest.raises(ValueError, match="value: expected 3 dims"):
        flashkit.maximum_path(value[0], mask[0])
    with pytest.raises(ValueError, match="layout: expected"):
        flashkit.maximum_path(value, mask, layout="tacotron")
    with pytest.raises(ValueError, match="text_lengths: expected shape \\[2\\], got \\[3\\]"):
        flashkit.monotonic_alignment_search(value, [4, 4, 4], [6, 6])
    with pytest.raises(ValueError, match=r"mel_lengths\[0\]: expected 0..6"):
        flashkit.monotonic_alignment_search(value, [4, 4], [7, 6])
    with pytest.raises(ValueError, match="return_path: expected"):
        flashkit.monotonic_alignment_search(value, [4, 4], [6, 6], return_path=False)
    with pytest.raises(ValueError, match="neg: expected a number"):
        flashkit.monotonic_alignment_search(value, [4, 4], [6, 6], neg=float("nan"))


def test_fused_matches_unfused_on_the_textbook_likelihood():
    rng = np.random.default_rng(8)
    b, c, t, s = 3, 6, 11, 33
    z = rng.standard_normal((b, c, s)).astype(np.float32)
    m = rng.standard_normal((b, c, t)).astype(np.float32)
    logs = rng.uniform(-1, 0.5, (b, c, t)).astype(np.float32)
    tx, ty = random_lengths(rng, b, t, s)
    d = z.astype(np.float64)[:, :, None, :] - m.astype(np.float64)[:, :, :, None]
    value = (-0.5 * np.log(2 * np.pi) - logs[..., None]
             - 0.5 * np.exp(-2.0 * logs[..., None]) * d * d).sum(1).astype(np.float32)
    path, dur = flashkit.monotonic_alignment_search_fused(z, m, logs, tx, ty,
                                                          return_durations=True)
    np.testing.assert_array_equal(path, expected_paths(value, tx, ty))
    np.testing.assert_array_equal(dur, path.sum(2))
    with pytest.raises(ValueError, match="logs: expected shape"):
        flashkit.monotonic_alignment_search_fused(z, m, logs[:, :, :5], tx, ty)
