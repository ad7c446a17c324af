"""Sampling backends behind one interface (`base.Engine`), and `make_engine` to pick one by name.

    engine = make_engine("hf", policy_set=policy)             # shares the trainer's model
    engine = make_engine("vllm", policy_set=policy)           # offline vLLM, one LoRARequest per adapter
    engine = make_engine("api", base_url="http://127.0.0.1:8000/v1", model="m")   # evaluation only
    engine = make_engine("scripted", reply_fn=lambda request, k: "####U")          # tests

Backends are imported on demand: `vllm` is an optional extra and must not be needed to import this.
"""

from __future__ import annotations

import importlib
from typing import Any

from .base import Completion, Engine, GenerationRequest, GenerationResult, SamplingParams

__all__ = ["ENGINES", "Completion", "Engine", "GenerationRequest", "GenerationResult", "SamplingParams", "make_engine"]

ENGINES: dict[str, str] = {
    "hf": "llm_marl.engines.hf:HFEngine",
    "vllm": "llm_marl.engines.vllm:VLLMEngine",
    "api": "llm_marl.engines.api:APIEngine",
    "scripted": "llm_marl.engines.scripted:ScriptedEngine",
}
"""CLI id -> "module:class" (imported lazily)."""


def make_engine(kind: str, /, *args: Any, **kwargs: Any) -> Engine:
    """Build the engine `kind` with the backend's own constructor arguments."""
    if kind not in ENGINES:
        raise ValueError(f"unknown engine {kind!r}; choose one of {', '.join(ENGINES)}")
    module, cls = ENGINES[kind].split(":")
    return getattr(importlib.import_module(module), cls)(*args, **kwargs)
