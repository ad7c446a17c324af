"""Math instances, the problem-bank configuration, and seeded generation.

An instance is a pure function of the generator's `numpy.random.Generator` (the core draws it from
`SeedSequence([namespace, split, seed, attempt])`, see `core/instances.py`). Its canonical `key()`
is the whitespace-normalised question text, so the same question (generated, or the same dataset
problem in two files) always falls in the same split bucket.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .generators import DIFFICULTIES, GENERATORS, TOPICS
from .generators.base import Generator


@dataclass(frozen=True)
class MathInstance:
    """One problem: question, reference answer and metadata. Treat as immutable (forks share it)."""

    question: str
    answer: str
    """Reference answer y* (canonical text; compared with `verify.answers_match`)."""
    source: str = "generated"
    """"generated", or the dataset format it was loaded from ("gsm8k", "math", "aime", "polaris", "jsonl")."""
    difficulty: int | str | None = None
    """Generated: 1 (easy) .. 3 (hard). MATH: level 1..5. Polaris: its pass-rate string. Else None."""
    generator: str | None = None
    """Generator name (generated) or the dataset's subject/type, when known."""
    topic: str | None = None
    uid: str | None = None
    """The dataset's own id, when it has one."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Generated: {"variant", "params"}; datasets: remaining useful fields (url, year, solution...)."""

    def key(self) -> str:
        return " ".join(self.question.split())

    def __deepcopy__(self, memo: dict) -> MathInstance:
        return self


def _names(value: Any) -> tuple[Any, ...]:
    """topics= or generators= as a tuple: one name alone counts as a list of it, and so does a value that is
    no list (`--env-arg topics=5`), which the unknown-name message then reports instead of tuple()'s TypeError."""
    return tuple(value) if isinstance(value, Iterable) and not isinstance(value, str) else (value,)


@dataclass(frozen=True)
class MathProblemConfig:
    """Which generated problems an environment draws."""

    difficulty: int | None = None
    """1 (easy), 2 (medium) or 3 (hard); None draws the level uniformly per instance."""
    topics: tuple[str, ...] | None = None
    """Subset of TOPICS (arithmetic, algebra, number_theory, combinatorics, probability); None = all."""
    generators: tuple[str, ...] | None = None
    """Subset of generator names; None = every generator of the chosen topics."""

    def __post_init__(self) -> None:
        if self.difficulty is not None and self.difficulty not in DIFFICULTIES:
            raise ValueError(f"difficulty must be one of {DIFFICULTIES} or None (mixed), got {self.difficulty!r}")
        if self.topics is not None:
            object.__setattr__(self, "topics", _names(self.topics))
            unknown = [t for t in self.topics if t not in TOPICS]
            if unknown or not self.topics:
                raise ValueError(f"unknown topics {unknown}; choose from {', '.join(TOPICS)}")
        if self.generators is not None:
            object.__setattr__(self, "generators", _names(self.generators))
            unknown = [g for g in self.generators if g not in GENERATORS]
            if unknown or not self.generators:
                raise ValueError(f"unknown generators {unknown}; choose from {', '.join(GENERATORS)}")
        if not self.generator_names():
            raise ValueError(f"no generator is in both topics={self.topics} and generators={self.generators}; widen one of them")

    def generator_names(self) -> tuple[str, ...]:
        names = [n for topic in (self.topics or tuple(TOPICS)) for n in TOPICS[topic]]
        if self.generators is not None:
            names = [n for n in names if n in self.generators]
        return tuple(names)


def generate(rng: np.random.Generator, config: MathProblemConfig = MathProblemConfig()) -> MathInstance:
    """One generated problem: a generator and a difficulty drawn from `rng`, then its parameters."""
    names = config.generator_names()
    name = names[int(rng.integers(len(names)))]
    difficulty = config.difficulty or DIFFICULTIES[int(rng.integers(len(DIFFICULTIES)))]
    problem = GENERATORS[name].make(rng, difficulty)
    return MathInstance(
        question=problem.question, answer=problem.answer, source="generated", difficulty=difficulty,
        generator=name, topic=problem.topic, metadata={"variant": problem.variant, "params": dict(problem.params)},
    )


@dataclass(frozen=True)
class Recognised:
    """A generated question found in some text: its generator and parameters."""

    generator: Generator
    variant: str
    params: dict[str, str]

    def answer(self) -> str:
        return self.generator.solve(self.variant, self.params)

    def program(self) -> str:
        return self.generator.program(self.variant, self.params)


def recognise(text: str, names: Sequence[str] | None = None) -> Recognised | None:
    """Find a generated question in `text` (on a line of its own) and read its parameters back.

    This is the generators' own solver exposed for the scripted oracle: it reads the question
    text, never the environment's state.
    """
    for name in names or GENERATORS:
        found = GENERATORS[name].match(text)
        if found is not None:
            return Recognised(GENERATORS[name], found[0], found[1])
    return None


__all__ = ["MathInstance", "MathProblemConfig", "Recognised", "generate", "recognise"]
