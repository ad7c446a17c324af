"""Algorithms, keyed by CLI id. Each differs only in sampling plan, credit per sample and group key.

    algo = get("at-grpo")
    config = algo.config_cls(K=4, alpha=1.0)
    out = rollout(tasks, algo.sampling_plan(config), engine, sigma, sampling)
    stats = assign_advantages(out, algo, config, AdvantageConfig())
    batches = batches_by_adapter(out.samples)          # AT-GRPO Eq. 2: one batch per policy

A module `llm_marl/algorithms/<algo>.py` provides `Config`, `sampling_plan(config)`,
`credit(sample, episode, config)`, `group_key(sample, config)` (or `assign`, below) and `ADVANTAGE_UNIT` ("sample":
each sample is a member of its group; "episode": one member per episode, whose credit is shared
by all its samples and whose advantage is broadcast to them). Adding one is a new module and a
line in `ALGORITHMS`; the rollout driver, the advantage and the loss do not change.

Optional module attributes:
- `assign(rollout, config)`: set `credit` and `group_key` of every trainable sample at once, for
  credits that need the whole rollout (MHGPO's reward back-propagation over the rollout tree and its
  batch-level regrouping; SHARP's counterfactual replays). Replaces `credit` / `group_key` calls.
- `check_env(env, config)`: raise a ValueError naming the fix when the environment breaks the
  algorithm's assumptions (SHARP needs a planner that delegates to workers).
Required module attribute besides those: `LOSS_DEFAULTS`, the paper's loss settings (every field of
`llm_marl.config.LOSS_FIELDS`: KL β, ratio level, aggregation). `TrainConfig` applies them to every
loss field left unset, from the CLI and from Python alike.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch

from llm_marl.advantage import AdvantageConfig, group_advantages
from llm_marl.config import LOSS_FIELDS
from llm_marl.rollout import Episode, Rollout, Sample, SamplingPlan
from llm_marl_envs.registry import did_you_mean


@dataclass(frozen=True)
class AlgorithmEntry:
    id: str
    """CLI id (`--algo`)."""
    module: str
    paper: str
    summary: str


ALGORITHMS: dict[str, AlgorithmEntry] = {
    e.id: e
    for e in [
        AlgorithmEntry("grpo", "grpo", "DeepSeekMath, arXiv:2402.03300",
                       "single agent; parallel(G); credit = episode mean reward; group = task"),
        AlgorithmEntry("at-grpo", "at_grpo", "AT-GRPO, arXiv:2510.11062",
                       "tree(K); credit = α·r_team + m·r_loc (Eq. 4); group = (env, agent, turn)"),
        AlgorithmEntry("matpo", "matpo", "MATPO, arXiv:2510.04678",
                       "parallel(G); credit = 0.9·acc + 0.1·fmt per rollout, broadcast to workers; group = query"),
        AlgorithmEntry("mhgpo", "mhgpo", "MHGPO (Chen et al., heterogeneous group-based RL for LLM MAS)",
                       "fork_on (IS / FoF / RR); credit = back-propagated shared reward (Eq. 4) + own penalty; heterogeneous groups (Eq. 5)"),
        AlgorithmEntry("sharp", "sharp", "SHARP (Shapley credit for planner-worker tool-integrated planning)",
                       "parallel(G) + masked replays; credit = α·R_acc + β·marginal credit (Eq. 11-13) + γ·R_tool; group = (query, agent)"),
    ]
}


@dataclass(frozen=True)
class Algorithm:
    id: str
    module: ModuleType
    config_cls: type
    sampling_plan: Callable[[Any], SamplingPlan]
    credit: Callable[[Sample, Episode | None, Any], float] | None
    group_key: Callable[[Sample, Any], Hashable] | None
    advantage_unit: str

    @property
    def assign(self) -> Callable[[Rollout, Any], None] | None:
        return getattr(self.module, "assign", None)

    @property
    def loss_defaults(self) -> dict[str, Any]:
        """The paper's loss settings: KL β, ratio level and aggregation."""
        return dict(self.module.LOSS_DEFAULTS)

    def check_env(self, env: Any, config: Any) -> None:
        check = getattr(self.module, "check_env", None)
        if check is not None:
            check(env, config)

    def env_kwargs(self, config: Any, env: str) -> dict[str, Any]:
        """Constructor arguments of `env` that the algorithm needs: the registry variant named by
        `config.variant` ("" = the environment's first single-agent variant, GRPO's baseline);
        nothing for algorithms without a `variant` field (the multi-agent workflow)."""
        variant = getattr(config, "variant", None)
        if variant is None:
            return {}
        from llm_marl_envs.registry import get as get_env

        table = dict(get_env(env).variants)
        if not variant:
            singles = [name for name in table if name != "mas"]
            if not singles:
                raise ValueError(f"{env} has no single-agent variant for {self.id}; pass --variant (one of {', '.join(table)})")
            variant = singles[0]
        if variant not in table:
            raise ValueError(f"{env} has no variant {variant!r}; use one of {', '.join(table)}")
        return dict(table[variant])


