"""The engine interface: many chat requests in, sampled completions with token log-probs out.

Every backend (`hf`, `vllm`, `api`, `scripted`) implements `Engine.generate`. One call carries every
pending request of a rollout wave (all environments x branches x roles), each with its own LoRA
adapter and number of samples `n`, so a backend can batch them however suits it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

Message = dict[str, str]


@dataclass(frozen=True)
class SamplingParams:
    """Sampling settings shared by all requests of one `generate` call.

    The update recomputes log-probs of the sampled tokens under the same `temperature`, and
    `top_p`/`top_k` stay at their no-op values by default: the policy-gradient update assumes the
    tokens came from softmax(logits / temperature), nothing else.
    """

    temperature: float = 1.0
    """Softmax temperature; 0 means greedy decoding."""
    top_p: float = 1.0
    top_k: int = -1
    """-1 disables top-k."""
    max_new_tokens: int = 256
    """Longest completion, in tokens."""
    seed: int | None = None
    """Seed for this call's sampling; None draws from the engine's generator."""

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def __post_init__(self) -> None:
        if not 0 <= self.temperature < math.inf:
            raise ValueError(f"--temperature must be >= 0 and finite (0: greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            raise ValueError(f"--max-new-tokens must be >= 1, got {self.max_new_tokens}")


@dataclass
class GenerationRequest:
    """One prompt to sample `n` completions for, with the adapter of the role that acts."""

    messages: list[Message]
    """The chat the role sees (OpenAI format); the engine applies the tokenizer's chat template."""
    adapter: str | None = None
    """Name of the LoRA adapter to sample from; None samples from the base model."""
    n: int = 1
    tag: object = None
    """Opaque caller data (e.g. which env/branch/role asked); returned untouched."""
    role: str | None = None
    """The role that acts, when known: a thinking switch per role reads it (`PolicySet.thinks`)."""


@dataclass
class Completion:
    text: str
    """The reply the environment reads: what follows a thinking model's reasoning (see `split_reasoning`)."""
    token_ids: list[int]
    """Every generated token, the reasoning's included: what the update trains on."""
    logprobs: list[float]
    """log pi(token | prefix) of each generated token under the sampling distribution."""
    finish_reason: str = "stop"
    """"stop" (end-of-sequence), "length" (hit max_new_tokens) or "context" (the prompt does not fit the model's
    context window: nothing was generated, see `no_room`)."""
    reasoning: str = ""
    """A thinking model's reasoning before its reply (Qwen3's `<think>` block), without the tags; "" if none."""


THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


def split_reasoning(text: str) -> tuple[str, str]:
    """(reasoning, reply) of a generated text. A thinking model (Qwen3 with thinking on, DeepSeek-R1 and its
    distills) writes its reasoning first and closes it with `</think>`: the reply is what follows the last
    one. A text that opens `<think>` and never closes it was cut off while reasoning and has no reply."""
    reasoning, closed, reply = text.rpartition(THINK_CLOSE)
    if closed:
        return reasoning.strip().removeprefix(THINK_OPEN).strip(), reply.lstrip()
    if text.lstrip().startswith(THINK_OPEN):
        return text.strip().removeprefix(THINK_OPEN).strip(), ""
    return "", text


def no_room() -> Completion:
    """The reply to a prompt as long as the model's context window or longer: empty, so the environment
    penalises it as a malformed reply and the update skips it, where the engine would fail (vLLM refuses
    the whole batch) or decode past the positions the model was trained on (transformers)."""
    return Completion(text="", token_ids=[], logprobs=[], finish_reason="context")


@dataclass
class GenerationResult:
    request: GenerationRequest
    prompt_ids: list[int]
    completions: list[Completion] = field(default_factory=list)


@runtime_checkable
class Engine(Protocol):
    """What the rollout needs from a backend."""

    def generate(self, requests: list[GenerationRequest], sampling: SamplingParams) -> list[GenerationResult]:
        """Return one result per request, in order, each with `request.n` completions."""
        ...

    def sync_adapters(self) -> None:
        """Make the next `generate` see the latest adapter weights (no-op when weights are shared)."""
        ...

    def close(self) -> None: ...
