"""flashkit's array-agnostic entry points: attention, attention_varlen, decode, make_decode_plan,
merge_states. NumPy arrays (CPU) are served here by allocating wrappers over flashkit._C; torch
tensors go to flashkit.torch_ops, imported on first use so that `import flashkit` never imports
torch. Any other DLPack producer (CuPy, JAX, ...) works with the flashkit._C functions directly,
which take caller-allocated outputs and read and write every array in place (no copies).
"""
from collections import OrderedDict

import numpy as np

from . import _C



class DecodePlan:
    """A decode schedule computed on the host (plan -> run), made by make_decode_plan: the
    library's plan (its attributes: schedule, grid, num_splits, total_iters, lean_tile,
    kv_lengths, workspace_bytes) plus `inputs`, the plain values it was made from, by which
    torch's custom op flashkit::decode finds it again (torch.compile can read those)."""

    def __init__(self, plan):
        self.plan = plan
        self.inputs = (tuple(plan.kv_lengths), plan.requested, plan.sm_count, plan.ctas_per_sm,
                       plan.window_left)

    def __getattr__(self, name):
        if name == "plan":  # not set yet (e.g. during copy): no recursion
            raise AttributeError(name)
        return getattr(self.plan, name)

    def __repr__(self):
        return repr(self.plan)


def _torch_ops(x, name):
    """flashkit.torch_ops for a torch tensor, None for a NumPy array, else a TypeError naming
    the argument. (Plain isinstance checks and an import: torch.compile traces through this.)"""
    if isinstance(x, np.ndarray):
        return None
    try:
        from . import torch_ops
    except ImportError:
        torch_ops = None
    if torch_ops is None or not isinstance(x, torch_ops.torch.Tensor):
        raise TypeError(f"{name}: expected a NumPy array or a torch tensor, got "
                        f"{type(x).__name__} (other DLPack arrays: call flashkit._C.* with "
                        "outputs you allocate)")
    return torch_ops


def _window(window):
    left, right = window
    return int(left), int(right)


def attention(q, k, v, *, causal=False, softmax_scale=None, dropout_p=0.0, window=(-1, -1),
              softcap=0.0, alibi_slopes=None, block_mask=None, block_mask_block=(128, 128),
              deterministic=False, return_lse=False):
    """Exact attention out = softmax(scale * q k^T + modifiers) v, the FlashAttention-2 way.

    q [batch, seqlen_q, heads, hdim], k/v [batch, seqlen_k, kv_heads, hdim] (kv_heads divides
    heads: MQA/GQA). softmax_scale None means 1/sqrt(hdim); causal and window=(left, right) are
    bottom-right aligned (query i sees key j <= i + seqlen_k - seqlen_q); softcap > 0 applies
    softcap * tanh(s / softcap); alibi_slopes fp32 [heads] or [batch, heads]; block_mask uint8
    [batch|1, heads|1, ceil(sq/bq), ceil(sk/bk)] with (bq, bk) = block_mask_block.
    torch tensors: differentiable (q, k, v), torch.compile-able, on torch's current CUDA stream.
    NumPy arrays: forward only (see flashkit.attention_backward). Returns out, or (out, lse) with
    return_lse (lse fp32 [batch, heads, seqlen_q], natural log, not differentiable).
    """
    t = _torch_ops(q, "q")
    if t is not None:
        return t.attention(q, k, v, causal=causal, softmax_scale=softmax_scale,
                           dropout_p=dropout_p, window=window, softcap=softcap,
                           alibi_slopes=alibi_slopes, block_mask=block_mask,
                           block_mask_block=block_mask_block, deterministic=deterministic,
                           return_lse=return_lse)
    return _numpy_attention(q, k, v, None, None, 0, 0, causal, softmax_scale, dropout_p, window,
                            softcap, alibi_slopes, block_mask, block_mask_block, return_lse)


