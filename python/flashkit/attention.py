"""Exact attention on NumPy arrays (CPU): allocating wrappers over flashkit._C.

q is [batch, seqlen_q, heads, hdim] (or [total_q, heads, hdim] with cu_seqlens_q/k), k and v
[batch, seqlen_k, kv_heads, hdim]; float32 or float16 (NumPy has no bfloat16; DLPack arrays of
any supported dtype go straight to flashkit._C.attention_forward with caller-made outputs).
"""
import numpy as np

from . import _C

__all__ = ["attention_forward", "attention_backward"]


def _lse_shape(q, cu_seqlens_q):
    if cu_seqlens_q is not None:
        return (q.shape[1], q.shape[0])
    return (q.shape[0], q.shape[2], q.shape[1])


def _options(causal, softmax_scale, window, softcap, alibi_slopes, cu_seqlens_q, cu_seqlens_k):
    return dict(causal=causal, softmax_scale=0.0 if softmax_scale is None else float(softmax_scale),
                window_left=window[0], window_right=window[1], softcap=softcap,
                alibi_slopes=alibi_slopes, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k)


def attention_forward(q, k, v, *, causal=False, softmax_scale=None, window=(-1, -1), softcap=0.0,
                      alibi_slopes=None, cu_seqlens_q=None, cu_seqlens_k=None):
    """Returns (out, lse): out like q, lse float32 [batch, heads, seqlen_q] ([heads, total_q]
    for varlen), the natural-log logsumexp of each scaled score row. softmax_scale None means
    1/sqrt(hdim); causal masks are bottom-right aligned; window = (left, right), -1 unbounded."""
    out = np.empty(q.shape, dtype=q.dtype)
    lse = np.empty(_lse_shape(q, cu_seqlens_q), dtype=np.float32)
    _C.attention_forward(q, k, v, out, lse,
                         **_options(causal, softmax_scale, window, softcap, alibi_slopes,
                                    cu_seqlens_q, cu_seqlens_k))
    return out, lse


def attention_backward(q, k, v, out, lse, dout, *, causal=False, softmax_scale=None,
                       window=(-1, -1), softcap=0.0, alibi_slopes=None, cu_seqlens_q=None,
                       cu_seqlens_k=None):
    """Returns (dq, dk, dv) for attention_forward's (out, lse) and the output gradient dout;
    the options must be the forward's."""
    dq = np.empty(q.shape, dtype=q.dtype)
    dk = np.empty(k.shape, dtype=k.dtype)
    dv = np.empty(v.shape, dtype=v.dtype)
    _C.attention_backward(q, k, v, out, dout, lse, dq, dk, dv,
                          **_options(causal, softmax_scale, window, softcap, alibi_slopes,
                                     cu_seqlens_q, cu_seqlens_k))
    return dq, dk, dv
