"""Building blocks of the shipped problems: a constructor and seeded input-drawing helpers."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..problems import Problem, TestCase

LOWER = "abcdefghijklmnopqrstuvwxyz"


def problem(id: str, title: str, difficulty: int, split: str, statement: str, reference: str,
            generate: Callable[[np.random.Generator], str], examples: Sequence[tuple[str, str]],
            edges: Sequence[str] = ()) -> Problem:
    return Problem(
        id=id, title=title, difficulty=difficulty, split=split, statement=statement.strip(),
        reference=reference.strip("\n") + "\n", generate=generate,
        examples=tuple(TestCase(i if i.endswith("\n") else i + "\n", o if o.endswith("\n") else o + "\n") for i, o in examples),
        edge_inputs=tuple(e if e.endswith("\n") else e + "\n" for e in edges),
    )


def ri(rng: np.random.Generator, lo: int, hi: int) -> int:
    """A uniform integer in [lo, hi]."""
    return int(rng.integers(lo, hi, endpoint=True))


def ints(rng: np.random.Generator, n: int, lo: int, hi: int) -> list[int]:
    return [int(x) for x in rng.integers(lo, hi, size=n, endpoint=True)]


def word(rng: np.random.Generator, lo: int, hi: int, alphabet: str = LOWER) -> str:
    return "".join(alphabet[int(i)] for i in rng.integers(0, len(alphabet), size=ri(rng, lo, hi)))


def line(values: Sequence[object]) -> str:
    return " ".join(str(v) for v in values)


def sized_list(rng: np.random.Generator, max_n: int, lo: int, hi: int, min_n: int = 1) -> str:
    """`n` on one line, then n integers; small lists are drawn as often as long ones."""
    n = ri(rng, min_n, max_n if rng.random() < 0.5 else min(max_n, 8))
    return f"{n}\n{line(ints(rng, n, lo, hi))}"


def grid(rng: np.random.Generator, rows: int, cols: int, wall: float, free: str = ".", block: str = "#") -> list[list[str]]:
    return [[block if rng.random() < wall else free for _ in range(cols)] for _ in range(rows)]
