"""flashkit.attention / attention_varlen on torch tensors (CPU, and CUDA when present): forward
and gradients against a float64 reference with DESIGN.md's tolerance rule, the torch.library
registration (opcheck), torch.compile(fullgraph=True), CUDA-graph capture on torch's stream, no
host syncs, and errors that name the argument. Skipped where torch is not installed."""
import pytest

torch = pytest.importorskip("torch")

import flashkit  # noqa: E402
from flashkit import torch_ops  # noqa: E402
from torch_reference import assert_fa3_close, attention, devices, dtype_on  # noqa: E402

cuda_only = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def inputs(device, b, sq, sk, h, hk, d, seed):
    gen = torch.Generator().manual_seed(seed)
    dtype = dtype_on(device)
    make = lambda *s: torch.randn(*s, generator=gen).to(device=device, dtype=dtype)  # noqa: E731
    return make(b, sq, h, d), make(b, sk, hk, d), make(b, sk, hk, d), make(b, sq, h, d)


def check_against_reference(q, k, v, dout, out, grads, **opts):
    """out and grads (dq, dk, dv) of flashkit vs the float64 reference and the naive run in q's
    dtype."""
    results = {}
    for name, dt in (("ref", torch.float64), ("naive", q.dtype)):
        leaves = [t.detach().to(dt).requires_grad_() for t in (q, k, v)]
        o = attention(*leaves, **opts)
        o.backward(dout.to(dt))
        results[name] = [o.detach()] + [t.grad for t in leaves]
    for what, got, ref, naive in zip(("out", "dq", "dk", "dv"), [out] + list(grads),
                                      results["ref"], results["naive"]):
        assert torch.isfinite(got).all(), what
        assert_fa3_close(got, ref, naive, what)


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("causal,sq,sk,h,hk", [(False, 64, 80, 4, 4), (True, 97, 64, 4, 2),
                                               (True, 1, 200, 8, 1)])
def test_forward_backward_match_float64(device, causal, sq, sk, h, hk):
    q, k, v, dout = inputs(device, 2, sq, sk, h, hk, 64, seed=sq + sk)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = flashkit.attention(*leaves, causal=causal)
    out.backward(dout)
    assert out.shape == q.shape and out.dtype == q.dtype
    check_against_reference(q, k, v, dout, out.detach(), [t.grad for t in leaves], causal=causal)


@pytest.mark.parametrize("device", devices())
def test_strided_layout_and_lse(device):
    """[b, h, s, d] tensors viewed as [b, s, h, d] (the transformers layout) run without copies
    of q, k, v; lse comes back detached."""
    q, k, v, dout = inputs(device, 2, 48, 48, 4, 4, 64, seed=1)
    qt, kt, vt = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in (q, k, v))
    assert not qt.is_contiguous()
    out, lse = flashkit.attention(qt, kt, vt, causal=True, softmax_scale=0.1, return_lse=True)
    ref = attention(q.double(), k.double(), v.double(), causal=True, scale=0.1)
    naive = attention(q, k, v, causal=True, scale=0.1)
    assert_fa3_close(out, ref, naive, "out")
    assert lse.shape == (2, 4, 48) and lse.dtype == torch.float32 and not lse.requires_grad


@pytest.mark.parametrize("device", devices())
def test_score_options_match_float64(device):
    """Sliding window and softcap (with causal) through the torch op and autograd."""
    q, k, v, dout = inputs(device, 1, 40, 56, 2, 1, 64, seed=5)
    for opts in (dict(window=(8, 3)), dict(causal=True, softcap=2.0),
                 dict(causal=True, window=(10, -1), softcap=1.5)):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        out = flashkit.attention(*leaves, **opts)
        out.backward(dout)
        check_against_reference(q, k, v, dout, out.detach(), [t.grad for t in leaves], **opts)


