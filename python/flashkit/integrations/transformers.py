"""flashkit as a transformers (5.x) attention backend. register() adds "flashkit" to
transformers' AttentionInterface, and a mask builder of the same name to AttentionMaskInterface,
so that `attn_implementation="flashkit"` runs Llama-family models on flashkit attention in
training (forward + backward) and in generation with a KV cache:

    from flashkit.integrations.transformers import register
    register()
    model = AutoModelForCausalLM.from_config(config, attn_implementation="flashkit")

Masks: causal attention is flashkit's bottom-right aligned causal mask (a query block shorter than
the keys, as in cached generation, sees the whole cache); a padding mask (2D, as transformers'
generate and data collators make) runs as varlen attention over the unpadded tokens without a
host sync; sliding windows and softcap pass through as flashkit options. Other mask patterns
(packed sequences, custom 4D masks, or/and mask functions) raise a ValueError.
"""
import torch

from .. import torch_ops

NAME = "flashkit"


def _check_mask_function(mask_function, config):
    from transformers import masking_utils

    plain = (getattr(masking_utils, "causal_mask_function", None),
             getattr(masking_utils, "bidirectional_mask_function", None))
    if mask_function is None or mask_function in plain:
        return
    # Sliding-window layers get a windowed mask function; the window reaches attention_forward
    # as its sliding_window argument, so the function itself needs nothing from us.
    if getattr(config, "sliding_window", None):
        return
    raise ValueError(
        "attention_mask: the model asks for a mask pattern flashkit's transformers backend does "
        "not build (packed sequences or or/and mask functions); pass a 2D padding mask, or call "
        "flashkit.attention_varlen directly")


def padding_mask(batch_size, q_length, kv_length, q_offset=0, kv_offset=0, mask_function=None,
                 attention_mask=None, config=None, **kwargs):
    """The AttentionMaskInterface entry: None when every key is a real token (plain causal or
    bidirectional attention), else the 2D bool padding mask over the last kv_length keys."""
    _check_mask_function(mask_function, config)
    if attention_mask is None:
        return None
    attention_mask = attention_mask[:, -kv_length:]
    if attention_mask.shape[1] == kv_length and bool(attention_mask.all()):
        return None
    return attention_mask


def _window(sliding_window, causal):
    if not sliding_window:
        return (-1, -1)
    # transformers' causal window keeps keys j > i - w; its bidirectional one |i - j| <= w.
    return (sliding_window - 1, 0) if causal else (sliding_window, sliding_window)


def _unpad_order(mask):
    """Indices that put the real tokens of a [batch, len] mask first, in (batch, position) order,
    and its inverse permutation. Sorting instead of nonzero() keeps the count on the device."""
    order = torch.argsort((~mask).flatten().to(torch.int8), stable=True)
    inverse = torch.empty_like(order)
    inverse.scatter_(0, order, torch.arange(order.numel(), device=order.device))
    return order, inverse


def _cu_seqlens(mask):
    lengths = mask.sum(dim=1, dtype=torch.int32)
    return torch.nn.functional.pad(torch.cumsum(lengths, dim=0, dtype=torch.int32), (1, 0))


def _padded_attention(query, key, value, mask, **options):
    """attention over [b, h, s, d] inputs whose keys carry a 2D padding mask [b, keys]: varlen
    attention over the real tokens, packed by one sort; padded query rows come out 0."""
    b, h, sq, d = query.shape
    mask = mask.to(device=query.device, dtype=torch.bool)
    # A mask shorter than the keys (a static cache) marks the slots past it as unused.
    sk = mask.shape[1]
    key, value = key[:, :, :sk], value[:, :, :sk]
    q_mask = mask[:, -sq:]  # the queries are the newest sq tokens of each sequence
    order_q, inverse_q = _unpad_order(q_mask)
    order_k, _ = _unpad_order(mask)
    q = query.transpose(1, 2).reshape(b * sq, h, d).index_select(0, order_q)
    k = key.transpose(1, 2).reshape(b * sk, key.shape[1], d).index_select(0, order_k)
    v = value.transpose(1, 2).reshape(b * sk, value.shape[1], d).index_select(0, order_k)
    # The padded lengths bound every sequence: no host sync to find the longest.
    out = torch_ops.attention_varlen(q, k, v, _cu_seqlens(q_mask), _cu_seqlens(mask), sq, sk,
                                     **options)
    # Rows past the real tokens are 0 (varlen leaves them untouched, flashkit zero-fills them).
    return out.index_select(0, inverse_q).view(b, sq, h, d)


def attention_forward(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                      sliding_window=None, softcap=None, is_causal=None, **kwargs):
    """The AttentionInterface entry: query [b, heads, q_len, d], key/value [b, kv_heads, kv_len,
    d] (after the KV cache update) -> (attn_output [b, q_len, heads, d], None)."""
    if kwargs.get("output_attentions"):
        raise ValueError("output_attentions: flashkit never materialises attention weights; "
                         "use attn_implementation='eager' to get them")
    for name in ("s_aux", "position_bias"):
        if kwargs.get(name) is not None:
            raise ValueError(f"{name}: not supported by flashkit's transformers backend")
    causal = bool(is_causal if is_causal is not None else getattr(module, "is_causal", True))
    options = dict(causal=causal, softmax_scale=scaling, dropout_p=float(dropout or 0.0),
                   window=_window(sliding_window, causal), softcap=float(softcap or 0.0))
    if attention_mask is None:
        out = torch_ops.attention(query.transpose(1, 2), key.transpose(1, 2),
                                  value.transpose(1, 2), **options)
    elif attention_mask.dim() == 2:
        out = _padded_attention(query, key, value, attention_mask, **options)
    else:
        raise ValueError(f"attention_mask: expected None or a 2D padding mask (built by "
                         f"flashkit's mask function), got shape {tuple(attention_mask.shape)}")
    return out, None


def _let_flash_preload_pass(name):
    """transformers treats every implementation whose name contains "flash" as a FlashAttention
    flavour: at model init and in set_attn_implementation it preloads a flash-attn kernel for it
    (modeling_utils.lazy_import_flash_attention), which fails for a name that is no kernel. That
    preload is skipped for the names registered here (flashkit needs no flash-attn package)."""
    from transformers import modeling_utils

    preload = getattr(modeling_utils, "lazy_import_flash_attention", None)
    if preload is None or "flash" not in name:
        return
    skipped = getattr(preload, "flashkit_skips", None)
    if skipped is None:
        original = preload

        def lazy_import_flash_attention(implementation, *args, **kwargs):
            if implementation in lazy_import_flash_attention.flashkit_skips:
                return None
            return original(implementation, *args, **kwargs)

        lazy_import_flash_attention.flashkit_skips = skipped = set()
        modeling_utils.lazy_import_flash_attention = lazy_import_flash_attention
    skipped.add(name)


def register(name=NAME):
    """Register flashkit with transformers under `name` (default "flashkit"); returns the name,
    ready for attn_implementation=name. Idempotent."""
    from transformers import AttentionInterface, AttentionMaskInterface

    AttentionInterface.register(name, attention_forward)
    AttentionMaskInterface.register(name, padding_mask)
    _let_flash_preload_pass(name)
    return name