def attention_fp8(q, k, v, *, q_descale=None, k_descale=None, v_descale=None, causal=False,
                  softmax_scale=None, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=0,
                  max_seqlen_k=0, return_lse=False):
    """The FP8 (e4m3) forward: out = softmax(scale * q k^T) v computed from the dequantized
    inputs (real x = x * x_descale), with bfloat16 out, as FlashAttention-3's fp8 forward.

    q [batch, seqlen_q, heads, hdim], k/v [batch, seqlen_k, kv_heads, hdim], hdim a multiple of
    16 (up to 256); causal is bottom-right aligned. Descales: None (1), a float, or an fp32 array
    on q's device (torch: no host sync when it is a CUDA tensor) of one element or of shape
    [batch, kv_heads] (one per sequence and KV head, as FlashAttention-3's descales). torch tensors:
    float8_e4m3fn (CUDA on Hopper, or CPU), out bfloat16, no gradient; torch.compile-able
    (custom op flashkit::attention_fp8_fwd). NumPy arrays: uint8 arrays of e4m3 codes (e.g. an
    ml_dtypes float8_e4m3fn array .view(np.uint8)), out float32 holding the bfloat16 values.
    Varlen: cu_seqlens_q / cu_seqlens_k (int32 [batch+1] on q's device) with q [total_q, heads,
    hdim], k/v [total_k, kv_heads, hdim], max_seqlen_q / k as in attention_varlen (needed on the
    GPU), per-tensor descales; lse is then [heads, total_q].
    On CUDA P is rounded to e4m3 before P V (as on the tensor cores); the CPU computes
    everything in fp32 from the dequantized inputs.
    Returns out, or (out, lse) with return_lse (lse fp32 [batch, heads, seqlen_q], natural log
    of the real scores)."""
    t = _torch_ops(q, "q")
    if t is not None:
        return t.attention_fp8(q, k, v, q_descale=q_descale, k_descale=k_descale,
                               v_descale=v_descale, causal=causal, softmax_scale=softmax_scale,
                               cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                               max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
                               return_lse=return_lse)
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, np.ndarray) or x.dtype != np.uint8:
            raise TypeError(f"{name}: expected a uint8 NumPy array of e4m3 codes, got "
                            f"{getattr(x, 'dtype', type(x).__name__)}")

    def descale(d, name):
        if d is None:
            return None
        d = np.ascontiguousarray(d, dtype=np.float32)
        per_head = (q.shape[0], k.shape[-2])
        if d.size != 1 and d.shape != per_head:
            raise ValueError(f"{name}: expected one element or shape {per_head} (batch, "
                             f"kv_heads), got shape {d.shape}")
        return d.reshape(1) if d.size == 1 else d

    varlen = cu_seqlens_q is not None
    bits = np.zeros(q.shape, dtype=np.uint16)  # varlen rows past cu_seqlens[-1]: 0
    lse = np.full((q.shape[1], q.shape[0]) if varlen else (q.shape[0], q.shape[2], q.shape[1]),
                  -np.inf, dtype=np.float32)
    _C.attention_forward_fp8(q, k, v, bits, lse, q_descale=descale(q_descale, "q_descale"),
                             k_descale=descale(k_descale, "k_descale"),
                             v_descale=descale(v_descale, "v_descale"),
                             causal=bool(causal),
                             softmax_scale=0.0 if softmax_scale is None else float(softmax_scale),
                             cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                             max_seqlen_q=int(max_seqlen_q), max_seqlen_k=int(max_seqlen_k),
                             codes=True, out_bits=True)
    out = (bits.astype(np.uint32) << 16).view(np.float32)
    return (out, lse) if return_lse else out


