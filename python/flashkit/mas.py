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

Errors. An item whose text is longer than its mel has no monotonic path: ValueError naming the
item. On the CPU it is raised before anything is written; on CUDA the kernel finds it (the lengths
live on the GPU) and ``check=True`` (default) reads its status word, one host sync; with
``check=False`` the call never syncs and such an item gets an all-zero path.
"""
import numpy as np

from . import _C

_SUPPORTED_VALUE = {"float32", "float16", "bfloat16"}
_torch_codes = None  # torch dtype -> flashkit DType code (_C.dtype_codes), built on first use
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
    """A path buffer of `dtype` (value's when None), contiguous in `shape`, and the dtype to
    cast it to afterwards (_finish_path): None, or `dtype` where the extension cannot write it
    (e.g. float64), which is then written as uint8."""
    buf = _empty(shape, like.dtype if dtype is None else dtype, like)
    if _dtype_name(buf) in _SUPPORTED_PATH:
        return buf, None
    return _empty(shape, _torch_or_numpy(like, "uint8"), like), buf.dtype


def _finish_path(buf, cast_to):
    if cast_to is None:
        return buf
    return buf.to(cast_to) if _is_torch(buf) else buf.astype(cast_to)


def _stream(like):
    if _is_torch(like) and like.is_cuda:
        import torch

        return torch.cuda.current_stream(like.device).cuda_stream
    return 0


def _run(fn, inputs, tx, ty, path, durations, neg, check):
    """Calls the extension. On CUDA the kernel reports bad lengths in a status word; with
    check=True it is read (one host sync) and turned into the same ValueError as on the CPU."""
    like = inputs[0]
    on_gpu = _is_torch(like) and like.is_cuda
    status = _empty((1,), _torch_or_numpy(like, "int32"), like) if on_gpu and check else None
    fn(*inputs, tx, ty, path, durations, float(neg), status, _stream(like))
    if status is not None:
        _raise_bad_item(int(status.item()), tx, ty)


def _raise_bad_item(bad, tx, ty):
    """The CPU's ValueError for item `bad` (>= 0) of a CUDA status word; -1: nothing to raise."""
    if bad >= 0:
        t, s = _length_of(tx, bad), _length_of(ty, bad)
        raise ValueError(f"text_lengths[{bad}]: expected 0 <= text_lengths[{bad}] <= "
                         f"mel_lengths[{bad}] ({s}) within the tensor's dims, got {t}: "
                         "no monotonic path")


def _length_of(lengths, i):
    """Item i's length from an int32 [B] array or a [B, n] mask line (its sum, truncated)."""
    return int(lengths[i].sum().item()) if lengths.ndim == 2 else int(lengths[i].item())


def _outputs(shape_bt, shape_bts, like, return_path, return_durations, path_dtype):
    if not (return_path or return_durations):
        raise ValueError("return_path: expected return_path and/or return_durations, got neither")
    path = durations = None
    if return_path:
        path, path_dtype = _new_path(shape_bts, path_dtype, like)
    if return_durations:
        durations = _empty(shape_bt, _torch_or_numpy(like, "int32"), like)
    return path, path_dtype, durations


def _result(path, path_dtype, durations):
    if path is not None:
        path = _finish_path(path, path_dtype)
    if path is not None and durations is not None:
        return path, durations
    return path if path is not None else durations


def monotonic_alignment_search(value, text_lengths, mel_lengths, neg=-1e9, return_path=True,
                               return_durations=False, path_dtype=None, check=True):
    """Most likely monotonic alignment of each item, Cython-exact.

    value: ``[B, T, S]`` log-likelihoods (text x mel), any strides (a transposed view serves
    ``[B, S, T]`` data); NumPy (CPU) or torch (CPU or CUDA, no copy). text_lengths /
    mel_lengths: ``[B]`` integers, ``0 <= tx <= ty``. neg: the forbidden cells' value (the Cython
    ``max_neg_val``; -1e9, -1e32 or -inf). Returns the path ``[B, T, S]`` (dtype ``path_dtype``,
    default value's), the durations int32 ``[B, T]`` (frames per text token), or both as a
    tuple. Bad lengths raise ValueError naming the item; on CUDA that check costs one host sync,
    which ``check=False`` skips (such items then get an all-zero path).
    """
    if not _is_torch(value):
        value = np.asarray(value)
    path_dtype = value.dtype if path_dtype is None else path_dtype
    value = _as_value(value)
    shape = tuple(value.shape)
    path, path_dtype, durations = _outputs(shape[:2], shape, value, return_path,
                                           return_durations, path_dtype)
    tx, ty = _as_lengths(text_lengths, value), _as_lengths(mel_lengths, value)
    _run(_C.monotonic_alignment_search, (value,), tx, ty, path, durations, neg, check)
    return _result(path, path_dtype, durations)


def monotonic_alignment_search_fused(z, m, logs, text_lengths, mel_lengths, neg=-1e9,
                                     return_path=True, return_durations=False, path_dtype=None,
                                     check=True):
    """MAS on the Glow-TTS / VITS likelihood computed on the fly, never materialised:
    ``value[b, x, y] = sum_c -1/2 log 2pi - logs[b,c,x] - 1/2 e^{-2 logs[b,c,x]}
    (z[b,c,y] - m[b,c,x])^2``. z: ``[B, C, S]`` (the flow's latent), m / logs: ``[B, C, T]``
    (the text prior); one float dtype. Otherwise as monotonic_alignment_search (path dtype
    defaults to z's).

    Use it for memory: no ``[B, T, S]`` likelihood exists at any point (8 GiB saved at B = 32,
    T = 2048, S = 8192 in fp32). It computes the C-channel sum per cell on the fly, so it is
    slower than building ``neg_cent`` with torch and calling monotonic_alignment_search (at
    C = 192 on an H200: 1.8 against 0.37 ms at T = 128, 67 against 16 ms at T = 2048;
    bench/NOTES-mas.md)."""
    if not _is_torch(z):
        z, m, logs = np.asarray(z), np.asarray(m), np.asarray(logs)
    path_dtype = z.dtype if path_dtype is None else path_dtype
    z, m, logs = _as_value(z), _as_value(m), _as_value(logs)
    shape = (z.shape[0], m.shape[2] if m.ndim == 3 else 0, z.shape[2])
    path, path_dtype, durations = _outputs(shape[:2], shape, z, return_path, return_durations,
                                           path_dtype)
    tx, ty = _as_lengths(text_lengths, z), _as_lengths(mel_lengths, z)
    _run(_C.monotonic_alignment_search_fused, (z, m, logs), tx, ty, path, durations, neg, check)
    return _result(path, path_dtype, durations)


def _torch_cuda_fast(value, mask):
    """The DType codes of value and mask when maximum_path can take its one-call CUDA path: torch
    CUDA tensors of the same non-empty [b, d1, d2] shape, value float32/float16/bfloat16."""
    global _torch_codes
    if not (_is_torch(value) and _is_torch(mask) and value.is_cuda and mask.is_cuda):
        return None
    if _torch_codes is None:
        import torch

        _torch_codes = {getattr(torch, n): c for n, c in _C.dtype_codes.items()}
    vcode, mcode = _torch_codes.get(value.dtype), _torch_codes.get(mask.dtype)
    shape = value.shape
    if (vcode is None or mcode is None or _dtype_name(value) not in _SUPPORTED_VALUE
            or len(shape) != 3 or mask.shape != shape or 0 in shape):
        return None
    return vcode, mcode


def _raw_stream(device_index):
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw(device_index)
    return torch.cuda.current_stream(device_index).cuda_stream


def maximum_path(value, mask, layout="auto", neg=-1e9, check=True):
    """Drop-in for glow-tts's and vits's ``monotonic_align.maximum_path(value, mask)``.

    value, mask: ``[b, d1, d2]``; layout: "glow-tts" (``[b, text, mel]``), "vits"
    (``[b, mel, text]``) or "auto" (glow-tts when ``d1 <= d2``). Lengths come from the mask as
    in the originals (``mask.sum(1)[:, 0]`` and ``mask.sum(2)[:, 0]``, read here from the first
    column and row only). Returns a contiguous path with value's shape, dtype and device; torch
    CUDA tensors stay on the GPU (``check=False``: no host sync at all, see
    monotonic_alignment_search). Torch CUDA tensors take a one-call path: the extension gets
    pointers and strides, the kernel reads the mask's first column and row itself.
    """
    if layout not in ("auto", "glow-tts", "vits"):
        raise ValueError(f"layout: expected 'auto', 'glow-tts' or 'vits', got {layout!r}")
    fast = _torch_cuda_fast(value, mask)
    if fast is not None:
        import torch

        shape = value.shape
        vits = layout == "vits" or (layout == "auto" and shape[1] > shape[2])
        path = torch.empty_like(value, memory_format=torch.contiguous_format)
        status = torch.empty((1,), dtype=torch.int32, device=value.device) if check else None
        device = value.get_device()
        _C.maximum_path_raw(value.data_ptr(), fast[0], shape, value.stride(), device,
                            mask.data_ptr(), fast[1], mask.stride(), mask.get_device(),
                            path.data_ptr(), vits, float(neg),
                            0 if status is None else status.data_ptr(), _raw_stream(device))
        if status is not None:
            _raise_bad_item(int(status.item()), *((mask[:, 0, :], mask[:, :, 0]) if vits
                                                  else (mask[:, :, 0], mask[:, 0, :])))
        return path
    if not _is_torch(value):
        value, mask = np.asarray(value), np.asarray(mask)
    if value.ndim != 3:
        raise ValueError(f"value: expected 3 dims [b, d1, d2], got shape {tuple(value.shape)}")
    if tuple(mask.shape) != tuple(value.shape):
        raise ValueError(f"mask: expected shape {tuple(value.shape)} like value, "
                         f"got {tuple(mask.shape)}")
    if layout == "auto":
        layout = "glow-tts" if value.shape[1] <= value.shape[2] else "vits"
    # Both originals take the lengths as mask.sum(1)[:, 0] and mask.sum(2)[:, 0], i.e. the sums
    # of the first column and the first row: the kernel sums those lines itself.
    col0, row0 = mask[:, :, 0], mask[:, 0, :]
    path, dtype = _new_path(tuple(value.shape), None, value)
    v = _as_value(value)
    if layout == "glow-tts":
        args = (v, col0, row0, path)
    else:  # vits: text is d2, mel is d1; the kernel sees [b, text, mel] views of both arrays
        args = (_swap_last(v), row0, col0, _swap_last(path))
    _run(_C.monotonic_alignment_search, args[:1], args[1], args[2], args[3], None, neg, check)
    return _finish_path(path, dtype)
