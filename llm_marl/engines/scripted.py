"""`scripted` engine: replies come from a Python function, for unit tests of rollouts and algorithms.

Credit, group keys and advantages are checked by hand against known replies,
so the engine must be exact and cheap: `reply_fn(request, sample_index) -> str` decides every
reply (or returns a whole `Completion`, e.g. one cut off with `finish_reason="length"`). Token ids come from `tokenizer` when one is given (its chat template, if any, for the
prompt), else from character codes; every log-prob is 0.0 (the replies are certain).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .base import Completion, GenerationRequest, GenerationResult, Message, SamplingParams, split_reasoning

ReplyFn = Callable[[GenerationRequest, int], str]


class ScriptedEngine:
    """Engine whose replies are `reply_fn(request, k)` for k in range(request.n)."""

    def __init__(self, reply_fn: ReplyFn, tokenizer: Any = None):
        self.reply_fn = reply_fn
        self.tokenizer = tokenizer
        self.calls: list[list[GenerationRequest]] = []
        """Every `generate` call's requests, in order (tests count waves and batch sizes)."""

    def generate(self, requests: list[GenerationRequest], sampling: SamplingParams) -> list[GenerationResult]:
        self.calls.append(list(requests))
        results = []
        for request in requests:
            completions = []
            for k in range(request.n):
                text = self.reply_fn(request, k)
                if isinstance(text, Completion):  # a reply with its own ids or finish reason (e.g. cut off: "length")
                    completions.append(text)
                    continue
                if not isinstance(text, str):
                    raise TypeError(f"reply_fn must return str or Completion, got {type(text).__name__}")
                ids = self._encode(text) or [self._eos_id()]  # a real engine returns at least its EOS
                reasoning, reply = split_reasoning(text)  # as the model engines give a thinking model's reply
                completions.append(Completion(text=reply, token_ids=ids, logprobs=[0.0] * len(ids), reasoning=reasoning))
            results.append(GenerationResult(request=request, prompt_ids=self._prompt_ids(request.messages), completions=completions))
        return results

    def sync_adapters(self) -> None:
        pass

    def close(self) -> None:
        pass

    def _encode(self, text: str) -> list[int]:
        if self.tokenizer is None:
            return [ord(c) for c in text]
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _eos_id(self) -> int:
        eos = getattr(self.tokenizer, "eos_token_id", None)
        return eos if isinstance(eos, int) else 0

    def _prompt_ids(self, messages: list[Message]) -> list[int]:
        if self.tokenizer is not None and getattr(self.tokenizer, "chat_template", None):
            from .hf import chat_prompt_ids

            return chat_prompt_ids(self.tokenizer, messages)
        return self._encode("".join(f"<{m['role']}>\n{m['content']}\n" for m in messages))