def quantize_e4m3(x, descale=None):
    """(codes, descale): x (a float NumPy array) as uint8 e4m3 codes of x / descale, rounded to
    nearest even and saturated at +-448; descale None takes max|x| / 448 (per-tensor scaling,
    the attention_fp8 inputs' convention). dequantize_e4m3(codes, descale) gives the values back.
    (torch users: (x / descale).to(torch.float8_e4m3fn).)"""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if descale is None:
        amax = float(np.abs(x).max()) if x.size else 0.0
        descale = amax / 448.0 if amax > 0 else 1.0
    codes = np.empty(x.shape, dtype=np.uint8)
    _C.quantize_e4m3(x, codes, 1.0 / float(descale))
    return codes, np.float32(descale)


def dequantize_e4m3(codes, descale=1.0):
    """float32 values of uint8 e4m3 codes times descale."""
    codes = np.ascontiguousarray(codes, dtype=np.uint8)
    out = np.empty(codes.shape, dtype=np.float32)
    _C.dequantize_e4m3(codes, out, float(descale))
    return out


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *,
                     causal=False, softmax_scale=None, dropout_p=0.0, window=(-1, -1),
                     softcap=0.0, alibi_slopes=None, block_mask=None, block_mask_block=(128, 128),
                     deterministic=False, return_lse=False):
    """attention() on packed sequences: q [total_q, heads, hdim], k/v [total_k, kv_heads, hdim],
    cu_seqlens_q/k int32 [batch+1] offsets (on q's device), max_seqlen_q/k at least the longest
    sequence (an upper bound is fine; needed on the GPU, which never reads cu_seqlens on the
    host). Masks apply within each sequence. lse is [heads, total_q]. Tokens past
    cu_seqlens[-1] get out = 0 (and gradient 0)."""
    t = _torch_ops(q, "q")
    if t is not None:
        return t.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                  causal=causal, softmax_scale=softmax_scale,
                                  dropout_p=dropout_p, window=window, softcap=softcap,
                                  alibi_slopes=alibi_slopes, block_mask=block_mask,
                                  block_mask_block=block_mask_block, deterministic=deterministic,
                                  return_lse=return_lse)
    return _numpy_attention(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                            causal, softmax_scale, dropout_p, window, softcap, alibi_slopes,
                            block_mask, block_mask_block, return_lse)


def _numpy_attention(q, k, v, cu_q, cu_k, max_q, max_k, causal, softmax_scale, dropout_p, window,
                     softcap, alibi_slopes, block_mask, block_mask_block, return_lse):
    varlen = cu_q is not None
    # Unwritten rows (varlen padding past cu_seqlens[-1]) read as 0 / -inf, never garbage.
    out = np.zeros(q.shape, dtype=q.dtype)
    lse = np.full((q.shape[1], q.shape[0]) if varlen else (q.shape[0], q.shape[2], q.shape[1]),
                  -np.inf, dtype=np.float32)
    # Dropout draws its Philox key from NumPy's global generator (np.random.seed reproduces it).
    seed = int(np.random.randint(0, 2**62, dtype=np.int64)) if dropout_p > 0 else 0
    left, right = _window(window)
    _C.attention_forward(q, k, v, out, lse, causal=bool(causal),
                         softmax_scale=0.0 if softmax_scale is None else float(softmax_scale),
                         window_left=left, window_right=right, softcap=float(softcap),
                         alibi_slopes=alibi_slopes, dropout_p=float(dropout_p), dropout_seed=seed,
                         block_mask=block_mask, block_mask_block_q=int(block_mask_block[0]),
                         block_mask_block_k=int(block_mask_block[1]), cu_seqlens_q=cu_q,
                         cu_seqlens_k=cu_k, max_seqlen_q=int(max_q), max_seqlen_k=int(max_k))
    return (out, lse) if return_lse else out


def _dtype_name(x):
    return str(x.dtype).replace("torch.", "")


def _device(x):
    """("cuda", index) for a CUDA tensor, ("cpu", 0) otherwise."""
    dev = getattr(x, "device", None)
    if getattr(dev, "type", None) == "cuda":
        return "cuda", dev.index or 0
    return "cpu", 0


