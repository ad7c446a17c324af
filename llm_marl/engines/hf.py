"""`hf` engine: sampling with the trainer's own PEFT model (transformers forward passes, KV cache).

It shares the policy set's model, so there is no weight sync: the next call samples from the
latest adapters. The decode loop is written out here rather than calling `model.generate`, because
`generate` adds logits processors from the model's generation config (top-k 50 by default,
sometimes a repetition penalty) that the update would not know about -- a silent off-policy bug.
Here tokens are drawn from softmax(logits / T) and the returned log-probs are
log softmax(logits / T) of the sampled tokens: the very quantity `PolicySet.token_logprobs`
recomputes (greedy: log softmax of the raw logits). With `top_k`/`top_p` switched on, both are
those of the truncated, renormalised distribution actually sampled from (as vLLM's
`processed_logprobs`); the trainer keeps them off.

Requests are grouped by adapter, expanded to `n` rows each, sorted by prompt length and decoded
in left-padded batches of at most `max_batch_size` rows; a prompt shared by `n` rows is prefilled
once, the beginning the distinct prompts of a batch share (a role's instructions) is prefilled once
(`share_prefix`, on models without sliding-window layers), and finished rows leave the batch. The KV cache is allocated once for the whole
decode (`PreallocatedLayer`), so a new token is written in place instead of copying every layer's
cache.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import torch
from transformers.cache_utils import DynamicCache, DynamicLayer

from llm_marl.policies import temperature_logprobs

from .base import Completion, GenerationRequest, GenerationResult, Message, SamplingParams, no_room, split_reasoning


def chat_prompt_ids(tokenizer: Any, messages: list[Message], thinking: bool = False) -> list[int]:
    """Token ids of the chat template applied to `messages`, ending with the assistant header.

    Tokenized without extra special tokens: the template already writes them (a second BOS would
    shift the distribution away from what the model was tuned on). `thinking` reaches the template as
    `enable_thinking`, the switch of Qwen3's and other thinking models' templates: off, the template
    writes an empty `<think>` block so that the model replies at once (the papers' no-thinking mode);
    on, the model reasons in one first. Templates without the switch ignore it.
    """
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError("the model's tokenizer has no chat template; use an instruct/chat model or set tokenizer.chat_template")
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False, enable_thinking=thinking)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def stop_token_ids(tokenizer: Any, model: Any) -> set[int]:
    """EOS ids of the tokenizer and of the model's generation config (ChatML models end turns with <|im_end|>)."""
    ids: set[int] = set()
    for value in (tokenizer.eos_token_id, getattr(getattr(model, "generation_config", None), "eos_token_id", None)):
        if isinstance(value, int):
            ids.add(value)
        elif value is not None:
            ids.update(int(v) for v in value)
    return ids


# The config keys that bound a model's length, as vLLM reads them (the smallest present counts), and the
# RoPE types whose configs already give the scaled length (the others' `factor` multiplies it).
_LENGTH_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
                "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len")
_SCALED_ROPE = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling")


def context_window(config: Any, tokenizer: Any = None) -> int | None:
    """The model's context window in tokens, derived as vLLM derives its `max_model_len`, so both engines
    leave the same prompts without room: the smallest length in the config, capped by the tokenizer's
    `model_max_length`, times the RoPE scaling factor where the config gives the unscaled length
    (linear, dynamic). None when the config names no length."""
    config = config.get_text_config() if hasattr(config, "get_text_config") else config
    lengths = [v for v in (getattr(config, key, None) for key in _LENGTH_KEYS) if isinstance(v, int) and v > 0]
    if not lengths:
        return None
    window = getattr(config, "model_max_length", None) or min(lengths)  # Command-R's key, when set, is the length
    if isinstance(limit := getattr(tokenizer, "model_max_length", None), int) and limit > 0:
        window = min(window, limit)
    rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None)
    layers = [r for r in (rope.values() if rope and all(isinstance(r, dict) for r in rope.values()) else [rope])
              if isinstance(r, dict) and r]
    factor = 1.0
    if "gemma3" not in str(getattr(config, "model_type", "")):  # Gemma 3's config gives the scaled length
        for r in layers:
            if r.get("rope_type", r.get("type")) not in _SCALED_ROPE:
                factor = r.get("factor", factor) or 1.0
    return int(window * factor)


