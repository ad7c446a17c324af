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


_WORDS = "who what which city film director born capital mayor founder river garden paper silent the of in".split()


def _random_words(rng: np.random.Generator, lo: int = 1, hi: int = 6) -> str:
    return " ".join(rng.choice(_WORDS, size=int(rng.integers(lo, hi + 1))))


def _mcp_call(server: str, tool: str, arguments: dict) -> str:
    import json

    return (f"<use_mcp_tool>\n<server_name>{server}</server_name>\n<tool_name>{tool}</tool_name>\n"
            f"<arguments>\n{json.dumps(arguments)}\n</arguments>\n</use_mcp_tool>")


def deep_search_reply(rng: np.random.Generator, role: str) -> str:
    """Planner: delegate, search, fetch or answer; worker: search, fetch or a four-heading summary."""
    kind = rng.random()
    url = f"wiki://mini-wiki/{_random_words(rng, 1, 2).title().replace(' ', '_')}"
    if role == "planner" and kind < 0.45:
        return _mcp_call("browsing_agent", "search_and_browse", {"subtask": _random_words(rng, 3, 8) + "?"})
    if role == "planner" and kind < 0.8:
        return _mcp_call("llm-marl-search", "search", {"query": _random_words(rng)}) if kind < 0.65 else \
            _mcp_call("llm-marl-search", "fetch", {"url": url})
    if role == "planner":
        return f"My answer.\n\\boxed{{{_random_words(rng, 1, 2).title()}}}"
    if kind < 0.4:
        return _mcp_call("llm-marl-search", "search", {"query": _random_words(rng), "k": int(rng.integers(1, 11))})
    if kind < 0.7:
        return _mcp_call("llm-marl-search", "fetch", {"url": url})
    return ("## Conclusion:\n**" + _random_words(rng, 1, 2).title() + "**\n\n## Supporting Information:\n- none\n\n"
            "## Observations:\nrandom\n\n## Contribution to Main Task:\nunclear")


def mass_reply(rng: np.random.Generator, role: str) -> str:
    """Rewriter: 1-5 sub-queries; reranker: some Document ids; answerer: a few words."""
    if role == "rewriter":
        return "### " + "; ".join(_random_words(rng, 2, 6) for _ in range(int(rng.integers(1, 6)))) + " ###"
    if role == "reranker":
        ids = rng.choice(12, size=int(rng.integers(1, 5)), replace=False)
        return ",".join(f"Document{int(i)}" for i in ids)
    return _random_words(rng, 1, 4).title()


REPLIES: dict[str, Callable[[np.random.Generator, str], str]] = {
    "plan_path": tool_and_final_answer(random_moves),
    "sokoban": tool_and_final_answer(random_moves),
    "sudoku": tool_and_final_answer(random_fills),
    "code": code_reply,
    "math": math_reply,
    "deep_search": deep_search_reply,
    "mass": mass_reply,
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
