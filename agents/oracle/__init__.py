"""Scripted oracle agents, one per environment, solving it through the text interface."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from ..base import Agent

# env name -> "module:class"; each module is loaded on demand.
ORACLES: dict[str, str] = {
    "plan_path": "agents.oracle.plan_path:PlanPathOracle",
    "sokoban": "agents.oracle.sokoban:SokobanOracle",
    "sudoku": "agents.oracle.sudoku:SudokuOracle",
    "code": "agents.oracle.code:CodeOracle",
    "math": "agents.oracle.math:MathOracle",
    "deep_search": "agents.oracle.deep_search:DeepSearchOracle",
    "mass": "agents.oracle.mass:MASSOracle",
}


def make_oracle(env_name: str, env_kwargs: Mapping[str, Any] | None = None, **options: Any) -> Agent:
    """The oracle of `env_name`; `options` go to its constructor (e.g. Plan-Path's `program="answer"`). The
    environment options it must share (its class's `env_options`, e.g. MASS's `corpus_seed`: the world
    it walks) are taken from `env_kwargs`, the options the environment was made with, unless given."""
    if env_name not in ORACLES:
        raise ValueError(f"no oracle for {env_name!r}; available: {', '.join(ORACLES)}")
    module, cls = ORACLES[env_name].split(":")
    oracle = getattr(importlib.import_module(module), cls)
    env_kwargs = env_kwargs or {}
    options = {**{k: env_kwargs[k] for k in getattr(oracle, "env_options", ()) if k in env_kwargs}, **options}
    try:
        return oracle(**options)
    except TypeError as exc:
        raise ValueError(f"the {env_name} oracle takes no such option ({exc}); see {module}") from None