def get(algo_id: str) -> Algorithm:
    entry = ALGORITHMS.get(algo_id.strip().lower().replace("_", "-"))
    if entry is None:
        raise ValueError(f"unknown algorithm {algo_id!r}{did_you_mean(algo_id.lower(), ALGORITHMS)}; "
                         f"available: {', '.join(ALGORITHMS)}")
    mod = importlib.import_module(f"llm_marl.algorithms.{entry.module}")
    unit = getattr(mod, "ADVANTAGE_UNIT", "sample")
    if unit not in ("sample", "episode"):
        raise ValueError(f"{mod.__name__}.ADVANTAGE_UNIT must be 'sample' or 'episode', got {unit!r}")
    missing = set(LOSS_FIELDS) - set(getattr(mod, "LOSS_DEFAULTS", {}))
    if missing:
        raise ValueError(f"{mod.__name__}.LOSS_DEFAULTS must give the paper's {', '.join(sorted(missing))}")
    credit, key = getattr(mod, "credit", None), getattr(mod, "group_key", None)
    if not hasattr(mod, "assign") and (credit is None or key is None):
        raise ValueError(f"{mod.__name__} must define credit() and group_key(), or assign()")
    return Algorithm(entry.id, mod, mod.Config, mod.sampling_plan, credit, key, unit)


def assign_advantages(rollout: Rollout, algorithm: Algorithm | str, config: Any,
                      advantage: AdvantageConfig = AdvantageConfig(),
                      credit: Callable[[Rollout], dict[str, float]] | None = None) -> dict[str, float]:
    """Fill `credit`, `group_key` and `advantage` of every trainable sample; return metrics.

    Members of a group are samples (`advantage_unit="sample"`) or episodes ("episode"; every
    sample of an episode must get the same credit). Groups of one and zero-variance groups get
    advantage 0 and are counted (`advantage/singleton_groups`, `advantage/zero_std_groups`).
    `credit(rollout)` (e.g. `--credit shapley`) replaces the algorithm's credits after its group keys
    are set; members are then samples, and each group is split by role (an agent's credit is compared
    with the same agent's only).
    """
    algo = get(algorithm) if isinstance(algorithm, str) else algorithm
    episodes = rollout.episodes_by_id()
    samples = [s for s in rollout.samples if s.trainable]
    if algo.assign is not None:
        algo.assign(rollout, config)
    for s in samples:
        if algo.assign is None:
            s.credit = float(algo.credit(s, episodes.get(s.episode_id), config)) if credit is None else 0.0
            s.group_key = algo.group_key(s, config)
    out: dict[str, float] = credit(rollout) if credit is not None else {}
    unit = algo.advantage_unit if credit is None else "sample"
    if credit is not None:
        # A Shapley credit φ_i is agent i's own reward (Shapley-PRM Eq. 5): it is compared with the same
        # agent's φ on the query's other rollouts, never with another agent's (SHARP's Eq. 14 groups alike).
        for s in samples:
            s.group_key = (s.group_key, s.role)
    for s in samples:
        if not math.isfinite(s.credit):
            raise ValueError(f"{algo.id}: credit of sample {s.sample_id} ({s.role} on {s.task_id}) is {s.credit}"
                             + _nonfinite_steps(rollout, s.task_id))
    member_of: dict[Hashable, int] = {}
    member_credit: list[float] = []
    member_group: list[Hashable] = []
    index = []
    for s in samples:
        key = s.sample_id if unit == "sample" else (s.group_key, s.episode_id)
        if key not in member_of:
            member_of[key] = len(member_credit)
            member_credit.append(s.credit)
            member_group.append(s.group_key)
        elif member_credit[member_of[key]] != s.credit:
            raise ValueError(f"{algo.id}: samples of episode {s.episode_id} got different credits "
                             f"({member_credit[member_of[key]]} vs {s.credit}); an episode-level credit must be shared")
        index.append(member_of[key])
    adv, stats = group_advantages(torch.tensor(member_credit, dtype=torch.float64), member_group, advantage.eps, advantage.scale)
    for s, m in zip(samples, index):
        s.advantage = float(adv[m])
    credits = torch.tensor([s.credit for s in samples], dtype=torch.float64)
    out.update({f"advantage/{k}": v for k, v in stats.items()})
    out["advantage/members"] = float(len(member_credit))
    out["credit/mean"] = float(credits.mean()) if len(samples) else 0.0
    out["credit/std"] = float(credits.std(unbiased=False)) if len(samples) else 0.0
    out["samples/trainable"] = float(len(samples))
    return out


def _nonfinite_steps(rollout: Rollout, task_id: str) -> str:
    """Why a credit of `task_id` is not finite, when its environment said so (a credit reads its steps, on its own line
    of play or on its replays)."""
    steps = nonfinite_steps(rollout.samples, task_id)
    if not steps:
        return ""
    return (f": the environment returned non-finite values at {listed(steps)}. An environment's rewards and infos must be "
            "finite numbers")


def nonfinite_steps(samples: list[Sample], task_id: str | None = None) -> list[str]:
    """The steps (of `task_id`, or all) whose reward or numeric infos are NaN or inf, each as
    "planner's step 0 on plan_path/train/7/g0 (reward nan)"."""
    steps = []
    for t in samples:
        if task_id is not None and t.task_id != task_id:
            continue
        bad = [] if math.isfinite(t.reward) else [f"reward {t.reward}"]
        bad += [f"{k} {v}" for k, v in t.info.items()
                if isinstance(v, (int, float)) and not isinstance(v, bool) and not math.isfinite(v)]
        if bad:
            steps.append(f"{t.role}'s step {t.step} on {t.episode_id} ({', '.join(bad)})")
    return steps


def listed(steps: list[str]) -> str:
    """The first three of `steps`, and how many more."""
    return "; ".join(steps[:3]) + (f"; and {len(steps) - 3} more" if len(steps) > 3 else "")


__all__ = ["ALGORITHMS", "Algorithm", "AlgorithmEntry", "assign_advantages", "get", "listed", "nonfinite_steps"]
