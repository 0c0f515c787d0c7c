"""flashkit: IO-aware kernels for sequence models (FlashAttention-2, LeanAttention, MAS)."""
from ._C import build_info  # noqa: F401
from .attention import attention_backward, attention_forward  # noqa: F401
from .mas import (  # noqa: F401
    maximum_path,
    monotonic_alignment_search,
    monotonic_alignment_search_fused,
)

__version__ = "0.1.0"