def filter_logits(scaled: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    """Top-k then nucleus (top-p) truncation of temperature-scaled logits [B, V] (-inf outside)."""
    if top_k > 0 and top_k < scaled.shape[-1]:
        kth = torch.topk(scaled, top_k, dim=-1).values[..., -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(scaled, descending=True, dim=-1)
        cumulative = torch.softmax(sorted_logits, dim=-1).cumsum(-1)
        drop_sorted = cumulative - torch.softmax(sorted_logits, dim=-1) >= top_p  # keep the token that crosses top_p
        scaled = scaled.masked_fill(drop_sorted.scatter(-1, order, drop_sorted), float("-inf"))
    return scaled


MIN_SHARED_PREFIX = 16
"""Shortest common prompt prefix worth a prefill of its own (tokens)."""


def full_attention_only(config: Any) -> bool:
    """Whether every layer of a model of `config` attends to its whole cache (a plain `DynamicLayer`). Only then
    does padding between a prompt's tokens leave what the model computes unchanged (padding is masked, positions
    count real tokens only; a sliding or chunked window counts the cache's slots, padding included, so padding
    pushes real tokens out of it), and can the cache be preallocated (`PreallocatedLayer`)."""
    return all(type(layer) is DynamicLayer for layer in DynamicCache(config=config).layers)


def common_prefix_length(prompts: Sequence[Sequence[int]]) -> int:
    """Number of leading tokens all `prompts` share."""
    first, n = prompts[0], min(len(p) for p in prompts)
    for i in range(n):
        token = first[i]
        if any(p[i] != token for p in prompts):
            return i
    return n


class PreallocatedLayer(DynamicLayer):
    """A `DynamicLayer` whose keys and values live in buffers with room for `capacity` positions.

    `DynamicLayer.update` concatenates, which copies the layer's whole cache at every decoded token
    (`benchmarks/decode_speed.py` measures what that cost). Here a token is written in place and
    `keys`/`values` are views of the filled part: the same numbers, so the same results.
    """

    def __init__(self, layer: DynamicLayer, capacity: int):
        super().__init__()
        batch, heads, length, dim = layer.keys.shape
        self._keys = layer.keys.new_empty((batch, heads, capacity, dim))
        self._values = layer.values.new_empty((batch, heads, capacity, dim))
        self._keys[:, :, :length], self._values[:, :, :length] = layer.keys, layer.values
        self.dtype, self.device, self.is_initialized = layer.keys.dtype, layer.keys.device, True
        self._view(length)

    def _view(self, length: int) -> None:
        self.length = length
        self.keys, self.values = self._keys[:, :, :length], self._values[:, :, :length]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        end = self.length + key_states.shape[-2]
        if end > self._keys.shape[-2]:
            raise RuntimeError(f"KV cache capacity {self._keys.shape[-2]} exceeded ({end} positions)")
        self._keys[:, :, self.length:end], self._values[:, :, self.length:end] = key_states, value_states
        self._view(end)
        return self.keys, self.values

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        self._keys, self._values = self._keys[indices], self._values[indices]
        self._view(self.length)


class HFEngine:
    """Engine over a `PolicySet`'s model. `generate` runs in eval mode without grad and restores the mode."""

    def __init__(self, policy_set: Any, max_batch_size: int = 32, seed: int = 0, share_prefix: bool = True):
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        self.policy_set = policy_set
        self.max_batch_size = max_batch_size
        # A shared prefix puts padding between it and each prompt's rest (see _prefill).
        self._full_attention = full_attention_only(policy_set.model.config)
        self.share_prefix = share_prefix and self._full_attention
        self._generator = torch.Generator(device=policy_set.device).manual_seed(seed)

    # ------------------------------------------------------------------ Engine
    def generate(self, requests: list[GenerationRequest], sampling: SamplingParams) -> list[GenerationResult]:
        tokenizer, model = self.policy_set.tokenizer, self.policy_set.model
        prompts = [chat_prompt_ids(tokenizer, r.messages, self.policy_set.thinks(r.role)) for r in requests]
        results = [GenerationResult(request=r, prompt_ids=p, completions=[None] * r.n) for r, p in zip(requests, prompts)]  # type: ignore[list-item]
        generator = self._generator
        if sampling.seed is not None:
            generator = torch.Generator(device=self.policy_set.device).manual_seed(sampling.seed)
        by_adapter: dict[str | None, list[tuple[int, int]]] = defaultdict(list)
        window = context_window(model.config, tokenizer)
        for i, r in enumerate(requests):
            if window is not None and len(prompts[i]) >= window:
                results[i].completions = [no_room() for _ in range(r.n)]
                continue
            by_adapter[r.adapter].extend((i, k) for k in range(r.n))
        stop_ids = stop_token_ids(tokenizer, model)
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                for adapter in sorted(by_adapter, key=lambda a: (a is not None, a or "")):
                    rows = sorted(by_adapter[adapter], key=lambda ik: (-len(prompts[ik[0]]), ik))
                    for start in range(0, len(rows), self.max_batch_size):
                        chunk = rows[start:start + self.max_batch_size]
                        with self.policy_set.use(adapter) as peft_model:
                            outs = self._decode(peft_model, [prompts[i] for i, _ in chunk], [i for i, _ in chunk],
                                                sampling, generator, stop_ids, window)
                        for (i, k), (ids, logprobs, finish) in zip(chunk, outs):
                            reasoning, text = split_reasoning(tokenizer.decode(ids, skip_special_tokens=True))
                            results[i].completions[k] = Completion(text=text, token_ids=ids, logprobs=logprobs,
                                                                   finish_reason=finish, reasoning=reasoning)
        finally:
            model.train(was_training)
        return results

    def sync_adapters(self) -> None:
        """No-op: the engine samples with the trainer's model itself."""

    def close(self) -> None:
        pass

    # ------------------------------------------------------------------ decoding
    def _prefill(self, model: Any, prompts: Sequence[list[int]]) -> tuple[Any, torch.Tensor, torch.Tensor]:
        """Run distinct prompts through the model: (output with the KV cache and last logits, attention mask
        [U, width], positions [U, width]).

        Prompts of one call usually begin alike (a role's system prompt and rules): with
        `share_prefix`, their longest common prefix runs once, as one row, and each prompt's rest is
        prefilled on that cache; padding then sits between the prefix and the rest (masked, with
        positions counted over real tokens only, as with left padding), which only full attention
        ignores: a model with sliding-window layers prefills whole prompts (`full_attention_only`).
        """
        device = self.policy_set.device
        pad = self.policy_set.tokenizer.pad_token_id or 0
        shared = 0
        if self.share_prefix and len(prompts) > 1:
            shared = min(common_prefix_length(prompts), min(len(p) for p in prompts) - 1)  # each row keeps a token to predict from
        cache = None
        if shared >= MIN_SHARED_PREFIX:
            head = model(input_ids=torch.tensor([prompts[0][:shared]], dtype=torch.long, device=device), use_cache=True,
                         logits_to_keep=1)
            cache = head.past_key_values
            cache.batch_select_indices(torch.zeros(len(prompts), dtype=torch.long, device=device))
        else:
            shared = 0
        rests = [p[shared:] for p in prompts]
        width = max(len(r) for r in rests)
        input_ids = torch.full((len(prompts), width), pad, dtype=torch.long, device=device)
        attention = torch.zeros((len(prompts), shared + width), dtype=torch.long, device=device)
        attention[:, :shared] = 1
        for b, r in enumerate(rests):  # left padding of the rest: every row's next token is at the end
            input_ids[b, width - len(r):] = torch.tensor(r, dtype=torch.long, device=device)
            attention[b, shared + width - len(r):] = 1
        positions = (attention.cumsum(-1) - 1).clamp(min=0)
        out = model(input_ids=input_ids, attention_mask=attention, position_ids=positions[:, shared:], past_key_values=cache,
                    use_cache=True, logits_to_keep=1)
        return out, attention, positions

    def _decode(self, model: Any, prompts: Sequence[list[int]], prompt_keys: Sequence[int], sampling: SamplingParams,
                generator: torch.Generator, stop_ids: set[int], window: int | None = None) -> list[tuple[list[int], list[float], str]]:
        """Sample one completion per prompt row; rows with the same key share one prefill. A row ends ("length")
        when it fills the model's context `window`, as vLLM ends it."""
        device = self.policy_set.device
        unique = list(dict.fromkeys(prompt_keys))
        unique_prompts = [prompts[prompt_keys.index(key)] for key in unique]
        expand = torch.tensor([unique.index(key) for key in prompt_keys], device=device)
        out, attention, positions = self._prefill(model, unique_prompts)
        cache = out.past_key_values
        if len(unique) < len(prompts):
            cache.batch_select_indices(expand)
        if self._full_attention:  # sliding-window or other layers stay as they are
            cache.layers = [PreallocatedLayer(layer, attention.shape[1] + sampling.max_new_tokens) for layer in cache.layers]
        logits = out.logits[expand, -1].float()
        attention, next_position = attention[expand], positions[expand, -1] + 1

        n_rows = len(prompts)
        tokens: list[list[int]] = [[] for _ in range(n_rows)]
        logprobs: list[list[float]] = [[] for _ in range(n_rows)]
        finish = ["length"] * n_rows
        alive = torch.arange(n_rows, device=device)  # original row of each batch row
        stop = torch.tensor(sorted(stop_ids), dtype=torch.long, device=device)
        room = None  # how many tokens each row may add before its context window is full, when one would fill it
        if window is not None and max(len(p) for p in prompts) + sampling.max_new_tokens > window:
            room = torch.tensor([window - len(p) for p in prompts], device=device)
        for step in range(sampling.max_new_tokens):
            if sampling.greedy:
                sampled_logprobs = temperature_logprobs(logits, 0.0)
                chosen = logits.argmax(-1)
            else:
                scaled = filter_logits(logits / sampling.temperature, sampling.top_k, sampling.top_p)
                sampled_logprobs = torch.log_softmax(scaled, dim=-1)
                chosen = torch.multinomial(sampled_logprobs.exp(), 1, generator=generator).squeeze(-1)
            chosen_lp = sampled_logprobs.gather(-1, chosen.unsqueeze(-1)).squeeze(-1)
            ended = torch.isin(chosen, stop)
            for row, tok, lp, end in zip(alive.tolist(), chosen.tolist(), chosen_lp.tolist(), ended.tolist()):
                tokens[row].append(tok)
                logprobs[row].append(lp)
                if end:
                    finish[row] = "stop"
            if room is not None:
                ended = ended | (room[alive] <= step + 1)  # the row's context window is full
            if step == sampling.max_new_tokens - 1 or bool(ended.all()):
                break
            if bool(ended.any()):  # finished rows leave the batch (and the KV cache)
                keep = (~ended).nonzero().squeeze(-1)
                cache.batch_select_indices(keep)
                alive, chosen, attention, next_position = alive[keep], chosen[keep], attention[keep], next_position[keep]
            attention = torch.cat([attention, torch.ones_like(attention[:, :1])], dim=1)
            out = model(input_ids=chosen.unsqueeze(-1), attention_mask=attention, position_ids=next_position.unsqueeze(-1),
                        past_key_values=cache, use_cache=True)
            cache, logits, next_position = out.past_key_values, out.logits[:, -1].float(), next_position + 1
        return list(zip(tokens, logprobs, finish))
