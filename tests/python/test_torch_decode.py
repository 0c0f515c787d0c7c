"""flashkit.decode / make_decode_plan / merge_states / maximum_path on torch tensors (CPU, and
CUDA when present) against float64 references: planned and unplanned decode on dense and paged
caches, a decode captured in a CUDA graph and replayed on new inputs, and MAS paths identical
to the NumPy ones. Skipped where torch is not installed."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import flashkit  # noqa: E402
from torch_reference import assert_fa3_close, attention, devices, dtype_on  # noqa: E402

cuda_only = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def make(device, *shape, seed):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen).to(device=device, dtype=dtype_on(device))


def reference(q, k, v, lens, dtype, softcap=0.0, window_left=-1):
    """Decode in `dtype`: the q tokens are the last q_len of each cache, causal among themselves
    (a bottom-right causal attention over the first len keys), with decode's softcap and window."""
    return torch.cat([attention(q[b:b + 1].to(dtype), k[b:b + 1, :n].to(dtype),
                                v[b:b + 1, :n].to(dtype), causal=True, window=(window_left, 0),
                                softcap=softcap)
                      for b, n in enumerate(lens)])


def check(out, q, k, v, lens, softcap=0.0, window_left=-1):
    assert torch.isfinite(out).all()
    assert_fa3_close(out, reference(q, k, v, lens, torch.float64, softcap, window_left),
                     reference(q, k, v, lens, q.dtype, softcap, window_left), "out")


def paged(k, v, page, seed):
    """The caches as a shuffled page pool + block table."""
    b, ctx, hkv, d = k.shape
    pages = ctx // page
    perm = torch.randperm(b * pages, generator=torch.Generator().manual_seed(seed))
    table = perm.view(b, pages).to(device=k.device, dtype=torch.int32)
    kp = torch.empty(b * pages, page, hkv, d, dtype=k.dtype, device=k.device)
    vp = torch.empty_like(kp)
    kp[table.flatten().long()] = k.reshape(b * pages, page, hkv, d)
    vp[table.flatten().long()] = v.reshape(b * pages, page, hkv, d)
    return kp, vp, table


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("schedule", ["auto", "split_kv", "flash_decoding", "lean"])
def test_decode_dense_and_paged(device, schedule):
    b, t, hq, hkv, d, ctx = 3, 2, 8, 2, 64, 512
    lens = [7, 512, 300]
    q = make(device, b, t, hq, d, seed=1)
    k, v = make(device, b, ctx, hkv, d, seed=2), make(device, b, ctx, hkv, d, seed=3)
    seqlens = torch.tensor(lens, dtype=torch.int32, device=device)
    # No plan: planned for the caches' capacity (lengths on the device are never read back).
    out, lse = flashkit.decode(q, k, v, seqlens, schedule=schedule, return_lse=True)
    check(out, q, k, v, lens)
    assert lse.shape == (b, hq, t) and lse.dtype == torch.float32
    kp, vp, table = paged(k, v, 64, seed=4)
    plan = flashkit.make_decode_plan(q, kp, lens, table, schedule=schedule)
    for _ in range(2):  # one plan, several calls
        check(flashkit.decode(q, kp, vp, seqlens, table, plan=plan), q, k, v, lens)


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("softcap,window_left", [(2.0, -1), (0.0, 100), (1.5, 0)])
def test_decode_softcap_and_window(device, softcap, window_left):
    """Gemma-2's softcap and a sliding window equal attention's (bottom-right causal, window
    (window_left, 0)), dense and paged; torch.compile traces the op with both."""
    b, t, hq, hkv, d, ctx = 3, 3, 8, 2, 64, 512
    lens = [7, 512, 300]
    q = make(device, b, t, hq, d, seed=5)
    k, v = make(device, b, ctx, hkv, d, seed=6), make(device, b, ctx, hkv, d, seed=7)
    seqlens = torch.tensor(lens, dtype=torch.int32, device=device)
    out = flashkit.decode(q, k, v, seqlens, softcap=softcap, window_left=window_left)
    check(out, q, k, v, lens, softcap, window_left)
    kp, vp, table = paged(k, v, 64, seed=8)
    plan = flashkit.make_decode_plan(q, kp, lens, table, schedule="split_kv")
    check(flashkit.decode(q, kp, vp, seqlens, table, plan=plan, softcap=softcap,
                          window_left=window_left), q, k, v, lens, softcap, window_left)
    compiled = torch.compile(lambda *a: flashkit.decode(*a, softcap=softcap,
                                                        window_left=window_left), fullgraph=True)
    check(compiled(q, k, v, seqlens), q, k, v, lens, softcap, window_left)


