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
             sampling: SamplingParams = SamplingParams(temperature=0.0, max_new_tokens=256),
             on_wave: Any = None) -> dict[str, Any]:
    """Play `n` episodes of `env` on `split` (instance seeds seed..seed+n-1), one line of play each.

    What each number means (the README's "Scores" section says the same):
    - `success_rate`: fraction of episodes that solved the task (the environment's `success`).
    - `mean_reward[role]`: the role's mixed step reward (what training maximises), averaged over
      all its replies.
    - `final_team_reward`: the team reward of each episode's last step, averaged over episodes.
    - `mean_return[role]`: the sum of the role's step rewards in an episode, averaged; it grows
      with the number of turns taken, so compare it only between runs with the same turn budget.
    - `format_error_rate[role]`: replies that ended normally but did not follow the answer format;
      `truncated_rate[role]`: replies cut off at `max_new_tokens` (not counted as format errors).

    `on_wave` is the rollout's progress callback (`llm_marl.rollout.rollout`).
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    tasks = make_tasks(env, range(seed, seed + n), split=split, env_kwargs=env_kwargs)
    out = rollout(tasks, parallel(1), engine, sigma=sigma, sampling=sampling, on_wave=on_wave)
    returns: dict[str, list[float]] = defaultdict(list)
    for episode in out.episodes:
        for role, value in episode.returns.items():
            returns[role].append(value)
    step_rewards: dict[str, list[float]] = defaultdict(list)
    format_errors: dict[str, list[float]] = defaultdict(list)
    truncated: dict[str, list[float]] = defaultdict(list)
    turns: dict[str, int] = {}
    for sample in out.samples:
        cut = sample.finish_reason == "length"
        step_rewards[sample.role].append(sample.reward)
        truncated[sample.role].append(float(cut))
        format_errors[sample.role].append(float(sample.info.get("parse_error") is not None and not cut))
        turns[sample.episode_id] = max(turns.get(sample.episode_id, 0), sample.turn + 1)
    final_team = [float(out.samples[ep.sample_ids[-1]].info.get("team_reward", 0.0)) for ep in out.episodes if ep.sample_ids]
    mean = lambda xs: sum(xs) / len(xs) if xs else 0.0  # noqa: E731
    return {
        "env": env,
        "split": split,
        "episodes": len(out.episodes),
        "success_rate": mean([float(ep.success) for ep in out.episodes]),
        "mean_reward": {role: mean(v) for role, v in sorted(step_rewards.items())},
        "final_team_reward": mean(final_team),
        "mean_return": {role: mean(v) for role, v in sorted(returns.items())},
        "format_error_rate": {role: mean(v) for role, v in sorted(format_errors.items())},
        "truncated_rate": {role: mean(v) for role, v in sorted(truncated.items())},
        "mean_turns": mean(list(turns.values())),
        "replies": len(out.samples),
        "cut_episodes": int(out.stats.get("cut_episodes", 0)),
    }
