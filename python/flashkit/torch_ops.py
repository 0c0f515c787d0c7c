"""flashkit on torch tensors: attention as torch.library custom ops (flashkit::attention_fwd and
flashkit::attention_bwd) with fake (meta) implementations and autograd registered, so autograd,
torch.compile(fullgraph=True) and CUDA graphs see one opaque op each way; decode as the custom op
flashkit::decode; merge_states on torch tensors. flashkit.ops imports this module the first
time it is handed a torch tensor.

Tensors reach the C++ library as DLPack capsules of the same memory (no copies), exported with
stream=-1 so torch adds no cross-stream event (the array-API "do not synchronise" value): instead
every call passes torch.cuda.current_stream() to the library, which enqueues its kernels there
without synchronising the host. The only copies made are of operands whose layout the kernels
cannot read (last dim not contiguous, or on the GPU rows not 16-byte aligned), as flash-attn does.
"""
from typing import List, Optional, Tuple

import torch

from . import _C, ops

Tensor = torch.Tensor


def _dl(t):
    """A DLPack capsule of t's memory for the extension (no copy; no stream synchronisation)."""
    return t.detach().__dlpack__(stream=-1)


def _dl_opt(t):
    return None if t is None else _dl(t)


def _stream(t):
    """torch's current stream on t's device as an integer handle (0, the legacy default stream,
    for CPU tensors)."""
    return torch.cuda.current_stream(t.device).cuda_stream if t.is_cuda else 0


def _readable(t):
    """Whether the kernels read t in place: last dim contiguous; on the GPU also a 16-byte
    aligned pointer and every other stride a multiple of 16 bytes (16-byte vector rows)."""
    if t.dim() == 0 or t.stride(-1) != 1:
        return False
    if not t.is_cuda:
        return True
    return t.data_ptr() % 16 == 0 and all(s * t.element_size() % 16 == 0 for s in t.stride()[:-1])


def _operand(t):
    """t itself when the kernels can read it, else a copy with the canonical contiguous strides."""
    return t if _readable(t) else t.clone(memory_format=torch.contiguous_format)


def _lse_shape(q, varlen):
    # dense: [batch, heads, seqlen_q]; varlen: [heads, total_q]
    return (q.shape[1], q.shape[0]) if varlen else (q.shape[0], q.shape[2], q.shape[1])


def _forward_outputs(q, dtype, varlen):
    """(out, lse) of a forward on q: out [q's shape] in dtype, lse fp32. Varlen tokens past
    cu_seqlens[-1] are not written by the library: they read 0 / -inf."""
    out = torch.empty(q.shape, dtype=dtype, device=q.device)
    lse = torch.empty(_lse_shape(q, varlen), dtype=torch.float32, device=q.device)
    if varlen:
        out.zero_()
        lse.fill_(float("-inf"))
    return out, lse


def _options(q, cu_q, cu_k, max_q, max_k, causal, scale, left, right, softcap, alibi, dropout_p,
             rng_state, block_mask, block_q, block_k, deterministic):
    # The Philox key lives in a CPU tensor: reading it never waits for the GPU.
    seed, offset = rng_state.tolist() if rng_state is not None else (0, 0)
    return dict(causal=causal, softmax_scale=scale, window_left=left, window_right=right,
                softcap=softcap, alibi_slopes=_dl_opt(alibi), dropout_p=dropout_p,
                dropout_seed=seed, dropout_offset=offset, block_mask=_dl_opt(block_mask),
                block_mask_block_q=block_q, block_mask_block_k=block_k,
                cu_seqlens_q=_dl_opt(cu_q), cu_seqlens_k=_dl_opt(cu_k), max_seqlen_q=max_q,
                max_seqlen_k=max_k, deterministic=deterministic, stream=_stream(q))


