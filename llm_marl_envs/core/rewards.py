"""The reward breakdown every environment reports in `infos` (AT-GRPO appendix A.1).

Per agent i at turn k:  r = λ·r_team + (1 − λ)·m·r_loc + penalty,   r_loc = Σ_l c_l·s_l,  Σ_l c_l = 1.

Environments put the breakdown in `infos[agent]`; algorithms remix it (AT-GRPO Eq. 4 uses
α·r_team + m·r_loc) and never re-derive game rules. `penalty` covers designs that are not a convex
mix (MMOA-RAG format penalties); it is 0 for the AT-GRPO tasks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .records import fast_init


@fast_init
@dataclass(frozen=True)
class RewardBreakdown:
    team: float
    """r_team: the shared team reward of this step."""
    terms: dict[str, float] = field(default_factory=dict)
    """s_l: local component scores, each in [0, 1]."""
    coefficients: dict[str, float] = field(default_factory=dict)
    """c_l: fixed coefficients of the local terms (sum to 1)."""
    mask: float = 1.0
    """m: verifiability mask; 0 when the local terms could not be computed."""
    lam: float = 0.5
    """λ: the team/local mixing coefficient of the task."""
    penalty: float = 0.0

    def __post_init__(self) -> None:
        if self.terms.keys() != self.coefficients.keys():
            raise ValueError(f"terms {sorted(self.terms)} and coefficients {sorted(self.coefficients)} differ")
        if self.coefficients and abs(sum(self.coefficients.values()) - 1.0) > 1e-9:
            raise ValueError(f"local coefficients must sum to 1, got {self.coefficients}")

    @property
    def local(self) -> float:
        """r_loc = Σ_l c_l·s_l, added left to right as `to_info` adds it (the builtin `sum` compensates
        rounding on Python 3.12 and later, and would differ from `to_info` in the last bit)."""
        local = 0
        for name, score in self.terms.items():
            local += self.coefficients[name] * score
        return float(local)

    @property
    def reward(self) -> float:
        return float(self.lam * self.team + (1.0 - self.lam) * self.mask * self.local + self.penalty)

    def to_info(self) -> dict[str, Any]:
        coefficients, local_terms, local = self.coefficients, {}, 0
        for name, score in self.terms.items():  # `self.local` inlined (the same sum, in the same order), one pass
            local += coefficients[name] * score
            local_terms[name] = float(score)
        local = float(local)
        return {
            "reward": float(self.lam * self.team + (1.0 - self.lam) * self.mask * local + self.penalty),  # `reward`
            "team_reward": float(self.team),
            "local_reward": local,
            "local_terms": local_terms,
            "mask": float(self.mask),
            "lambda": float(self.lam),
            "penalty": float(self.penalty),
        }


def zero_info() -> dict[str, Any]:
    """The breakdown of an agent that has not acted yet."""
    return RewardBreakdown(team=0.0, mask=0.0).to_info()