def make_decode_plan(q, k_cache, kv_lengths, block_table=None, *, schedule="auto", sm_count=0,
                     ctas_per_sm=0, window_left=-1):
    """A DecodePlan for decode(q, k_cache, ...) over caches holding at most kv_lengths[b] tokens
    (host integers: a list, NumPy array or CPU tensor). Only shapes, dtype and device of q and
    k_cache are read. schedule: "auto", "single", "split_kv" (splits merged in the kernel;
    FlashDecoding's rule, or one wave of two CTAs a SM where more fit, as at hdim 64),
    "flash_decoding" (FlashDecoding's splits and a separate merge kernel) or "lean".
    window_left >= 0: the sliding window of the decodes the plan serves (decode's window_left
    must then be the same); "auto" then plans split_kv, whose splits share the window's keys. A plan
    is reusable for every call with cache_seqlens <= kv_lengths (e.g. all layers of a decode
    step, or several steps when planned for lengths rounded up). On the GPU run it once before capturing a CUDA
    graph: its first use copies it to the device."""
    batch, q_len, hq, hdim = q.shape
    paged = block_table is not None
    page_size = int(k_cache.shape[1]) if paged else 0
    lengths = [int(n) for n in (kv_lengths.tolist() if hasattr(kv_lengths, "tolist")
                                else kv_lengths)]
    device, index = _device(q)
    plan = DecodePlan(_C.make_decode_plan(
        int(batch), int(q_len), int(hq), int(k_cache.shape[2]), int(hdim), _dtype_name(q),
        lengths, page_size=page_size, schedule=schedule, device=device, device_id=index,
        sm_count=sm_count, ctas_per_sm=ctas_per_sm, window_left=int(window_left)))
    _remember(_plan_key(q, k_cache, block_table, *plan.inputs), plan)
    return plan


# Plans made by decode(plan=None), keyed by everything a plan depends on. A plan's first GPU use
# uploads it (a cudaMalloc + copy), so reusing one keeps steady-state decode free of host syncs.
_PLANS = OrderedDict()
_PLANS_MAX = 64


def _capacity(k_cache, block_table):
    """Tokens each sequence's cache can hold: the plan for unknown (device-side) lengths."""
    if block_table is None:
        return [int(k_cache.shape[1])] * int(k_cache.shape[0])
    return [int(block_table.shape[1]) * int(k_cache.shape[1])] * int(block_table.shape[0])


def _host_lengths(cache_seqlens):
    """cache_seqlens as host ints when they are on the host, else None (never syncs a GPU)."""
    if isinstance(cache_seqlens, (list, tuple)):
        return [int(n) for n in cache_seqlens]
    if _device(cache_seqlens)[0] == "cpu" and hasattr(cache_seqlens, "tolist"):
        return [int(n) for n in cache_seqlens.tolist()]
    return None


def _plan_key(q, k_cache, block_table, lengths, schedule, sm_count, ctas_per_sm, window_left=-1):
    return (_device(q), tuple(q.shape), tuple(k_cache.shape), _dtype_name(q),
            block_table is not None, tuple(lengths), schedule, int(sm_count), int(ctas_per_sm),
            int(window_left))


def _remember(key, plan):
    _PLANS[key] = plan
    if len(_PLANS) > _PLANS_MAX:
        _PLANS.popitem(last=False)


def planned(q, k_cache, block_table, lengths, schedule, sm_count=0, ctas_per_sm=0,
            window_left=-1):
    """The DecodePlan for these inputs: the one make_decode_plan made for them, else a new one
    (cached). The same inputs always give the same plan, so a plan is named by its inputs."""
    key = _plan_key(q, k_cache, block_table, lengths, schedule, sm_count, ctas_per_sm, window_left)
    plan = _PLANS.get(key)
    if plan is None:
        plan = make_decode_plan(q, k_cache, list(lengths), block_table, schedule=schedule,
                                sm_count=sm_count, ctas_per_sm=ctas_per_sm,
                                window_left=window_left)
        _remember(key, plan)
    else:
        _PLANS.move_to_end(key)
    return plan


