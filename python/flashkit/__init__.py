"""flashkit: IO-aware kernels for sequence models (FlashAttention-2, LeanAttention, MAS)."""
from ._C import build_info  # noqa: F401
from . import block_mask  # noqa: F401
from .attention import attention_backward, attention_forward  # noqa: F401
from .mas import (  # noqa: F401
    maximum_path,
    monotonic_alignment_search,
    monotonic_alignment_search_fused,
)
# The array-agnostic API (NumPy here; torch tensors through flashkit.torch_ops, imported on first
# use). `attention` names the function, as in flash-attn; the NumPy module stays importable as
# flashkit.attention_forward / attention_backward.
from .ops import (  # noqa: F401, E402
    DecodePlan,
    attention,
    attention_fp8,
    attention_varlen,
    decode,
    dequantize_e4m3,
    make_decode_plan,
    merge_states,
    quantize_e4m3,
)

__version__ = "0.1.0"
