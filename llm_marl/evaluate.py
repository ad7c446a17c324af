"""Evaluation: success rate and mean rewards of a policy on a split, through the rollout driver.

Greedy by default (the papers validate at temperature 0). Any engine works: `hf` or `vllm` with
trained adapters, `api` for an OpenAI-compatible endpoint, `scripted` in tests.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from llm_marl.engines.base import Engine, SamplingParams
from llm_marl.rollout import make_tasks, parallel, rollout


def evaluate(engine: Engine, env: str, *, n: int = 50, split: str = "test", seed: int = 0,
             env_kwargs: Mapping[str, Any] | None = None, sigma: Any = None,
             sampling: SamplingParams = SamplingParams(temperature=0.0, max_new_tokens=256)) -> dict[str, Any]:
    """Play `n` episodes of `env` on `split` (instance seeds seed..seed+n-1), one line of play each.

    Returns `success_rate`, `mean_return` per role (sum of the role's step rewards per episode),
    `mean_step_reward`, `parse_error_rate` per role, `mean_turns` and the counts behind them.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    tasks = make_tasks(env, range(seed, seed + n), split=split, env_kwargs=env_kwargs)
    out = rollout(tasks, parallel(1), engine, sigma=sigma, sampling=sampling)
    returns: dict[str, list[float]] = defaultdict(list)
    for episode in out.episodes:
        for role, value in episode.returns.items():
            returns[role].append(value)
    step_rewards: dict[str, list[float]] = defaultdict(list)
    parse_errors: dict[str, list[bool]] = defaultdict(list)
    turns: dict[str, int] = {}
    for sample in out.samples:
        step_rewards[sample.role].append(sample.reward)
        parse_errors[sample.role].append(sample.info.get("parse_error") is not None)
        turns[sample.episode_id] = max(turns.get(sample.episode_id, 0), sample.turn + 1)
    mean = lambda xs: sum(xs) / len(xs) if xs else 0.0  # noqa: E731
    return {
        "env": env,
        "split": split,
        "episodes": len(out.episodes),
        "success_rate": mean([float(ep.success) for ep in out.episodes]),
        "mean_return": {role: mean(v) for role, v in sorted(returns.items())},
        "mean_step_reward": {role: mean(v) for role, v in sorted(step_rewards.items())},
        "parse_error_rate": {role: mean([float(x) for x in v]) for role, v in sorted(parse_errors.items())},
        "mean_turns": mean(list(turns.values())),
        "replies": len(out.samples),
        "cut_episodes": int(out.stats.get("cut_episodes", 0)),
    }
