"""MATPO: multi-agent tool-integrated policy optimisation (planner + workers in one model).

Paper: Mo, Li, Chen, Bing, "Multi-Agent Tool-Integrated Policy Optimization", arXiv:2510.04678:
the J_MATPO objective and its implementation section.

- Sampling plan: `parallel(G)`: G full multi-agent rollouts per query, each a planner rollout
  with all the worker rollouts it called.
- Credit: the trajectory reward r(τ_i) = 0.9·acc + 0.1·fmt, read from the planner's infos when
  the episode ends, copied to every sample of the rollout, planner and workers.
- Group key: the query (task instance). The advantage Â_i = (r(τ_i) - mean) / std is computed
  over the planner's G rollouts (one member per rollout) and broadcast to all samples of τ_i.
- Loss: only generated tokens (the mask in `llm_marl.loss`), normalised per rollout
  (1/Σ_t |τ_i^t|) then over the G rollouts: `loss_segment = "episode"` with `seq-mean`.

Environment contract used: at the end of an episode `infos[planner]` carries accuracy as
`team_reward` and fmt = 0.5·fmt_p + 0.5·fmt_w (fractions of valid tool calls) as
`local_reward`; the keys are configurable.

Deviations from the paper:
1. acc comes from the environment's verifier (exact/alias match), not a GPT-4o-mini judge.
2. The paper writes the ratio R_{i,t} as a sum of per-action ratios; we use PPO's per-token
   ratio with the paper's per-rollout token normaliser (a sequence-level ratio is available with
   `LossConfig.ratio_level="sequence"`).
3. Multi-agent-in-one-model is σ = {all roles: one adapter}; a per-role σ gives the paper's
   multi-agent-multi-model variant with the same credit.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Literal

from llm_marl.config import opt
from llm_marl.rollout import Episode, Sample, SamplingPlan, parallel

ADVANTAGE_UNIT = "episode"
"""One member per rollout (the planner's G rollouts); workers share their rollout's advantage."""
LOSS_DEFAULTS = {"kl_beta": 0.0, "ratio_level": "token", "loss_agg": "seq-mean"}
"""J_MATPO: token ratios, each rollout's tokens averaged (1/Σ_t|τ_i^t|, with `loss_segment="episode"`),
then the mean over the G rollouts; the objective has no KL term."""


@dataclass(frozen=True)
class Config:
    """MATPO settings (reward weights as in the paper)."""

    G: int = opt(4, "MATPO rollouts per query (the paper's n.rollout; its value is not stated)")
    acc_weight: float = opt(0.9, "MATPO weight of accuracy in r(τ) = 0.9·acc + 0.1·fmt")
    fmt_weight: float = opt(0.1, "MATPO weight of the tool-call format score in r(τ)")
    planner_role: str = opt("planner", "role whose final infos hold the rollout's accuracy and format")
    acc_key: str = opt("team_reward", "key of the planner's final infos holding acc (0/1)")
    fmt_key: str = opt("local_reward", "key of the planner's final infos holding fmt = 0.5·fmt_p + 0.5·fmt_w")
    loss_segment: Literal["sample", "episode"] = opt("episode", "loss normaliser unit: the whole rollout, planner and workers (J_MATPO)")

    def __post_init__(self) -> None:
        if self.G < 2:
            raise ValueError(f"MATPO needs G >= 2 rollouts per query to compare (got G={self.G}); use --G 4")
        if not (math.isfinite(self.acc_weight) and math.isfinite(self.fmt_weight)):  # a NaN credit stopped step 1 with a traceback
            raise ValueError(f"--acc-weight and --fmt-weight must be finite numbers, got {self.acc_weight} and {self.fmt_weight}")


def check_env(env: Any, config: Config) -> None:
    roles = list(env.possible_agents)
    if config.planner_role not in roles:
        raise ValueError(f"MATPO reads acc and fmt from the final infos of {config.planner_role!r}, which this environment "
                         f"does not have (roles: {', '.join(roles)}); pass --planner-role with the role that answers")


def sampling_plan(config: Config) -> SamplingPlan:
    """G independent multi-agent rollouts per query."""
    return parallel(config.G)


def credit(sample: Sample, episode: Episode | None, config: Config) -> float:
    """r(τ_i) = 0.9·acc + 0.1·fmt of the rollout the sample belongs to (planner or worker)."""
    if episode is None:
        raise ValueError(f"MATPO credit needs the finished rollout of sample {sample.sample_id} ({sample.episode_id})")
    info = episode.final_infos.get(config.planner_role)
    if info is None:
        raise ValueError(f"episode {episode.episode_id} has no infos for {config.planner_role!r}; set planner_role to the "
                         f"role that gives the final answer (roles: {sorted(episode.final_infos)})")
    return config.acc_weight * float(info[config.acc_key]) + config.fmt_weight * float(info[config.fmt_key])


def group_key(sample: Sample, config: Config) -> Hashable:
    """The query: the planner's G rollouts of one task form the group."""
    return sample.task_id
