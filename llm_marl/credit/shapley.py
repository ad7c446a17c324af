"""System -> agent credit: Shapley values over agent coalitions (Shapley-PRM Sec. 4.1.1, Eq. 3-5; App. A.3).

    φ_i = Σ_{S ⊆ A∖{i}} |S|!(n-|S|-1)!/n! · (v(S ∪ {i}) - v(S))          (Eq. 3, exact: 2^n coalitions)
    φ̂_i = 1/M Σ_π [v(prec_π(i) ∪ {i}) - v(prec_π(i))]                      (App. A.3, M permutations)
    α_i = φ_i / Σ_j φ_j                                                     (Eq. 4)

`value` is the coalition value v(S) of Eq. 2 (score of the episode replayed with the agents outside
S replaced by the baseline policy); here it is any callable on frozensets, and every coalition is
evaluated at most once, because in training each call is a replayed episode. Efficiency is
Σφ = v(N) - v(∅): the paper writes Σφ = R_sys, which assumes v(∅) = 0 (see `efficiency_gap`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence

import numpy as np

Value = Callable[[frozenset[str]], float]
ZERO_POOL = 1e-12
"""|Σφ| at or below this means there is no credit pool to divide (Eq. 4 is undefined)."""


def _check_players(players: Sequence[str]) -> list[str]:
    """Players as a list, rejecting duplicates (a duplicated agent would be counted twice)."""
    players = list(players)
    if len(set(players)) != len(players):
        dupes = sorted({p for p in players if players.count(p) > 1})
        raise ValueError(f"players must be unique, got duplicates {dupes}; give each agent one name")
    return players


def _cached(value: Value) -> tuple[Value, dict[frozenset[str], float]]:
    """Wrap `value` so each coalition is evaluated once; returns the wrapper and its cache."""
    cache: dict[frozenset[str], float] = {}

    def v(S: frozenset[str]) -> float:
        if S not in cache:
            cache[S] = float(value(S))
        return cache[S]

    return v, cache


def all_coalitions(players: Sequence[str]) -> list[frozenset[str]]:
    """The 2^n coalitions Eq. 3 needs, by size then lexicographically in the order of `players`."""
    players = _check_players(players)
    return [frozenset(c) for k in range(len(players) + 1) for c in itertools.combinations(players, k)]


def exact_shapley(players: Sequence[str], value: Value) -> dict[str, float]:
    """Exact Shapley values (Eq. 3), evaluating each of the 2^n coalitions once; use for small n."""
    players = _check_players(players)
    n = len(players)
    v, _ = _cached(value)
    for S in all_coalitions(players):
        v(S)  # one evaluation per coalition, in a deterministic order
    weight = [math.factorial(k) * math.factorial(n - k - 1) / math.factorial(n) for k in range(n)]
    phi = {}
    for i in players:
        others = [j for j in players if j != i]
        phi[i] = sum(weight[k] * (v(frozenset(S) | {i}) - v(frozenset(S)))
                     for k in range(n) for S in itertools.combinations(others, k))
    return phi


def sample_permutations(players: Sequence[str], M: int, rng: np.random.Generator) -> list[tuple[str, ...]]:
    """M uniformly random agent orderings for the Monte Carlo estimate (App. A.3)."""
    players = _check_players(players)
    if M < 1:
        raise ValueError(f"M (number of permutations) must be >= 1, got {M}")
    return [tuple(players[j] for j in rng.permutation(len(players))) for _ in range(M)]


def permutation_coalitions(permutations: Iterable[Sequence[str]]) -> list[frozenset[str]]:
    """Distinct prefix coalitions (empty to full) the Monte Carlo estimator evaluates, in first-use order."""
    seen: dict[frozenset[str], None] = {}
    for pi in permutations:
        for k in range(len(pi) + 1):
            seen.setdefault(frozenset(pi[:k]))
    return list(seen)


def monte_carlo_shapley(players: Sequence[str], value: Value,
                        permutations: Sequence[Sequence[str]]) -> dict[str, float]:
    """Permutation-sampling Shapley estimate (App. A.3), unbiased, with O(M·n) coalition values (cached)."""
    players = _check_players(players)
    if not permutations:
        raise ValueError("need at least one permutation; draw them with sample_permutations(players, M, rng)")
    for pi in permutations:
        if len(pi) != len(players) or set(pi) != set(players):
            raise ValueError(f"{tuple(pi)} is not a permutation of {tuple(players)}")
    v, _ = _cached(value)
    phi = dict.fromkeys(players, 0.0)
    for pi in permutations:
        prec: frozenset[str] = frozenset()
        for i in pi:
            phi[i] += v(prec | {i}) - v(prec)
            prec = prec | {i}
    return {i: total / len(permutations) for i, total in phi.items()}


def efficiency_gap(phi: dict[str, float], grand_value: float, empty_value: float) -> float:
    """Σφ - (v(N) - v(∅)), 0 for exact Shapley values; checks efficiency, or measures Monte Carlo error.

    The paper writes Σφ = R_sys (Eq. 5), which assumes v(∅) = 0. With a baseline policy standing in
    for absent agents the empty coalition may score v(∅) ≠ 0, and efficiency is Σφ = v(N) - v(∅).
    """
    return sum(phi.values()) - (grand_value - empty_value)


def credit_ratio(phi: dict[str, float]) -> dict[str, float]:
    """Signed share α_i = φ_i / Σ_j φ_j of the credit pool (Eq. 4), for interpretability and logging.

    When |Σφ| <= ZERO_POOL there is no pool to divide (e.g. a failed episode with v(N) = v(∅)) and
    every α_i is 0 rather than ±inf; such episodes go to the failure route (Sec. 4.2).
    """
    total = sum(phi.values())
    if abs(total) <= ZERO_POOL:
        return dict.fromkeys(phi, 0.0)
    return {i: p / total for i, p in phi.items()}
