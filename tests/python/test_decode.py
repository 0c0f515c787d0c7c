"""flashkit._C decode / merge_states / make_decode_plan on NumPy arrays against a NumPy reference."""
import numpy as np
import pytest

from flashkit import _C


def reference(q, k, v, lens, softcap=0.0, window_left=-1):
    b, t, hq, d = q.shape
    hkv = k.shape[2]
    out = np.zeros(q.shape, np.float64)
    lse = np.full((b, hq, t), -np.inf)
    for bi in range(b):
        for i in range(t):
            vis = max(0, lens[bi] - t + i + 1)
            lo = max(0, vis - 1 - window_left) if window_left >= 0 else 0
            for h in range(hq):
                kh = h // (hq // hkv)
                s = k[bi, lo:vis, kh].astype(np.float64) @ q[bi, i, h] / np.sqrt(d)
                if softcap > 0:
                    s = softcap * np.tanh(s / softcap)
                if vis:
                    m = s.max()
                    p = np.exp(s - m)
                    out[bi, i, h] = p @ v[bi, lo:vis, kh] / p.sum()
                    lse[bi, h, i] = m + np.log(p.sum())
    return out, lse


def run_and_check(schedule, seed, t, hq, lens, softcap=0.0, window_left=-1):
    """_C.decode on fresh inputs (outputs NaN first) against the NumPy reference; returns its
    arguments for more calls."""
    rng = np.random.default_rng(seed)
    b, hkv, d = len(lens), 2, 32
    q = rng.standard_normal((b, t, hq, d), dtype=np.float32)
    k = rng.standard_normal((b, 320, hkv, d), dtype=np.float32)
    v = rng.standard_normal((b, 320, hkv, d), dtype=np.float32)
    out = np.full_like(q, np.nan)
    lse = np.full((b, hq, t), np.nan, np.float32)
    plan = _C.make_decode_plan(b, t, hq, hkv, d, "float32", lens, schedule=schedule, sm_count=5)
    assert plan.schedule != "auto"
    args = (q, k, v, np.array(lens, np.int32), None, out, lse, plan)
    _C.decode(*args, softcap=softcap, window_left=window_left)
    ro, rl = reference(q, k, v, lens, softcap, window_left)
    np.testing.assert_allclose(out, ro, atol=2e-5)
    np.testing.assert_allclose(lse, rl, atol=1e-4)
    return args


@pytest.mark.parametrize("schedule", ["single", "split_kv", "flash_decoding", "lean", "auto"])
def test_decode_matches_reference(schedule):
    run_and_check(schedule, 0, 2, 8, [1, 300, 129])


@pytest.mark.parametrize("schedule", ["single", "split_kv", "lean"])
@pytest.mark.parametrize("softcap,window_left", [(1.5, -1), (0.0, 0), (0.0, 70), (2.0, 150)])
def test_decode_softcap_and_window(schedule, softcap, window_left):
    args = run_and_check(schedule, 2, 3, 4, [2, 300, 129], softcap, window_left)
    with pytest.raises(ValueError, match="^opts.window_left:"):
        _C.decode(*args, window_left=-3)


def test_plan_for_a_window():
    """A plan made for a window: auto plans split_kv where it plans Lean without one; decode
    needs the plan's window."""
    lens = [131072]
    plain = _C.make_decode_plan(1, 1, 32, 32, 128, "bfloat16", lens, sm_count=132, ctas_per_sm=2)
    windowed = _C.make_decode_plan(1, 1, 32, 32, 128, "bfloat16", lens, sm_count=132,
                                   ctas_per_sm=2, window_left=4096)
    assert plain.schedule == "lean" and windowed.schedule == "split_kv"
    assert windowed.window_left == 4096 and "window 4096" in repr(windowed)
    q = np.zeros((1, 1, 4, 16), np.float32)
    k = np.zeros((1, 100, 2, 16), np.float32)
    plan = _C.make_decode_plan(1, 1, 4, 2, 16, "float32", [100], window_left=10)
    with pytest.raises(ValueError, match="^opts.window_left: expected the plan's window 10, got -1"):
        _C.decode(q, k, k, np.array([100], np.int32), None, np.zeros_like(q),
                  np.zeros((1, 4, 1), np.float32), plan)


def test_merge_states_and_errors():
    rng = np.random.default_rng(1)
    o = rng.standard_normal((3, 4, 2, 16), dtype=np.float32)
    l = rng.standard_normal((3, 4, 2), dtype=np.float32)
    out = np.full((4, 2, 16), np.nan, np.float32)
    lse = np.full((4, 2), np.nan, np.float32)
    _C.merge_states(o, l, out, lse)
    w = np.exp(l - l.max(0))
    np.testing.assert_allclose(out, (w[..., None] * o).sum(0) / w.sum(0)[..., None], atol=1e-5)
    np.testing.assert_allclose(lse, l.max(0) + np.log(w.sum(0)), atol=1e-5)
    with pytest.raises(ValueError, match="^lse_parts:"):
        _C.merge_states(o, l[:, :3], out, lse)
    plan = _C.make_decode_plan(1, 1, 4, 2, 16, "float32", [10])
    q = np.zeros((1, 1, 8, 16), np.float32)
    k = np.zeros((1, 10, 2, 16), np.float32)
    with pytest.raises(ValueError, match="^q: expected 4 heads like the plan, got 8"):
        _C.decode(q, k, k, np.array([10], np.int32), None, np.zeros_like(q), np.zeros((1, 8, 1), np.float32), plan)
