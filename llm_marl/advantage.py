"""Group-relative advantages (GRPO; AT-GRPO Eq. 1), as one pure function.

    A_i = (r_i - mean_g(r)) / (F_norm_g(r) + eps),   g = group_ids[i]

with F_norm the sample standard deviation (`scale="std"`, AT-GRPO Eq. 1) or 1 (`scale="none"`,
Dr. GRPO, arXiv:2503.20783). A group of one has nothing to compare against and a group whose
rewards are all equal carries no signal: both get advantage 0 and are counted in the stats, never
passed through as raw rewards (verl gives a group of one mean 0 and std 1).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

import torch

Scale = Literal["std", "none"]
ZERO_SPREAD = 1e-12
"""Rewards whose max - min is at most this are treated as equal (a zero-variance group)."""


@dataclass(frozen=True)
class AdvantageConfig:
    scale: Scale = "std"
    """"std": divide by the group's sample std (GRPO, AT-GRPO Eq. 1); "none": mean-centre only (Dr. GRPO)."""
    eps: float = 1e-6
    """Added to the std before dividing."""

    def __post_init__(self) -> None:
        if self.scale not in ("std", "none"):
            raise ValueError(f"advantage scale must be 'std' or 'none', got {self.scale!r}")
        if self.eps < 0:
            raise ValueError(f"advantage eps must be >= 0, got {self.eps}")


def group_ids_to_index(group_ids: Sequence[Hashable]) -> torch.Tensor:
    """Map arbitrary hashable keys to dense ints 0..G-1 in order of first appearance. [B] long."""
    index: dict[Hashable, int] = {}
    return torch.tensor([index.setdefault(k, len(index)) for k in group_ids], dtype=torch.long)


def group_advantages(rewards: torch.Tensor, group_ids: Sequence[Hashable], eps: float = 1e-6,
                     scale: Scale = "std") -> tuple[torch.Tensor, dict[str, float]]:
    """Normalise `rewards` [B] within groups given by `group_ids` [B] (any hashables).

    Returns `(adv [B], stats)` with stats: `groups`, `singleton_groups`, `zero_std_groups`
    (size >= 2, all rewards equal), `frac_zero_std` (of groups), `zeroed_samples` (members given 0
    for either reason), `mean_group_size`, `max_group_size`, `reward_mean`, `reward_std`.
    """
    if scale not in ("std", "none"):
        raise ValueError(f"scale must be 'std' or 'none', got {scale!r}")
    r = torch.as_tensor(rewards, dtype=torch.float64).detach().cpu().reshape(-1)
    if len(group_ids) != r.numel():
        raise ValueError(f"{r.numel()} rewards but {len(group_ids)} group ids")
    if not torch.isfinite(r).all():
        raise ValueError("rewards must be finite (a NaN credit means the algorithm could not score a sample)")
    B = r.numel()
    stats = {"groups": 0.0, "singleton_groups": 0.0, "zero_std_groups": 0.0, "frac_zero_std": 0.0, "zeroed_samples": 0.0,
             "mean_group_size": 0.0, "max_group_size": 0.0, "reward_mean": 0.0, "reward_std": 0.0}
    if B == 0:
        return torch.zeros(0, dtype=torch.float32), stats
    g = group_ids_to_index(group_ids)
    G = int(g.max()) + 1
    size = torch.bincount(g, minlength=G).to(torch.float64)
    mean = torch.zeros(G, dtype=torch.float64).index_add_(0, g, r) / size
    centred = r - mean[g]
    # Sample (unbiased) standard deviation, as Eq. 1 says; undefined for a group of one.
    sq = torch.zeros(G, dtype=torch.float64).index_add_(0, g, centred**2)
    std = torch.sqrt(sq / (size - 1).clamp(min=1))
    lo = torch.full((G,), float("inf"), dtype=torch.float64).scatter_reduce(0, g, r, "amin")
    hi = torch.full((G,), float("-inf"), dtype=torch.float64).scatter_reduce(0, g, r, "amax")
    singleton = size == 1
    flat = (~singleton) & ((hi - lo) <= ZERO_SPREAD)
    adv = centred / (std[g] + eps) if scale == "std" else centred
    dead = (singleton | flat)[g]
    adv = torch.where(dead, torch.zeros_like(adv), adv)
    stats.update(
        groups=float(G), singleton_groups=float(singleton.sum()), zero_std_groups=float(flat.sum()),
        frac_zero_std=float(flat.sum()) / G, zeroed_samples=float(dead.sum()), mean_group_size=float(size.mean()),
        max_group_size=float(size.max()), reward_mean=float(r.mean()), reward_std=float(r.std(unbiased=False)),
    )
    return adv.to(torch.float32), stats
