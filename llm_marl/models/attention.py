"""Attention for grouped-query models on CPU without copying the KV cache per head.

transformers' `sdpa` attention hands torch's `scaled_dot_product_attention` its native GQA
(`enable_gqa`) only when there is no attention mask; with the mask that left padding needs, it
first copies every key/value head once per query head of its group (`repeat_kv`). On CPU, while
decoding one token at a time, that copy of the whole cache at every layer cost more than the
attention itself (SmolLM2-135M has 9 query heads over 3 KV heads; `benchmarks/decode_speed.py`).
Torch's CPU kernel computes the masked GQA case as it computes the copied one (bit for bit on the
machines measured), so sampled tokens and their log-probs are unchanged.

`ATTENTION` takes that path on CPU without autograd (sampling, evaluation, reference log-probs);
everything else (CUDA, where masked GQA would fall back to the slow math kernel, and the update's
forward and backward, where it saved nothing measurable and would sum gradients in another order)
goes to the stock `sdpa` function unchanged.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

ATTENTION = "llm_marl_sdpa"
"""Name of the attention implementation `load_model_and_tokenizer` selects for `sdpa` models."""


def sdpa_gqa_forward(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                     attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                     is_causal: bool | None = None, **kwargs: Any) -> tuple[torch.Tensor, None]:
    """`sdpa_attention_forward` with native GQA on CPU without grad; see the module docstring."""
    grouped = getattr(module, "num_key_value_groups", 1) > 1
    if (attention_mask is None or not grouped or query.device.type != "cpu" or torch.is_grad_enabled()
            or kwargs.get("position_bias") is not None or kwargs.get("cache") is not None):
        # Without a mask the stock function already uses native GQA.
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    out = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask, dropout_p=dropout,
                                                           scale=scaling, enable_gqa=True)
    return out.transpose(1, 2).contiguous(), None


AttentionInterface.register(ATTENTION, sdpa_gqa_forward)
AttentionMaskInterface.register(ATTENTION, sdpa_mask)  # the masks `sdpa` gets


def use_gqa_attention(model: Any) -> None:
    """Select `ATTENTION` on a model that runs `sdpa` (others keep theirs)."""
    if getattr(model.config, "_attn_implementation", None) == "sdpa":
        model.set_attn_implementation(ATTENTION)
