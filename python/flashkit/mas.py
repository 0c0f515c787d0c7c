"""Monotonic alignment search (Glow-TTS / VITS), exact: the same paths as the Cython
``monotonic_align.maximum_path`` of both repositories, on NumPy arrays (CPU) or torch tensors
(through DLPack, no copy).

Layouts. Both originals take ``(value, mask)`` of shape ``[b, d1, d2]`` and read the lengths the
same way, ``len1 = mask.sum(1)[:, 0]`` and ``len2 = mask.sum(2)[:, 0]``, but mean different axes:

* glow-tts: ``value[b, t_x, t_y]`` = ``[batch, text, mel]``; it multiplies ``value * mask`` first,
  which leaves every cell the search reads unchanged (the mask is 1 there).
* vits: ``neg_cent[b, t_t, t_s]`` = ``[batch, mel, text]``; its Cython code is glow-tts's with the
  two axes swapped.

``maximum_path(value, mask)`` picks the layout from the padded shape (``d1 <= d2``: glow-tts, else
vits), since text is never longer than mel; pass ``layout=`` to force one. The result has value's
shape, dtype and device, 1.0 on the path, like the originals.
"""
import numpy as np

from . import _C

_SUPPORTED_VALUE = {"float32", "float16", "bfloat16"}
_SUPPORTED_PATH = {"float32", "float16", "bfloat16", "int32", "uint8", "bool"}


def _is_torch(x):
    return type(x).__module__.split(".")[0] == "torch"


def _dtype_name(x):
    return str(x.dtype).replace("torch.", "")


def _as_value(value):
    """value as an array the extension reads: float32/float16/bfloat16, else cast to float32
    (what the originals do with ``.astype(np.float32)``)."""
    if _is_torch(value):
        value = value.detach()
        return value if _dtype_name(value) in _SUPPORTED_VALUE else value.float()
    value = np.asarray(value)
    return value if _dtype_name(value) in _SUPPORTED_VALUE else value.astype(np.float32)


def _as_lengths(lengths, like):
    if _is_torch(like):
        import torch

        if not _is_torch(lengths):
            lengths = torch.as_tensor(np.asarray(lengths))
        return lengths.to(device=like.device, dtype=torch.int32).contiguous()
    return np.ascontiguousarray(np.asarray(lengths), dtype=np.int32)


def _empty(shape, dtype, like):
    if _is_torch(like):
        import torch

        return torch.empty(shape, dtype=dtype, device=like.device)
    return np.empty(shape, dtype=dtype)


def _swap_last(x):
    return x.transpose(1, 2) if _is_torch(x) else x.transpose(0, 2, 1)


def _torch_or_numpy(like, name):
    if _is_torch(like):
        import torch

        return getattr(torch, name)
    return getattr(np, name)


def _new_path(shape, dtype, like):
    """A path buffer of `dtype` (value's when None), contiguous in `shape`. Dtypes the extension
    cannot write (e.g. float64) are written as uint8 and cast afterwards by _finish_path."""
    dtype = like.dtype if dtype is None else dtype
    buf = _empty(shape, dtype, like)
    if _dtype_name(buf) not in _SUPPORTED_PATH:
        buf = _empty(shape, _torch_or_numpy(like, "uint8"), like)
    return buf, dtype


def _finish_path(buf, dtype):
    if _dtype_name(buf) == _dtype_name(_empty((0,), dtype, buf)):
        return buf
    return buf.to(dtype) if _is_torch(buf) else buf.astype(dtype)


def monotonic_alignment_search(value, text_lengths, mel_lengths, neg=-1e9, return_path=True,
                               return_durations=False, path_dtype=None):
    """Most likely monotonic alignment of each item, Cython-exact.

    value: ``[B, T, S]`` log-likelihoods (text x mel), any strides (a transposed view serves
    ``[B, S, T]`` data). text_lengths / mel_lengths: ``[B]`` integers, ``0 <= tx <= ty``.
    neg: the forbidden cells' value (the Cython ``max_neg_val``; -1e9, -1e32 or -inf).
    Returns the path ``[B, T, S]`` (dtype ``path_dtype``, default value's), the durations
    int32 ``[B, T]`` (frames per text token), or both as a tuple, per the two flags.
    Raises ValueError naming the argument (e.g. the item whose text is longer than its mel).
    """
    if not (return_path or return_durations):
        raise ValueError("return_path: expected return_path and/or return_durations, got neither")
    if not _is_torch(value):
        value = np.asarray(value)
    path_dtype = value.dtype if path_dtype is None else path_dtype
    value = _as_value(value)
    path = durations = None
    if return_path:
        path, path_dtype = _new_path(tuple(value.shape), path_dtype, value)
    if return_durations:
        shape = (value.shape[0], value.shape[1]) if value.ndim == 3 else (0, 0)
        durations = _empty(shape, _torch_or_numpy(value, "int32"), value)
    _C.monotonic_alignment_search(value, _as_lengths(text_lengths, value),
                                  _as_lengths(mel_lengths, value), path, durations, float(neg))
    if return_path:
        path = _finish_path(path, path_dtype)
    if return_path and return_durations:
        return path, durations
    return path if return_path else durations


def maximum_path(value, mask, layout="auto", neg=-1e9):
    """Drop-in for glow-tts's and vits's ``monotonic_align.maximum_path(value, mask)``.

    value, mask: ``[b, d1, d2]``; layout: "glow-tts" (``[b, text, mel]``), "vits"
    (``[b, mel, text]``) or "auto" (glow-tts when ``d1 <= d2``). Lengths come from the mask as
    in the originals. Returns a contiguous path with value's shape, dtype and device.
    """
    if layout not in ("auto", "glow-tts", "vits"):
        raise ValueError(f"layout: expected 'auto', 'glow-tts' or 'vits', got {layout!r}")
    if not _is_torch(value):
        value, mask = np.asarray(value), np.asarray(mask)
    if value.ndim != 3:
        raise ValueError(f"value: expected 3 dims [b, d1, d2], got shape {tuple(value.shape)}")
    if tuple(mask.shape) != tuple(value.shape):
        raise ValueError(f"mask: expected shape {tuple(value.shape)} like value, "
                         f"got {tuple(mask.shape)}")
    if layout == "auto":
        layout = "glow-tts" if value.shape[1] <= value.shape[2] else "vits"
    len1 = mask.sum(1)[:, 0]  # length along d1, as both originals compute it
    len2 = mask.sum(2)[:, 0]
    path, dtype = _new_path(tuple(value.shape), None, value)
    v = _as_value(value)
    if layout == "glow-tts":
        _C.monotonic_alignment_search(v, _as_lengths(len1, v), _as_lengths(len2, v), path, None,
                                      float(neg))
    else:  # vits: text is d2, mel is d1; the kernel sees [b, text, mel] views of both arrays
        _C.monotonic_alignment_search(_swap_last(v), _as_lengths(len2, v), _as_lengths(len1, v),
                                      _swap_last(path), None, float(neg))
    return _finish_path(path, dtype)
