"""LLM-backed agents: any engine (hf, vllm, api) acting for one or more roles.

Training never goes through these (the rollout driver batches every request of a wave into one
engine call); they are for playing, demos and evaluating an endpoint one episode at a time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llm_marl.engines.base import Engine, GenerationRequest, SamplingParams

from .base import Agent


class LLMAgent(Agent):
    """Replies with the first completion of `engine` for the observation's chat."""

    def __init__(self, engine: Engine, adapters: Mapping[str, str | None] | None = None,
                 sampling: SamplingParams = SamplingParams(temperature=0.0, max_new_tokens=256)):
        self.engine = engine
        self.adapters = dict(adapters or {})
        self.sampling = sampling

    def act(self, role: str, observation: dict[str, Any]) -> str:
        request = GenerationRequest(messages=list(observation["messages"]), adapter=self.adapters.get(role), role=role)
        return self.engine.generate([request], self.sampling)[0].completions[0].text


class OpenAICompatibleAgent(LLMAgent):
    """An agent served by any OpenAI-compatible `/v1/chat/completions` endpoint, through the `openai`
    SDK (`llm-marl play --agent api`); the key defaults to `OPENAI_API_KEY`."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None, timeout_s: float = 60.0, max_retries: int = 2,
                 sampling: SamplingParams = SamplingParams(temperature=0.0, max_new_tokens=256)):
        from llm_marl.engines.api import APIEngine

        super().__init__(APIEngine(base_url=base_url, model=model, api_key=api_key, timeout_s=timeout_s, max_retries=max_retries),
                         sampling=sampling)
