"""llm_marl_envs: multi-agent LLM environments with the PettingZoo AEC interface.

    import llm_marl_envs
    env = llm_marl_envs.plan_path_v1.env()
    env.reset(seed=0)

Environment modules load on first access; importing this package registers every environment with
PettingZoo (`pettingzoo.make("aec", "llm_marl/PlanPath-v1")`). No torch or LLM is imported here.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

from . import registry
from .registry import ENVS, make

__all__ = ["ENVS", "make", "registry", *(e.module for e in ENVS.values())]

_MODULES = {e.module for e in ENVS.values()}


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    entry = registry.replacement(name)
    if entry is not None:
        # Code written against an older version keeps running, on the current version, and is told so.
        warnings.warn(f"llm_marl_envs.{name} was replaced by llm_marl_envs.{entry.module} and now returns it; "
                      f"what changed is in its Version History (help(llm_marl_envs.{entry.module}))", FutureWarning, stacklevel=2)
        return importlib.import_module(f"{__name__}.{entry.module}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


registry.register_all()