@pytest.mark.parametrize("device", devices())
def test_varlen_matches_each_sequence(device):
    lq, lk = [17, 1, 64], [30, 9, 64]
    q, _, _, dq_out = inputs(device, 1, sum(lq) + 5, 1, 4, 2, 64, seed=2)
    _, k, v, _ = inputs(device, 1, 1, sum(lk), 4, 2, 64, seed=3)
    q, k, v, dout = q[0], k[0], v[0], dq_out[0]
    cu = lambda n: torch.tensor([0] + n, device=device).cumsum(0).to(torch.int32)  # noqa: E731
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = flashkit.attention_varlen(*leaves, cu(lq), cu(lk), max(lq), max(lk), causal=True)
    out.backward(dout)
    assert (out[sum(lq):] == 0).all() and (leaves[0].grad[sum(lq):] == 0).all()
    oq = ok = 0
    for nq, nk in zip(lq, lk):
        sl_q, sl_k = slice(oq, oq + nq), slice(ok, ok + nk)
        check_against_reference(q[None, sl_q], k[None, sl_k], v[None, sl_k], dout[None, sl_q],
                                out[None, sl_q].detach(),
                                [leaves[0].grad[None, sl_q], leaves[1].grad[None, sl_k],
                                 leaves[2].grad[None, sl_k]], causal=True)
        oq, ok = oq + nq, ok + nk


@pytest.mark.parametrize("device", devices()[-1:])
def test_opcheck(device):
    """torch.library's own audit: schema, fake tensor, autograd registration, AOT dispatch."""
    q, k, v, _ = inputs(device, 1, 32, 48, 2, 2, 64, seed=4)
    args = (q.requires_grad_(), k.requires_grad_(), v.requires_grad_(), None, None, 0, 0, True,
            0.0, -1, -1, 0.0, None, 0.0, None, None, 128, 128, True)
    torch.library.opcheck(torch.ops.flashkit.attention_fwd.default, args)


@pytest.mark.parametrize("device", devices()[-1:])  # the GPU when there is one
@pytest.mark.parametrize("entry,backend", [(flashkit.attention, "inductor"),
                                           (torch_ops.attention, "aot_eager")])
def test_compile_fullgraph(device, entry, backend):
    q, k, v, _ = inputs(device, 2, 64, 64, 4, 2, 64, seed=6)

    def loss(q, k, v):
        return entry(q, k, v, causal=True).float().square().sum()

    compiled = torch.compile(loss, fullgraph=True, backend=backend)
    grads = []
    for f in (loss, compiled):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        value = f(*leaves)
        value.backward()
        grads.append([value.detach()] + [t.grad for t in leaves])
    for eager, comp in zip(*grads):
        torch.testing.assert_close(comp, eager, rtol=2e-2, atol=2e-2)


def replay_causal_graph(shape, seeds):
    """A causal flashkit.attention of `shape` (b, sq, sk, h, hk, d) captured in a CUDA graph after
    a warm-up call, replayed on fresh inputs for each later seed (output poisoned first) and
    checked against the float64 reference."""
    static = [t.clone() for t in inputs("cuda", *shape, seed=seeds[0])[:3]]
    flashkit.attention(*static, causal=True)  # warm-up outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = flashkit.attention(*static, causal=True)
    for seed in seeds[1:]:
        fresh = inputs("cuda", *shape, seed=seed)[:3]
        for s, f in zip(static, fresh):
            s.copy_(f)
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        ref = attention(*(t.double() for t in fresh), causal=True)
        assert_fa3_close(out, ref, attention(*fresh, causal=True), "out")


@cuda_only
def test_cuda_graph_capture_uses_the_current_stream():
    """Capture runs on a side stream: a launch anywhere else would break the capture."""
    replay_causal_graph((2, 128, 128, 4, 4, 64), (7, 8))


@cuda_only
def test_cuda_graph_replays_causal_tiles_from_the_counter():
    """More causal tiles than SMs: the Hopper forward draws them from a counter that the captured
    memset clears before every replay, so each replay computes every tile once."""
    replay_causal_graph((4, 1100, 1100, 8, 2, 64), (11, 12, 13))


