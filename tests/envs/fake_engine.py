"""Stand-in for `llm_marl.engines.scripted.ScriptedEngine` while that module is not available.

Same constructor (`reply_fn(request, sample_index) -> str`, `tokenizer=None`): token ids are the
text's UTF-8 bytes, every token has log-prob -1.0, and each `generate` call is recorded.
"""

from __future__ import annotations

from llm_marl.engines.base import Completion, GenerationRequest, GenerationResult, SamplingParams


class ScriptedEngine:
    def __init__(self, reply_fn, tokenizer=None):
        self.reply_fn = reply_fn
        self.tokenizer = tokenizer
        self.calls: list[list[GenerationRequest]] = []

    def _encode(self, text: str) -> list[int]:
        return list(text.encode())

    def generate(self, requests: list[GenerationRequest], sampling: SamplingParams) -> list[GenerationResult]:
        self.calls.append(list(requests))
        out = []
        for req in requests:
            prompt = "\n".join(f"{m['role']}: {m['content']}" for m in req.messages)
            comps = []
            for k in range(req.n):
                text = self.reply_fn(req, k)
                ids = self._encode(text) or [0]
                comps.append(Completion(text=text, token_ids=ids, logprobs=[-1.0] * len(ids)))
            out.append(GenerationResult(request=req, prompt_ids=self._encode(prompt), completions=comps))
        return out

    def sync_adapters(self) -> None:
        pass

    def close(self) -> None:
        pass
