"""A random agent: well-formed replies with random content (random moves, fills, programs, tests)."""

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


def tool_and_final_answer(answer: Callable[[np.random.Generator], str]) -> Callable[[np.random.Generator, str], str]:
    """The puzzle workflow: the tool prints a random answer, the other role writes `#### answer`."""

    def reply(rng: np.random.Generator, role: str) -> str:
        text = answer(rng)
        if role == "tool":
            return f"```python\nprint({text!r})\n```"
        return f"A random guess.\n#### {text}"

    return reply


def code_reply(rng: np.random.Generator, role: str) -> str:
    if role == "coder":
        op = ["print(input())", "print(len(input()))", "print(sum(map(int, input().split())))"][int(rng.integers(3))]
        return f"Code:\n```python\n{op}\n```"
    value = int(rng.integers(0, 100))
    return f"**Test Input:**\n```\n{value}\n```\n**Test Output:**\n```\n{value}\n```"


def math_reply(rng: np.random.Generator, role: str) -> str:
    value = int(rng.integers(-20, 100))
    if role == "tool":
        return f"```python\nprint({value})\n```"
    return f"A random guess.\n#### \\boxed{{{value}}}"


REPLIES: dict[str, Callable[[np.random.Generator, str], str]] = {
    "plan_path": tool_and_final_answer(random_moves),
    "sokoban": tool_and_final_answer(random_moves),
    "sudoku": tool_and_final_answer(random_fills),
    "code": code_reply,
    "math": math_reply,
}


class RandomAgent(Agent):
    """Replies in the right format with random content."""

    def __init__(self, env_name: str, seed: int = 0):
        if env_name not in REPLIES:
            raise ValueError(f"no random agent for {env_name!r}; available: {', '.join(REPLIES)}")
        self.reply = REPLIES[env_name]
        self.rng = np.random.default_rng(seed)

    def reset(self, seed: int | None = None) -> None:
        if seed is not None:
            self.rng = np.random.default_rng(seed)

    def act(self, role: str, observation: dict[str, Any]) -> str:
        return self.reply(self.rng, role)
