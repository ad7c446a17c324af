"""A random agent: well-formed replies with random content (random moves or random fills)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .base import Agent


def random_moves(rng: np.random.Generator) -> str:
    return "[" + ", ".join(rng.choice(list("UDLR"), size=int(rng.integers(1, 12)))) + "]"


def random_fills(rng: np.random.Generator) -> str:
    steps = [[int(rng.integers(1, 5)), int(rng.integers(1, 5)), int(rng.integers(1, 5))] for _ in range(int(rng.integers(1, 6)))]
    return str(steps)


ANSWERS: dict[str, Callable[[np.random.Generator], str]] = {
    "plan_path": random_moves,
    "sokoban": random_moves,
    "sudoku": random_fills,
}


class RandomAgent(Agent):
    """Replies in the right format with random content: a program printing it, or `#### answer`."""

    def __init__(self, env_name: str, seed: int = 0):
        if env_name not in ANSWERS:
            raise ValueError(f"no random agent for {env_name!r}; available: {', '.join(ANSWERS)}")
        self.answer = ANSWERS[env_name]
        self.rng = np.random.default_rng(seed)

    def reset(self, seed: int | None = None) -> None:
        if seed is not None:
            self.rng = np.random.default_rng(seed)

    def act(self, role: str, observation: dict[str, Any]) -> str:
        answer = self.answer(self.rng)
        if role == "tool":
            return f"```python\nprint({answer!r})\n```"
        return f"A random guess.\n#### {answer}"
