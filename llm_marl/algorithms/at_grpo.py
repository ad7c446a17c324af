"""AT-GRPO: agent- and turn-wise grouped GRPO with tree sampling.

Paper: Zhao et al., "Stronger Together: On-Policy Reinforcement Learning for Collaborative LLMs",
arXiv:2510.11062: Alg. 1, Eq. 1-4.

- Sampling plan: `tree(K)`: at every agent turn K candidates from one observation, each stepped
  on its own fork and scored by Eq. 4; the argmax continues (Alg. 1 lines 10-13).
- Credit: r_{i,t} = α·r_team + m·r_loc of the candidate's own step (Eq. 4).
- Group key: (environment instance e, agent i, turn t) (Alg. 1 line 11); advantages by Eq. 1
  over the K candidates of the group, one advantage per sample.
- Per-policy batches (Eq. 2): the trainer routes samples by `Sample.adapter`
  (`llm_marl.rollout.batches_by_adapter`); σ (role -> adapter) gives shared (M=1) or per-role
  (M=N) policies.

Deviations from the paper:
1. r_loc is multiplied by the environment's verifiability mask m (appendix A.1: 0 when the local
   terms could not be computed) and the environment's `penalty` term is added (0 for the AT-GRPO
   tasks; kept so format penalties of other environments are not dropped).
2. `reward="env"` uses the environment's own reward instead, the appendix's λ·r_team +
   (1-λ)·m·r_loc mix; Eq. 4 (`"eq4"`) is the default, as in the main text.
3. The argmax breaks ties by the lowest candidate index (Alg. 1 leaves ties open).
4. Eq. 3 is a plain log-likelihood objective; the update uses the shared clipped surrogate
   (`llm_marl.loss`) with token-level ratios and `token-mean` aggregation, the setting of the
   authors' released training config (verl `loss_agg_mode: token-mean`, no KL loss);
   `--loss-agg seq-sum` gives Eq. 3's literal per-reply sum log π(a|o) at ratio 1.
5. The turn horizon T is the environment's `max_turns`, and "for each agent i" follows the
   environment's turn order (`agent_selection`).
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Literal

from llm_marl.config import opt
from llm_marl.rollout import Episode, Sample, SamplingPlan, tree

ADVANTAGE_UNIT = "sample"
"""Each candidate is its own member of its (e, i, t) group."""
LOSS_DEFAULTS = {"kl_beta": 0.0, "ratio_level": "token", "loss_agg": "token-mean"}
"""Deviation 4: the authors' released setting (token ratios, token-mean, no KL)."""


@dataclass(frozen=True)
class Config:
    """AT-GRPO settings (paper defaults: K = 4, α = 1)."""

    K: int = opt(4, "AT-GRPO branches per agent turn: candidates per (env, agent, turn) group (paper: 4)")
    alpha: float = opt(1.0, "AT-GRPO Eq. 4 weight α of the team reward (paper: 1)")
    reward: Literal["eq4", "env"] = opt("eq4", "AT-GRPO credit: eq4 = α·r_team + m·r_loc, env = the environment's own λ-mixed reward")
    loss_segment: Literal["sample", "episode"] = opt("sample", "loss normaliser unit (llm_marl.loss segments): each sample")

    def __post_init__(self) -> None:
        if self.K < 2:
            raise ValueError(f"AT-GRPO needs K >= 2 candidates per group to compare (got K={self.K}); use --K 4")
        if self.reward not in ("eq4", "env"):
            raise ValueError(f"reward must be 'eq4' or 'env', got {self.reward!r}")
        if not math.isfinite(self.alpha):  # a NaN credit stopped step 1 with a traceback
            raise ValueError(f"--alpha must be a finite number, got {self.alpha}")


def sampling_plan(config: Config) -> SamplingPlan:
    """Alg. 1 lines 8-13: tree(K), the best candidate by Eq. 4 continues."""
    return tree(config.K, score=lambda sample: credit(sample, None, config))


def credit(sample: Sample, episode: Episode | None, config: Config) -> float:
    """Eq. 4: r_{i,t} = α·r_team + m·r_loc, read from `infos[i]` right after the candidate's step.

    Depends on the sample alone, so `tree` can rank the candidates before the episode exists.
    """
    info = sample.info
    if config.reward == "env":
        return float(sample.reward)
    r_team = float(info["team_reward"])
    r_loc = float(info["local_reward"])
    m = float(info.get("mask", 1.0))
    return config.alpha * r_team + m * r_loc + float(info.get("penalty", 0.0))


def group_key(sample: Sample, config: Config) -> Hashable:
    """Alg. 1 line 11: g = hash(e, i, t)."""
    return (sample.task_id, sample.role, sample.turn)
