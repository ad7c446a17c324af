"""The shipped problem bank: original stdin/stdout problems in three difficulty tiers.

Every problem has a statement, a public example, a reference solution and a seeded input
generator; each instance draws its hidden tests from the generator (plus the problem's edge
inputs) and computes their expected outputs with the reference solution. Splits are fixed per
problem (60/20/20 within each tier), so no problem appears in two splits.
"""

from __future__ import annotations

from ..problems import Problem
from . import easy, hard, medium

PROBLEMS: tuple[Problem, ...] = (*easy.PROBLEMS, *medium.PROBLEMS, *hard.PROBLEMS)
BY_ID: dict[str, Problem] = {p.id: p for p in PROBLEMS}

__all__ = ["BY_ID", "PROBLEMS"]