@cuda_only
def test_cuda_graph_replays_the_backward():
    """Forward and backward captured in one CUDA graph (on the Hopper path the dQ conversion is
    launched programmatically behind the backward's main kernel and waits on per-head counts that
    the preprocess zeroes), more key-block CTAs than SMs, GQA, lengths off the tiles; replayed on
    fresh inputs with the gradients poisoned first, checked against the float64 reference."""
    shape = (3, 1000, 2100, 8, 2, 128)
    q, k, v, dout = inputs("cuda", *shape, seed=21)
    static = [t.clone().requires_grad_() for t in (q, k, v)]
    static_dout = dout.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the capture
        flashkit.attention(*static).backward(static_dout)
    torch.cuda.current_stream().wait_stream(side)
    for t in static:
        t.grad = None
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = flashkit.attention(*static)
        out.backward(static_dout)
    grads = [t.grad for t in static]
    for seed in (22, 23):
        fresh = inputs("cuda", *shape, seed=seed)
        with torch.no_grad():
            for s, f in zip(static + [static_dout], fresh):
                s.copy_(f)
            for g in [out] + grads:
                g.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        check_against_reference(*fresh, out.detach(), grads)


@cuda_only
def test_no_host_sync():
    q, k, v, dout = inputs("cuda", 2, 64, 64, 4, 2, 64, seed=9)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        out = flashkit.attention(*leaves, causal=True)
        out.backward(dout)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert all(t.grad is not None for t in leaves)


@pytest.mark.parametrize("device", devices())
def test_errors_name_the_argument(device):
    q, k, v, _ = inputs(device, 1, 8, 8, 2, 2, 64, seed=10)
    with pytest.raises(ValueError, match="^k: expected hdim 64 like q, got 32"):
        flashkit.attention(q, k[..., :32], v[..., :32])
    with pytest.raises(TypeError, match="^k: expected a torch tensor like q"):
        flashkit.attention(q, k.cpu().numpy() if device == "cpu" else None, v)
    if device == "cuda":
        with pytest.raises(ValueError, match="^q: expected f16 or bf16 on cuda"):
            flashkit.attention(q.float(), k.float(), v.float())


@cuda_only
@pytest.mark.parametrize("causal", [False, True])
def test_cuda_dropout_and_block_mask_match_cpu(causal):
    """Dropout and a block mask through the custom op on the GPU: the same torch seed gives the
    same Philox key, and the CUDA kernels draw the CPU backend's mask bit for bit, so GPU (bf16)
    and CPU (fp32 on the same values) outputs and gradients agree to bf16 rounding; a mismatched
    mask would differ by O(1)."""
    q, k, v, dout = inputs("cuda", 2, 300, 520, 4, 2, 64, seed=11)
    gen = torch.Generator().manual_seed(3)
    mask = (torch.rand(2, 4, 3, 5, generator=gen) > 0.3).to(torch.uint8)  # 128 x 128 blocks
    results = {}
    for device, dtype in (("cpu", torch.float32), ("cuda", torch.bfloat16)):
        leaves = [t.detach().to(device=device, dtype=dtype).requires_grad_() for t in (q, k, v)]
        torch.manual_seed(5)
        out = flashkit.attention(*leaves, causal=causal, dropout_p=0.2, block_mask=mask.to(device))
        out.backward(dout.to(device=device, dtype=dtype))
        results[device] = [t.detach().float().cpu() for t in [out] + [x.grad for x in leaves]]
    for what, got, ref in zip(("out", "dq", "dk", "dv"), results["cuda"], results["cpu"]):
        assert torch.isfinite(got).all(), what
        torch.testing.assert_close(got, ref, atol=4e-2, rtol=4e-2, msg=what)


# --- FP8 (e4m3) forward: flashkit.attention_fp8 on torch.float8_e4m3fn tensors ---

def fp8_inputs(device, b, sq, sk, h, hk, d, seed):
    """Random q, k, v quantized to e4m3 with power-of-two descales (so the bf16 / fp64 copies of
    the dequantized values are exact), and the descales as fp32 tensors on the device."""
    gen = torch.Generator().manual_seed(seed)
    scales = (1 / 32, 1 / 16, 1 / 64)
    shapes = ((b, sq, h, d), (b, sk, hk, d), (b, sk, hk, d))
    x8 = [(torch.randn(*s, generator=gen) / c).to(torch.float8_e4m3fn).to(device)
          for s, c in zip(shapes, scales)]
    ds = [torch.tensor([c], dtype=torch.float32, device=device) for c in scales]
    return x8, ds


