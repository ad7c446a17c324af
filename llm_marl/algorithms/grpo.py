"""GRPO: the single-agent baseline ("Single agent + GRPO" rows of AT-GRPO Tables 1-2).

Paper: Shao et al., "DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open Language
Models", arXiv:2402.03300 (GRPO, outcome supervision); used as a baseline by AT-GRPO
(arXiv:2510.11062) and MATPO (arXiv:2510.04678).

- Environment: the single-agent variant of the workflow (`variant`; Plan-Path: `mode="planner"`).
- Sampling plan: `parallel(G)`: G independent episodes per task instance.
- Credit: the episode's mean step reward (the environment's own mixed reward), copied to every
  turn of the episode.
- Group key: the task instance; advantages are normalised over its G episodes (one member per
  episode) and broadcast to the episode's samples.

Why the episode and not the turn: with parallel sampling only the first turn's prompt is shared
by the G samples (AT-GRPO Fig. 3a), so per-turn groups would hold one sample each; the episode is
the unit the G samples have in common.

Why the mean and not the sum: every turn earns format/legality terms, so a sum pays an agent for
spending more turns; the mean keeps a one-turn solve at the maximum (1.0 on Plan-Path).
`return_kind="sum"` gives the plain return.

Deviations from the paper:
1. Multi-turn episodes (up to `max_turns`) instead of one answer; with `max_turns=1` the credit
   is exactly the outcome reward of GRPO's outcome supervision.
2. The reward is the environment's mixed reward (AT-GRPO appendix A.1), not a 0/1 outcome.
3. No KL term by default (β = 0, `--kl-beta` sets it), as in most recent GRPO recipes.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Literal

from llm_marl.config import opt
from llm_marl.rollout import Episode, Sample, SamplingPlan, parallel

ADVANTAGE_UNIT = "episode"
"""One member per episode: its credit is shared by all its samples."""
LOSS_DEFAULTS = {"kl_beta": 0.0, "ratio_level": "token", "loss_agg": "seq-mean"}
"""GRPO's objective 1/G Σ_i 1/|o_i| Σ_t (per-token ratios, each reply's tokens averaged, then the mean
over replies); β = 0 (deviation 3)."""


@dataclass(frozen=True)
class Config:
    """GRPO settings."""

    G: int = opt(4, "GRPO episodes per task instance (group size)")
    return_kind: Literal["mean", "sum"] = opt("mean", "GRPO episode credit: mean or sum of the step rewards")
    variant: str = opt("", "environment variant to train (registry); empty = its first single-agent variant")
    loss_segment: Literal["sample", "episode"] = opt("sample", "loss normaliser unit (llm_marl.loss segments): each sample")

    def __post_init__(self) -> None:
        if self.G < 2:
            raise ValueError(f"GRPO needs G >= 2 episodes per task to compare (got G={self.G}); use --G 4")
        if self.return_kind not in ("mean", "sum"):
            raise ValueError(f"return_kind must be 'mean' or 'sum', got {self.return_kind!r}")


def sampling_plan(config: Config) -> SamplingPlan:
    """G independent episodes per task (GRPO's G samples per question)."""
    return parallel(config.G)


def credit(sample: Sample, episode: Episode | None, config: Config) -> float:
    """R(τ): mean (or sum) of the step rewards along the sample's episode."""
    if episode is None:
        raise ValueError(f"GRPO credit needs the finished episode of sample {sample.sample_id} ({sample.episode_id})")
    total = float(sum(episode.returns.values()))
    if config.return_kind == "sum":
        return total
    return total / max(1, episode.steps)


def group_key(sample: Sample, config: Config) -> Hashable:
    """The task instance: G episodes of one question form a group."""
    return sample.task_id
