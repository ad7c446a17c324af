"""Gymnasium spaces for text-in / text-out agents.

`gymnasium.spaces.Text` accepts only a finite charset (alphanumerics by default), so a model reply
with a space or a newline would be "out of bounds" and PettingZoo's `AssertOutOfBoundsWrapper`
would crash on it instead of letting the environment penalise it. These spaces accept any string
up to a length cap, and sample seeded strings that mix printable text, whitespace, punctuation
and non-ASCII characters, so `api_test`/`seed_test` exercise the parsers with realistic garbage.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

# Sampling alphabet: what models actually emit, including the characters parsers care about.
_SAMPLE_ALPHABET = list(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    " \n\t.,;:!?'\"`()[]{}<>#*=+-_/\\|@$%^&~"
) + ["é", "ß", "→", "你", "🙂", "\u200b"]
# Fragments that make random actions touch the interesting parser branches.
_SAMPLE_FRAGMENTS = [
    "####", "```python\n", "\n```", "[U, R, D, L]", '["U","D"]', "\\boxed{", "}", "print(",
    "[[1,2],[3,4]]", "<use_mcp_tool>", "</use_mcp_tool>", "Document0,Document3",
]

MAX_ACTION_CHARS = 65_536
"""Longest reply an environment accepts (characters). Longer text is still a legal action for the
environment's own parser, but the space rejects it so the wrapper flags runaway generations."""


class TextSpace(spaces.Space[str]):
    """Any Python `str` of at most `max_length` characters."""

    def __init__(self, max_length: int = MAX_ACTION_CHARS, seed: int | None = None):
        super().__init__(shape=None, dtype=None, seed=seed)
        self.max_length = int(max_length)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        rng = self.np_random
        pieces: list[str] = []
        for _ in range(int(rng.integers(0, 12))):
            if rng.random() < 0.3:
                pieces.append(_SAMPLE_FRAGMENTS[int(rng.integers(len(_SAMPLE_FRAGMENTS)))])
            else:
                n = int(rng.integers(1, 16))
                pieces.append("".join(_SAMPLE_ALPHABET[i] for i in rng.integers(0, len(_SAMPLE_ALPHABET), n)))
        return "".join(pieces)[: self.max_length]

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"TextSpace(max_length={self.max_length})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, TextSpace) and other.max_length == self.max_length


CHAT_ROLES = ("system", "user", "assistant", "tool")


class MessagesSpace(spaces.Space[list]):
    """A chat in OpenAI format: a list of ``{"role": ..., "content": str}`` dicts."""

    def __init__(self, max_messages: int = 256, max_chars: int = 1_000_000, seed: int | None = None):
        super().__init__(shape=None, dtype=None, seed=seed)
        self.max_messages = int(max_messages)
        self.max_chars = int(max_chars)
        self._content = TextSpace(max_chars)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def seed(self, seed: int | None = None) -> list[int]:
        seeds = super().seed(seed)
        self._content.seed(int(self.np_random.integers(2**31)))
        return seeds

    def sample(self, mask: Any = None, probability: Any = None) -> list[dict[str, str]]:
        n = int(self.np_random.integers(1, 4))
        return [
            {"role": CHAT_ROLES[int(self.np_random.integers(len(CHAT_ROLES)))], "content": self._content.sample()}
            for _ in range(n)
        ]

    def contains(self, x: Any) -> bool:
        if not isinstance(x, (list, tuple)) or len(x) > self.max_messages:
            return False
        for m in x:
            if not isinstance(m, dict) or set(m) != {"role", "content"}:
                return False
            if m["role"] not in CHAT_ROLES or not isinstance(m["content"], str):
                return False
            if len(m["content"]) > self.max_chars:
                return False
        return True

    def __repr__(self) -> str:
        return f"MessagesSpace(max_messages={self.max_messages})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, MessagesSpace) and (other.max_messages, other.max_chars) == (
            self.max_messages,
            self.max_chars,
        )


def observation_space(max_turns: int) -> spaces.Dict:
    """The observation of every role: the chat it sees and the turn index.

    The key is deliberately not ``"observation"``: PettingZoo's api_test inspects that key as a
    NumPy array and crashes on text.
    """
    return spaces.Dict({"messages": MessagesSpace(), "turn": spaces.Discrete(max_turns + 1)})


def action_space() -> TextSpace:
    return TextSpace(MAX_ACTION_CHARS)