def _attention_fwd(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Optional[Tensor],
                   cu_seqlens_k: Optional[Tensor], max_seqlen_q: int, max_seqlen_k: int,
                   causal: bool, softmax_scale: float, window_left: int, window_right: int,
                   softcap: float, alibi_slopes: Optional[Tensor], dropout_p: float,
                   rng_state: Optional[Tensor], block_mask: Optional[Tensor], block_q: int,
                   block_k: int, deterministic: bool) -> Tuple[Tensor, Tensor]:
    """(out, lse) of flashkit attention; dense when cu_seqlens_q is None, else varlen."""
    q, k, v = _operand(q), _operand(k), _operand(v)
    out, lse = _forward_outputs(q, q.dtype, cu_seqlens_q is not None)
    _C.attention_forward(_dl(q), _dl(k), _dl(v), _dl(out), _dl(lse),
                         **_options(q, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                    causal, softmax_scale, window_left, window_right, softcap,
                                    alibi_slopes, dropout_p, rng_state, block_mask, block_q,
                                    block_k, deterministic))
    return out, lse


# The custom op; _call skips its dispatch (tens of microseconds of host time per call, most of a
# decode step's attention in a small model) when nothing is traced: without gradients it calls
# the function, with them _EagerAttention.
attention_fwd = torch.library.custom_op("flashkit::attention_fwd", mutates_args=())(_attention_fwd)


@attention_fwd.register_fake
def _attention_fwd_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal,
                        softmax_scale, window_left, window_right, softcap, alibi_slopes,
                        dropout_p, rng_state, block_mask, block_q, block_k, deterministic):
    varlen = cu_seqlens_q is not None
    return q.new_empty(q.shape), q.new_empty(_lse_shape(q, varlen), dtype=torch.float32)


def _attention_bwd(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor,
                  cu_seqlens_q: Optional[Tensor], cu_seqlens_k: Optional[Tensor],
                  max_seqlen_q: int, max_seqlen_k: int, causal: bool, softmax_scale: float,
                  window_left: int, window_right: int, softcap: float,
                  alibi_slopes: Optional[Tensor], dropout_p: float, rng_state: Optional[Tensor],
                  block_mask: Optional[Tensor], block_q: int, block_k: int,
                  deterministic: bool) -> Tuple[Tensor, Tensor, Tensor]:
    """(dq, dk, dv) of attention_fwd for the output gradient dout (GQA: dk/dv summed over the
    query heads of each KV head)."""
    dout, q, k, v, o = (_operand(t) for t in (dout, q, k, v, o))
    # Varlen tokens past cu_seqlens[-1] are not written: their gradient is 0.
    alloc = torch.zeros if cu_seqlens_q is not None else torch.empty
    dq, dk, dv = (alloc(t.shape, dtype=t.dtype, device=t.device) for t in (q, k, v))
    _C.attention_backward(_dl(q), _dl(k), _dl(v), _dl(o), _dl(dout), _dl(lse), _dl(dq), _dl(dk),
                          _dl(dv),
                          **_options(q, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                     causal, softmax_scale, window_left, window_right, softcap,
                                     alibi_slopes, dropout_p, rng_state, block_mask, block_q,
                                     block_k, deterministic))
    return dq, dk, dv


attention_bwd = torch.library.custom_op("flashkit::attention_bwd", mutates_args=())(_attention_bwd)


@attention_bwd.register_fake
def _attention_bwd_fake(dout, q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                        max_seqlen_k, causal, softmax_scale, window_left, window_right, softcap,
                        alibi_slopes, dropout_p, rng_state, block_mask, block_q, block_k,
                        deterministic):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _setup_context(ctx, inputs, output):
    (q, k, v, cu_q, cu_k, max_q, max_k, causal, scale, left, right, softcap, alibi, dropout_p,
     rng_state, block_mask, block_q, block_k, deterministic) = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, cu_q, cu_k, alibi, rng_state, block_mask)
    ctx.options = (max_q, max_k, causal, scale, left, right, softcap, dropout_p, block_q, block_k,
                   deterministic)


