"""Seeded generators of verifiable math problems, one module per topic.

`GENERATORS` maps each generator name to its instance; `TOPICS` maps each topic to its generator
names. See `base.Generator` for the interface.
"""

from __future__ import annotations

from . import algebra, arithmetic, combinatorics, number_theory, probability
from .base import DIFFICULTIES, Generator, Problem

GENERATORS: dict[str, Generator] = {
    g.name: g
    for module in (arithmetic, algebra, number_theory, combinatorics, probability)
    for g in module.GENERATORS
}
TOPICS: dict[str, tuple[str, ...]] = {}
for _g in GENERATORS.values():
    TOPICS[_g.topic] = (*TOPICS.get(_g.topic, ()), _g.name)

__all__ = ["DIFFICULTIES", "GENERATORS", "TOPICS", "Generator", "Problem"]
