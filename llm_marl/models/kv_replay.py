"""KV caches that a checkpointed layer can run through twice (`--gradient-checkpointing` with shared prompts).

The update runs a prompt shared by several replies once and reads its keys and values from the replies' pass
(`PolicySet.response_logprobs`). Under gradient checkpointing each layer runs again in the backward pass with the
arguments it had, the cache among them, and must get the keys and values it got the first time; transformers'
`DynamicCache` would append them again. So the prompt's pass writes each layer once (`PromptCache`: a second
run gets its own states back, as the empty cache gave them), and the replies' pass reads the prompt's states
without writing (`PrefixCache`: the prompt's states, then its own, every time).

Only caches of transformers' dynamic layers are replayed this way (`replayable`): full attention's `DynamicLayer`
and sliding-window (or chunked) attention's `DynamicSlidingWindowLayer`, whose `update` returns the states it kept
followed by the new ones, as `PrefixCache` does with what the prompt's pass kept (the last window of the prompt);
transformers builds the masks from the layers, which the prompt's pass has brought to the prompt's length. A model
with other layers (linear attention, quantized or static caches) runs every reply with its own prompt instead.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers.cache_utils import DynamicCache, DynamicLayer, DynamicSlidingWindowLayer


class PromptCache(DynamicCache):
    """The prompt pass's cache: the first run of a layer writes its keys and values, a second one only gets them back."""

    def __init__(self, config: Any) -> None:
        super().__init__(config=config)
        self.written: set[int] = set()

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if layer_idx in self.written:
            return key_states, value_states
        self.written.add(layer_idx)
        return super().update(key_states, value_states, layer_idx, *args, **kwargs)


class PrefixCache(DynamicCache):
    """The replies' pass's cache: the prompt's keys and values (a `PromptCache`'s layers, as they are) followed by
    the replies' own, written nowhere."""

    def __init__(self, prompt: PromptCache) -> None:
        super().__init__()
        self.layers = prompt.layers

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        layer = self.layers[layer_idx]
        return torch.cat([layer.keys, key_states], dim=-2), torch.cat([layer.values, value_states], dim=-2)


def replayable(config: Any) -> bool:
    """Whether a model of `config` keeps a cache of the dynamic layers that the two caches above replay (a sliding
    layer that records its past, for assisted decoding, returns other states than the ones it kept)."""
    return all(type(layer) is DynamicLayer
               or (type(layer) is DynamicSlidingWindowLayer and not getattr(layer, "record_past", False))
               for layer in DynamicCache(config=config).layers)