def _grads(ctx, dout, bwd):
    """One gradient per input of attention_fwd (19) from what _setup_context saved, through bwd
    (the custom op attention_bwd, or its function). lse leaves the public API detached, so its
    gradient carries nothing; dout is None only where nothing flowed into out (eager calls do not
    materialise zero gradients)."""
    if dout is None:
        return (None,) * 19
    q, k, v, out, lse, cu_q, cu_k, alibi, rng_state, block_mask = ctx.saved_tensors
    (max_q, max_k, causal, scale, left, right, softcap, dropout_p, block_q, block_k,
     deterministic) = ctx.options
    dq, dk, dv = bwd(dout, q, k, v, out, lse, cu_q, cu_k, max_q, max_k, causal, scale, left, right,
                     softcap, alibi, dropout_p, rng_state, block_mask, block_q, block_k,
                     deterministic)
    return (dq, dk, dv) + (None,) * 16


def _backward(ctx, dout, dlse):
    return _grads(ctx, dout, attention_bwd)


attention_fwd.register_autograd(_backward, setup_context=_setup_context)


class _EagerAttention(torch.autograd.Function):
    """The custom op's autograd without its dispatch, for eager calls that need gradients: the
    same forward and backward functions, called directly. torch's custom-op autograd path spent
    ~110 us of host time a call before the library was reached (torch 2.11, CPU: 149 us a forward
    against 37 without gradients; fill_defaults alone ~80 us), more than a sparse or short
    problem's GPU time (bench/NOTES-attention.md, session 10). Traced calls keep the op."""

    @staticmethod
    def forward(ctx, *inputs):
        out, lse = _attention_fwd(*inputs)
        ctx.mark_non_differentiable(lse)
        # No zero-filled gradient for lse (or for out when nothing flows into it): torch would
        # allocate and fill one every backward (a fill kernel and ~80 us of host time a call on
        # the H200 machine, session 10's torch.profiler run).
        ctx.set_materialize_grads(False)
        _setup_context(ctx, inputs, (out, lse))
        return out, lse

    @staticmethod
    def backward(ctx, dout, dlse):
        return _grads(ctx, dout, _attention_bwd)


def _rng_state(dropout_p):
    """The dropout Philox key (seed, offset) drawn from torch's default CPU generator
    (torch.manual_seed reproduces it), kept in a CPU tensor; None without dropout."""
    if dropout_p == 0:
        return None
    return torch.randint(0, 2**62, (2,), dtype=torch.int64)


def _call(q, k, v, cu_q, cu_k, max_q, max_k, causal, softmax_scale, dropout_p, window, softcap,
          alibi_slopes, block_mask, block_mask_block, deterministic, return_lse):
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: expected a torch tensor like q, got {type(t).__name__}")
    left, right = window
    if torch.compiler.is_compiling():
        fwd = torch.ops.flashkit.attention_fwd
    elif torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        fwd = _EagerAttention.apply
    else:
        fwd = _attention_fwd
    out, lse = fwd(
        q, k, v, cu_q, cu_k, int(max_q), int(max_k), bool(causal),
        0.0 if softmax_scale is None else float(softmax_scale), int(left), int(right),
        float(softcap), alibi_slopes, float(dropout_p), _rng_state(dropout_p), block_mask,
        int(block_mask_block[0]), int(block_mask_block[1]), bool(deterministic))
    return (out, lse.detach()) if return_lse else out


def attention(q, k, v, *, causal=False, softmax_scale=None, dropout_p=0.0, window=(-1, -1),
              softcap=0.0, alibi_slopes=None, block_mask=None, block_mask_block=(128, 128),
              deterministic=False, return_lse=False):
    """flashkit.attention on torch tensors (see flashkit.ops.attention for the arguments)."""
    return _call(q, k, v, None, None, 0, 0, causal, softmax_scale, dropout_p, window, softcap,
                 alibi_slopes, block_mask, block_mask_block, deterministic, return_lse)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *,
                     causal=False, softmax_scale=None, dropout_p=0.0, window=(-1, -1),
                     softcap=0.0, alibi_slopes=None, block_mask=None, block_mask_block=(128, 128),
                     deterministic=False, return_lse=False):
    """flashkit.attention_varlen on torch tensors (see flashkit.ops.attention_varlen)."""
    return _call(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal,
                 softmax_scale, dropout_p, window, softcap, alibi_slopes, block_mask,
                 block_mask_block, deterministic, return_lse)