def plan_inputs(plan):
    """(kv_lengths, requested schedule, sm_count, ctas_per_sm, window_left): what `plan` was
    made from (a DecodePlan, or the library's own flashkit._C.DecodePlan)."""
    if isinstance(plan, DecodePlan):
        return plan.inputs
    return (tuple(plan.kv_lengths), plan.requested, plan.sm_count, plan.ctas_per_sm,
            plan.window_left)


def _default_lengths(k_cache, cache_seqlens, block_table):
    """The lengths to plan for: cache_seqlens when they are on the host, else the caches'
    capacity (lengths on the GPU are never read back: no host sync)."""
    lengths = _host_lengths(cache_seqlens)
    return lengths if lengths is not None else _capacity(k_cache, block_table)


def decode(q, k_cache, v_cache, cache_seqlens, block_table=None, *, schedule="auto", plan=None,
           softmax_scale=None, softcap=0.0, window_left=-1, return_lse=False):
    """Decode attention: q [batch, q_len (1..16), heads, hdim] against a KV cache, dense
    [batch, ctx, kv_heads, hdim] or paged [pages, page_size, kv_heads, hdim] with block_table
    int32 [batch, max_pages]; cache_seqlens int32 [batch] tokens in each cache (the q tokens are
    its last q_len, causal among themselves). plan: a DecodePlan from make_decode_plan, reused
    across calls; None plans once per shape (from cache_seqlens when they are on the host, else
    for the caches' capacity: no host sync) and caches the plan. Returns out [batch, q_len,
    heads, hdim], or (out, lse fp32 [batch, heads, q_len]) with return_lse. softcap > 0 caps the
    scores (softcap * tanh(scores / softcap), Gemma-2); window_left >= 0 is a sliding window
    (Mistral, Gemma): the query at cache position p sees keys p - window_left .. p, and only the
    window's keys are read (without a plan, one is made for the window: split_kv, whose splits
    share the window's keys; a plan made with a window needs the same window here). torch
    tensors run on torch's current stream with a torch-allocated workspace (CUDA-graph
    capturable once warm)."""
    t = _torch_ops(q, "q")
    if t is not None:
        return t.decode(q, k_cache, v_cache, cache_seqlens, block_table, schedule, plan,
                        softmax_scale, return_lse, softcap, window_left)
    if plan is None:
        plan = planned(q, k_cache, block_table, _default_lengths(k_cache, cache_seqlens,
                                                                 block_table), schedule,
                       window_left=window_left)
    out = np.empty(q.shape, dtype=q.dtype)
    lse = np.empty((q.shape[0], q.shape[2], q.shape[1]), dtype=np.float32)
    seqlens = np.ascontiguousarray(np.asarray(cache_seqlens), dtype=np.int32)
    _C.decode(q, k_cache, v_cache, seqlens, block_table, out, lse, getattr(plan, "plan", plan),
              softmax_scale=0.0 if softmax_scale is None else float(softmax_scale),
              softcap=float(softcap), window_left=int(window_left))
    return (out, lse) if return_lse else out


def merge_states(o_parts, lse_parts):
    """Combine P partial attention results over disjoint key sets: o_parts [P, ..., hdim]
    (each part normalised), lse_parts fp32 [P, ...] -> (out [..., hdim] in o_parts' dtype,
    lse fp32 [...]). out = sum_p exp(lse_p - lse) o_p, lse = log sum_p exp(lse_p)."""
    t = _torch_ops(o_parts, "o_parts")
    if t is not None:
        return t.merge_states(o_parts, lse_parts)
    out = np.empty(o_parts.shape[1:], dtype=o_parts.dtype)
    lse = np.empty(lse_parts.shape[1:], dtype=np.float32)
    _C.merge_states(o_parts, lse_parts, out, lse)
    return out, lse