def naive_fp8(q, k, v, causal):
    """fp32 scores and softmax, P rounded to e4m3 before P V (what the tensor cores do), out to
    bf16: the yardstick of the tolerance rule for the GPU's fp8 forward."""
    b, sq, h, d = q.shape
    hk = k.shape[2]
    k = k.repeat_interleave(h // hk, dim=2)
    v = v.repeat_interleave(h // hk, dim=2)
    s = torch.einsum("bihd,bjhd->bhij", q, k) * d ** -0.5
    if causal:
        sk = k.shape[1]
        rel = torch.arange(sk)[None, :] - torch.arange(sq)[:, None] - (sk - sq)
        s = s.masked_fill(rel > 0, float("-inf"))
    m = s.amax(-1, keepdim=True)
    p = torch.exp(s - m)
    l = p.sum(-1, keepdim=True)
    p8 = p.to(torch.float8_e4m3fn).float()
    return (torch.einsum("bhij,bjhd->bihd", p8, v) / l.permute(0, 2, 1, 3)).bfloat16()


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("causal", [False, True])
def test_fp8_forward(device, causal):
    if device == "cuda" and torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the fp8 kernels are Hopper (sm_90) kernels")
    (q8, k8, v8), (qd, kd, vd) = fp8_inputs(device, 2, 200, 333, 4, 2, 128, seed=31 + causal)
    out, lse = flashkit.attention_fp8(q8, k8, v8, q_descale=qd, k_descale=kd, v_descale=vd,
                                      causal=causal, return_lse=True)
    assert out.dtype == torch.bfloat16 and out.shape == q8.shape and out.device == q8.device
    assert lse.shape == (2, 4, 200) and lse.dtype == torch.float32
    qf, kf, vf = (x.cpu().double() * d.item() for x, d in ((q8, qd), (k8, kd), (v8, vd)))
    ref = attention(qf, kf, vf, causal=causal)
    s = torch.einsum("bihd,bjhd->bhij", qf, kf.repeat_interleave(2, dim=2)) * 128 ** -0.5
    if causal:
        rel = torch.arange(333)[None, :] - torch.arange(200)[:, None] - 133
        s = s.masked_fill(rel > 0, float("-inf"))
    ref_lse = torch.logsumexp(s, dim=-1)
    # the GPU's fp8 MMAs accumulate with ~14 significant bits (bench/NOTES-attention.md)
    assert (lse.cpu().double() - ref_lse).abs().max().item() < (1e-5 if device == "cpu" else 3e-3)
    if device == "cpu":  # fp32 arithmetic, out rounded to bf16
        assert_fa3_close(out.cpu(), ref, ref.bfloat16(), "out (cpu)")
    else:
        assert_fa3_close(out.cpu(), ref, naive_fp8(qf.float(), kf.float(), vf.float(), causal),
                         "out (cuda)")
    # the same call with Python-number descales, and without return_lse
    again = flashkit.attention_fp8(q8, k8, v8, q_descale=qd.item(), k_descale=kd.item(),
                                   v_descale=vd.item(), causal=causal)
    assert torch.equal(again, out)
    # descales per (batch, KV head) of the same values: the same result
    per_head = [d.expand(2, 2).contiguous() for d in (qd, kd, vd)]
    again = flashkit.attention_fp8(q8, k8, v8, q_descale=per_head[0], k_descale=per_head[1],
                                   v_descale=per_head[2], causal=causal)
    assert torch.equal(again, out)
    # ... and different ones per slice: each (batch, KV head) slice scaled by its own factor
    f = torch.tensor([[1.0, 2.0], [0.5, 4.0]], device=device)
    got = flashkit.attention_fp8(q8, k8, v8, q_descale=qd * f, k_descale=kd * f,
                                 v_descale=vd * f, causal=causal)
    fq = f.cpu().double().repeat_interleave(2, dim=1)[:, None, :, None]
    fk = f.cpu().double()[:, None, :, None]
    ref2 = attention(qf * fq, kf * fk, vf * fk, causal=causal)
    if device == "cpu":
        assert_fa3_close(got.cpu(), ref2, ref2.bfloat16(), "out, per-head descales (cpu)")
    else:
        assert_fa3_close(got.cpu(), ref2,
                         naive_fp8((qf * fq).float(), (kf * fk).float(), (vf * fk).float(),
                                   causal), "out, per-head descales (cuda)")


@pytest.mark.parametrize("device", devices()[-1:])
def test_fp8_opcheck_and_compile(device):
    if device == "cuda" and torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the fp8 kernels are Hopper (sm_90) kernels")
    (q8, k8, v8), (qd, kd, vd) = fp8_inputs(device, 1, 64, 80, 2, 1, 64, seed=5)
    # test_schema (and the AOT test) run torch ops that have no float8 kernels
    torch.library.opcheck(torch.ops.flashkit.attention_fp8_fwd.default,
                          (q8, k8, v8, qd, kd, vd, True, 0.0, None, None, 0, 0),
                          test_utils=("test_faketensor", "test_autograd_registration"))
    fn = lambda q, k, v: flashkit.attention_fp8(q, k, v, q_descale=qd, k_descale=kd,  # noqa: E731
                                                v_descale=vd, causal=True)
    compiled = torch.compile(fn, fullgraph=True, backend="aot_eager")
    assert torch.equal(compiled(q8, k8, v8), fn(q8, k8, v8))


def test_fp8_errors():
    q = torch.zeros(1, 8, 2, 16, dtype=torch.bfloat16)
    q8 = q.to(torch.float8_e4m3fn)
    with pytest.raises(TypeError, match="q: expected torch.float8_e4m3fn"):
        flashkit.attention_fp8(q, q8, q8)
    with pytest.raises(TypeError, match="v: expected torch.float8_e4m3fn"):
        flashkit.attention_fp8(q8, q8, q)
    with pytest.raises(ValueError, match="k_descale"):
        flashkit.attention_fp8(q8, q8, q8, k_descale=torch.ones(1, dtype=torch.float64))


@pytest.mark.parametrize("device", devices())
def test_fp8_varlen(device):
    """Packed sequences give each sequence's dense result (same values, same descales)."""
    if device == "cuda" and torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the fp8 kernels are Hopper (sm_90) kernels")
    lens_q, lens_k = [1, 130, 67], [200, 130, 5]  # the last: 62 rows that see no key
    gen = torch.Generator().manual_seed(44)
    scales = (1 / 32, 1 / 16, 1 / 64)
    q8 = (torch.randn(sum(lens_q), 4, 64, generator=gen) / scales[0]).to(torch.float8_e4m3fn)
    k8, v8 = ((torch.randn(sum(lens_k), 2, 64, generator=gen) / c).to(torch.float8_e4m3fn)
              for c in scales[1:])
    q8, k8, v8 = (t.to(device) for t in (q8, k8, v8))
    ds = [torch.tensor([c], device=device) for c in scales]
    cu = lambda lens: torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32,  # noqa: E731
                                   device=device)
    out, lse = flashkit.attention_fp8(q8, k8, v8, q_descale=ds[0], k_descale=ds[1],
                                      v_descale=ds[2], causal=True, cu_seqlens_q=cu(lens_q),
                                      cu_seqlens_k=cu(lens_k), max_seqlen_q=max(lens_q),
                                      max_seqlen_k=max(lens_k), return_lse=True)
    assert out.shape == q8.shape and lse.shape == (4, sum(lens_q))
    oq = ok = 0
    for nq, nk in zip(lens_q, lens_k):
        one, one_lse = flashkit.attention_fp8(q8[None, oq:oq + nq], k8[None, ok:ok + nk],
                                              v8[None, ok:ok + nk], q_descale=ds[0],
                                              k_descale=ds[1], v_descale=ds[2], causal=True,
                                              return_lse=True)
        # the same kernel on the same keys: equal up to the order of the key tiles' sums
        torch.testing.assert_close(out[oq:oq + nq].float(), one[0].float(), atol=1e-2, rtol=0)
        torch.testing.assert_close(lse[:, oq:oq + nq], one_lse[0], atol=1e-3, rtol=0)  # -inf too
        oq, ok = oq + nq, ok + nk