def _attention_fp8_fwd(q: Tensor, k: Tensor, v: Tensor, q_descale: Optional[Tensor],
                       k_descale: Optional[Tensor], v_descale: Optional[Tensor], causal: bool,
                       softmax_scale: float, cu_seqlens_q: Optional[Tensor],
                       cu_seqlens_k: Optional[Tensor], max_seqlen_q: int,
                       max_seqlen_k: int) -> Tuple[Tensor, Tensor]:
    """(out bfloat16, lse) of the fp8 forward; q, k, v float8_e4m3fn, descales fp32 tensors on
    q's device or None; varlen when cu_seqlens_q is given."""
    q, k, v = _operand(q), _operand(k), _operand(v)
    codes = [t.view(torch.uint8) for t in (q, k, v)]
    out, lse = _forward_outputs(q, torch.bfloat16, cu_seqlens_q is not None)
    # (fresh capsules for each call: a DLPack capsule is consumed by the call that takes it)
    seq = lambda: dict(cu_seqlens_q=_dl_opt(cu_seqlens_q),  # noqa: E731
                       cu_seqlens_k=_dl_opt(cu_seqlens_k), max_seqlen_q=max_seqlen_q,
                       max_seqlen_k=max_seqlen_k)
    # The transposed V's scratch from torch's allocator (stream-ordered; a captured graph's pool).
    workspace = None
    if q.is_cuda:
        nbytes = _C.attention_forward_fp8_workspace_bytes(_dl(codes[0]), _dl(codes[1]),
                                                          codes=True, **seq())
        if nbytes:
            workspace = torch.empty(nbytes, dtype=torch.uint8, device=q.device)
    _C.attention_forward_fp8(*(_dl(t) for t in codes), _dl(out), _dl(lse),
                             q_descale=_dl_opt(q_descale), k_descale=_dl_opt(k_descale),
                             v_descale=_dl_opt(v_descale), causal=causal,
                             softmax_scale=softmax_scale, codes=True,
                             workspace=_dl_opt(workspace), stream=_stream(q), **seq())
    return out, lse


attention_fp8_fwd = torch.library.custom_op("flashkit::attention_fp8_fwd",
                                            mutates_args=())(_attention_fp8_fwd)


@attention_fp8_fwd.register_fake
def _attention_fp8_fwd_fake(q, k, v, q_descale, k_descale, v_descale, causal, softmax_scale,
                            cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k):
    return (q.new_empty(q.shape, dtype=torch.bfloat16),
            q.new_empty(_lse_shape(q, cu_seqlens_q is not None), dtype=torch.float32))


def _descale(d, q):
    """A descale argument as an fp32 one-element tensor on q's device (None stays None; a
    Python number becomes a small tensor, one host-to-device copy)."""
    if d is None or isinstance(d, torch.Tensor):
        return d
    return torch.tensor([float(d)], dtype=torch.float32, device=q.device)


