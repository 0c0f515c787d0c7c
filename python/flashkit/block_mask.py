"""Block-sparse attention masks for flashkit.attention(block_mask=...): uint8 NumPy arrays of
shape [ceil(seqlen_q / block_q), ceil(seqlen_k / block_k)] (add leading batch/head dims of 1 by
indexing, e.g. mask[None, None]); 1 computes a block, 0 skips it. torch users: torch.from_numpy."""
import numpy as np

from . import _C


def _grid(seqlen_q, seqlen_k, block):
    bq, bk = block
    return np.empty(((seqlen_q + bq - 1) // bq, (seqlen_k + bk - 1) // bk), dtype=np.uint8)


def local_global(seqlen_q, seqlen_k, local, global_=0, causal=False, block=(128, 128)):
    """Key blocks within `local` blocks of each query block's (bottom-right aligned) diagonal, the
    first `global_` key blocks for every query, and every key for the first `global_` query blocks;
    causal also drops blocks above the diagonal."""
    mask = _grid(seqlen_q, seqlen_k, block)
    _C.block_mask_local_global(mask, local, global_, causal)
    return mask


def butterfly(seqlen, block=(128, 128)):
    """Query block i keeps key block j when j == i or i XOR j is a power of two (square grids)."""
    mask = _grid(seqlen, seqlen, block)
    _C.block_mask_butterfly(mask)
    return mask