@cuda_only
@pytest.mark.parametrize("schedule", ["split_kv", "flash_decoding", "lean"])
def test_decode_cuda_graph_replays_new_inputs(schedule):
    b, t, hq, hkv, d, ctx = 4, 1, 16, 4, 128, 1024
    q = make("cuda", b, t, hq, d, seed=5)
    k, v = make("cuda", b, ctx, hkv, d, seed=6), make("cuda", b, ctx, hkv, d, seed=7)
    seqlens = torch.tensor([1024, 5, 700, 333], dtype=torch.int32, device="cuda")
    # Its scratch (plan.workspace_bytes) comes from torch's allocator: the graph's pool owns it.
    plan = flashkit.make_decode_plan(q, k, [ctx] * b, schedule=schedule)
    flashkit.decode(q, k, v, seqlens, plan=plan)  # warm-up: uploads the plan before capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = flashkit.decode(q, k, v, seqlens, plan=plan)
    for step, lens in enumerate(([1024, 5, 700, 333], [17, 1024, 1, 640])):
        q.copy_(make("cuda", b, t, hq, d, seed=10 + step))
        seqlens.copy_(torch.tensor(lens, dtype=torch.int32))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        check(out, q, k, v, lens)


@pytest.mark.parametrize("device", devices()[-1:])  # the GPU when there is one
@pytest.mark.parametrize("with_plan", [False, True])
def test_decode_compiles_fullgraph(device, with_plan):
    """flashkit.decode is the custom op flashkit::decode: torch.compile(fullgraph=True) traces
    it, with a plan made outside the compiled region or with none (lengths on the device), and
    the compiled step equals the eager one."""
    b, t, hq, hkv, d, ctx = 2, 1, 8, 2, 64, 256
    q = make(device, b, t, hq, d, seed=11)
    k, v = make(device, b, ctx, hkv, d, seed=12), make(device, b, ctx, hkv, d, seed=13)
    seqlens = torch.tensor([200, 31], dtype=torch.int32, device=device)
    plan = flashkit.make_decode_plan(q, k, [ctx] * b, schedule="lean") if with_plan else None

    def step(q, k, v, seqlens):
        return flashkit.decode(q, k, v, seqlens, plan=plan).float() * 2

    eager = step(q, k, v, seqlens)
    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")(q, k, v, seqlens)
    torch.testing.assert_close(compiled, eager, rtol=0, atol=0)
    check(eager.to(q.dtype) / 2, q, k, v, [200, 31])


@pytest.mark.parametrize("device", devices()[-1:])
def test_decode_opcheck(device):
    """torch.library's audit of flashkit::decode: schema, fake tensor, dispatch."""
    q = make(device, 2, 2, 4, 2 * 32, seed=14)
    k, v = make(device, 2, 64, 2, 64, seed=15), make(device, 2, 64, 2, 64, seed=16)
    seqlens = torch.tensor([64, 9], dtype=torch.int32, device=device)
    torch.library.opcheck(torch.ops.flashkit.decode.default,
                          (q, k, v, seqlens, None, [64, 64], "split_kv", 0, 0, 0.0))


@pytest.mark.parametrize("device", devices())
def test_merge_states_equals_attention_over_the_union(device):
    q = make(device, 1, 4, 2, 64, seed=8)
    k, v = make(device, 1, 100, 2, 64, seed=9), make(device, 1, 100, 2, 64, seed=10)
    parts = [flashkit.attention(q, k[:, a:e], v[:, a:e], return_lse=True)
             for a, e in [(0, 37), (37, 100)]]
    o_parts = torch.stack([o for o, _ in parts])
    lse_parts = torch.stack([lse.transpose(1, 2) for _, lse in parts])  # to [P, b, s, h]
    out, lse = flashkit.merge_states(o_parts, lse_parts)
    full, full_lse = flashkit.attention(q, k, v, return_lse=True)
    assert out.dtype == q.dtype and lse.shape == (1, 4, 2)
    # Two kernels and a rounding of each part: allowed 3x (not 2x) the naive precision error.
    ref = attention(q.double(), k.double(), v.double())
    err = (out.double() - ref).abs().max().item()
    assert err <= 3 * (attention(q, k, v).double() - ref).abs().max().item() + 1e-5
    torch.testing.assert_close(lse, full_lse.transpose(1, 2), rtol=0, atol=1e-3)


@pytest.mark.parametrize("device", devices())
def test_maximum_path_on_torch_tensors(device):
    gen = np.random.default_rng(0)
    value = gen.standard_normal((3, 12, 40)).astype(np.float32)
    mask = np.zeros((3, 12, 40), np.float32)
    for i, (tx, ty) in enumerate([(12, 40), (5, 31), (1, 1)]):
        mask[i, :tx, :ty] = 1
    expected = flashkit.maximum_path(value, mask)
    try:
        got = flashkit.maximum_path(torch.from_numpy(value).to(device),
                                    torch.from_numpy(mask).to(device))
    except ValueError as e:  # a build whose MAS has no GPU kernel says so by name
        if device == "cuda" and "cuda" in str(e):
            pytest.skip(str(e))
        raise
    assert got.device.type == device and got.dtype == torch.float32
    np.testing.assert_array_equal(got.cpu().numpy(), expected)