def attention_fp8(q, k, v, *, q_descale=None, k_descale=None, v_descale=None, causal=False,
                  softmax_scale=None, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=0,
                  max_seqlen_k=0, return_lse=False):
    """flashkit.attention_fp8 on torch tensors (see flashkit.ops.attention_fp8)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: expected a torch tensor like q, got {type(t).__name__}")
        if t.dtype != torch.float8_e4m3fn:
            raise TypeError(f"{name}: expected torch.float8_e4m3fn, got {t.dtype}")
    ds = [_descale(d, q) for d in (q_descale, k_descale, v_descale)]
    # Eager calls skip the op's dispatch (no gradient to record); traced ones keep the op.
    fn = (torch.ops.flashkit.attention_fp8_fwd if torch.compiler.is_compiling()
          else _attention_fp8_fwd)
    out, lse = fn(q, k, v, *ds, bool(causal),
                  0.0 if softmax_scale is None else float(softmax_scale), cu_seqlens_q,
                  cu_seqlens_k, int(max_seqlen_q), int(max_seqlen_k))
    return (out, lse) if return_lse else out


def _decode(q: Tensor, k_cache: Tensor, v_cache: Tensor, cache_seqlens: Tensor,
              block_table: Optional[Tensor], kv_lengths: List[int], schedule: str, sm_count: int,
              ctas_per_sm: int, softmax_scale: float, softcap: float = 0.0,
              window_left: int = -1, plan_window: int = -1) -> Tuple[Tensor, Tensor]:
    """(out, lse) of decode attention. The plan is named by what it is made from (kv_lengths,
    schedule, sm_count, ctas_per_sm, plan_window and the shapes): a plan is no tensor, but the
    same inputs give the same plan, found in flashkit.ops' plan cache (made there on first use).
    softcap and window_left are the decode's own (DecodeOptions); plan_window is the window the
    plan was made for (-1 none), which decode then requires of window_left."""
    plan = ops.planned(q, k_cache, block_table, kv_lengths, schedule, sm_count, ctas_per_sm,
                       plan_window)
    batch, q_len, heads, _ = q.shape
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty((batch, heads, q_len), dtype=torch.float32, device=q.device)
    # Scratch from torch's allocator: stream-ordered, and owned by a captured CUDA graph's pool.
    workspace = None
    if q.is_cuda and plan.workspace_bytes > 0:
        workspace = torch.empty(plan.workspace_bytes, dtype=torch.uint8, device=q.device)
    _C.decode(_dl(_operand(q)), _dl(k_cache), _dl(v_cache), _dl(cache_seqlens),
              _dl_opt(block_table), _dl(out), _dl(lse), plan.plan, softmax_scale=softmax_scale,
              stream=_stream(q), workspace=_dl_opt(workspace), softcap=softcap,
              window_left=window_left)
    return out, lse


decode_op = torch.library.custom_op("flashkit::decode", mutates_args=())(_decode)


@decode_op.register_fake
def _decode_fake(q, k_cache, v_cache, cache_seqlens, block_table, kv_lengths, schedule, sm_count,
                 ctas_per_sm, softmax_scale, softcap=0.0, window_left=-1, plan_window=-1):
    batch, q_len, heads, _ = q.shape
    return q.new_empty(q.shape), q.new_empty((batch, heads, q_len), dtype=torch.float32)


def decode(q, k_cache, v_cache, cache_seqlens, block_table, schedule, plan, softmax_scale,
           return_lse, softcap=0.0, window_left=-1):
    """flashkit.decode on torch tensors (see flashkit.ops.decode): eager calls run the op's
    function directly, torch.compile(fullgraph=True) traces the custom op flashkit::decode when
    the plan is None or made outside the compiled region; CUDA graphs capture either."""
    if not isinstance(cache_seqlens, torch.Tensor):
        cache_seqlens = torch.as_tensor(cache_seqlens, dtype=torch.int32)
    if plan is None:  # planned for the decode's window
        lengths, sm_count, ctas_per_sm = ops._default_lengths(k_cache, cache_seqlens,
                                                               block_table), 0, 0
        plan_window = window_left
    else:
        lengths, schedule, sm_count, ctas_per_sm, plan_window = ops.plan_inputs(plan)
    seqlens = cache_seqlens.to(device=q.device, dtype=torch.int32)
    # Eager calls skip the op's dispatch (decode has no gradient); traced ones keep the op.
    fn = torch.ops.flashkit.decode if torch.compiler.is_compiling() else _decode
    out, lse = fn(
        q, k_cache, v_cache, seqlens, block_table, list(lengths), schedule, sm_count, ctas_per_sm,
        0.0 if softmax_scale is None else float(softmax_scale), float(softcap), int(window_left),
        int(plan_window))
    return (out, lse) if return_lse else out


def merge_states(o_parts, lse_parts):
    """flashkit.merge_states on torch tensors (see flashkit.ops.merge_states)."""
    out = torch.empty(o_parts.shape[1:], dtype=o_parts.dtype, device=o_parts.device)
    lse = torch.empty(lse_parts.shape[1:], dtype=torch.float32, device=o_parts.device)
    _C.merge_states(_dl(o_parts), _dl(lse_parts), _dl(out), _dl(lse), stream=_stream(o_parts))
    return out, lse
