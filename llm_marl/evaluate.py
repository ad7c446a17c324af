"""Evaluation: success rate and mean rewards of a policy on a split, through the rollout driver.

Greedy by default (the papers validate at temperature 0). Any engine works: `hf` or `vllm` with
trained adapters, `api` for an OpenAI-compatible endpoint, `scripted` in tests.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import numpy as np

from llm_marl.engines.base import Engine, SamplingParams
from llm_marl.rollout import Task, make_tasks, parallel, rollout
from llm_marl_envs.core.instances import check_split


ALL = "all"
"""The split of `evaluate` that plays every row of a dataset once."""
GENERATED_N = 50
"""Episodes of a generated environment when `n` is None."""


def episode_tasks(env: str, n: int | None, split: str, seed: int = 0,
                  env_kwargs: Mapping[str, Any] | None = None, asked: str | None = "--n") -> list[Task]:
    """The episodes `evaluate` plays (one Task each); a ValueError of one line when they cannot be had.

    Generated environments: instance seeds seed..seed+n-1 of `split` (n = 50 when None; the first is
    drawn here, so a configuration without instances fails before any model). Environments
    backed by a dataset (`dataset_instances()` is not None) play distinct rows: `split="all"` every
    row once in the dataset's order (the first `n` with `n`), a named split `n` of its rows chosen
    by `seed` (all of them when `n` is None). Asking for more rows than there are is an error, never
    a silent repeat; `asked` is the flag that sets `n`, for the messages (None: the command has none,
    like `play`).
    """
    from llm_marl_envs.core.instances import split_of
    from llm_marl_envs.registry import get, make_raw

    name = get(env).name
    if split != ALL:
        check_split(split)
    if n is not None and n < 1:
        raise ValueError(f"{asked or 'n'} must be >= 1, got {n}")
    proto = make_raw(name, **dict(env_kwargs or {}))
    rows = proto.dataset_instances(None)
    if rows is None:
        if split == ALL:
            count = f" and pick how many episodes with {asked}" if asked else ""
            raise ValueError(f"{name} generates its instances, so --split all has no whole dataset to go through: use "
                             f"--split train, val or test{count} (a dataset option such as math's dataset=FILE makes "
                             "--split all possible)")
        n = GENERATED_N if n is None else n
        # The first episode drawn now: options whose generator has no instance fail before any model loads.
        proto.reset(seed=seed, options={"split": split})
        return make_tasks(name, range(seed, seed + n), split=split, env_kwargs=env_kwargs)
    chosen = list(rows) if split == ALL else proto.dataset_instances(split)
    wanted = len(chosen) if n is None else n
    other = "" if split == ALL or asked != "--n" else ", --split all (every row once)"
    if not chosen:
        raise ValueError(f"{name}'s dataset has {len(rows)} rows, none of them in the {split!r} split: use "
                         + ("--split all (every row once), another split, or " if asked == "--n" else "") + "a larger dataset")
    if wanted > len(chosen):
        where = "" if split == ALL else f", {len(chosen)} of them in the {split!r} split"
        raise ValueError(f"{name}'s dataset has {len(rows)} rows{where}, and {asked} asks for {wanted} episodes: pass "
                         f"{asked} {len(chosen)} or less{other}, or use a larger dataset")
    if split != ALL:
        order = np.random.default_rng(seed).permutation(len(chosen))[:wanted]
        chosen = [chosen[int(i)] for i in order]
    return [Task(task_id=f"{name}/{split}/{i}", make_env=proto.fork, seed=seed + i,
                 options={"split": split_of(inst.key()) if split == ALL else split, "instance": inst})
            for i, inst in enumerate(chosen[:wanted])]


def check_split_problems(env: str, split: str, seed: int, env_kwargs: Mapping[str, Any] | None, fix: str) -> None:
    """Refuse, before any episode, a `split` without problems (a dataset with no row in it; for a generated
    environment, options whose generator has none: its first draw), in one line ending in `fix`, the command's own
    way out: the environment's advice (another split, options={'instance': ...}) names what no command has a flag for."""
    try:
        episode_tasks(env, None, split, seed, env_kwargs, asked=None)
    except ValueError as exc:
        raise ValueError(f"{exc}{fix}") from None


def evaluate(engine: Engine, env: str, *, n: int | None = None, split: str = "test", seed: int = 0,
             env_kwargs: Mapping[str, Any] | None = None, sigma: Any = None,
             sampling: SamplingParams = SamplingParams(temperature=0.0, max_new_tokens=256),
             on_wave: Any = None) -> dict[str, Any]:
    """Play `n` episodes of `env` on `split`, one line of play each (`episode_tasks` says which:
    instance seeds seed..seed+n-1, or distinct dataset rows; `split="all"` plays every row of a
    dataset once).

    What each number means (the README's "Scores" section says the same):
    - `success_rate`: fraction of episodes that solved the task (the environment's `success`).
    - `mean_reward[role]`: the role's mixed step reward (what training maximises), averaged over
      all its replies.
    - `final_team_reward`: the team reward of each episode's last step, averaged over episodes.
    - `mean_return[role]`: the sum of the role's step rewards in an episode, averaged; it grows
      with the number of turns taken, so compare it only between runs with the same turn budget.
    - `format_error_rate[role]`: replies that ended normally but did not follow the answer format;
      `truncated_rate[role]`: replies cut off at `max_new_tokens` (not counted as format errors);
      `context_overflow_rate[role]`: prompts longer than the model's context window, left without a reply.
    - `nonfinite_rewards[role]`: replies whose reward, team_reward or local_reward was NaN or inf (an environment
      bug); the means above are of the finite values, and a role with none has no `mean_reward` or `mean_return`.

    `on_wave` is the rollout's progress callback (`llm_marl.rollout.rollout`).

    When the engine fails (an API error after its retries, say) after some episodes ended, its error is raised
    with `.partial_result`: these scores of the episodes that ended, with "partial": {"episodes", "of", "error"}
    (how many of how many were played, and the error). They are the episodes that ended first (the shorter ones,
    in an environment of several turns), not a sample of all.
    """
    from llm_marl_envs.registry import get

    tasks = episode_tasks(env, n, split, seed, env_kwargs)
    env = get(env).name  # the result names the environment as play and train do, not by the alias given
    try:
        out = rollout(tasks, parallel(1), engine, sigma=sigma, sampling=sampling, on_wave=on_wave)
    except Exception as exc:
        played = getattr(exc, "rollout_so_far", None)
        if played is not None and played.episodes:
            exc.partial_result = {**_scores(played, env, split),  # type: ignore[attr-defined]
                                  "partial": {"episodes": len(played.episodes), "of": len(tasks), "error": str(exc)}}
        raise
    return _scores(out, env, split)


def _scores(out: Any, env: str, split: str) -> dict[str, Any]:
    """`evaluate`'s result for the episodes of rollout `out` (the replies of lines of play that did not end are left out)."""
    ended = {sid for episode in out.episodes for sid in episode.sample_ids}
    # A NaN or inf reward would make its mean so and erase the score: the means are of the finite values, and
    # nonfinite_rewards counts the replies left out, as the trainer's step metrics do (reward/nonfinite/<role>).
    returns: dict[str, list[float]] = defaultdict(list)
    for episode in out.episodes:
        for role, value in episode.returns.items():
            if math.isfinite(value):
                returns[role].append(value)
    step_rewards: dict[str, list[float]] = defaultdict(list)
    format_errors: dict[str, list[float]] = defaultdict(list)
    truncated: dict[str, list[float]] = defaultdict(list)
    overflow: dict[str, list[float]] = defaultdict(list)
    turns: dict[str, int] = {}
    nonfinite: dict[str, int] = defaultdict(int)
    for sample in out.samples:
        if sample.sample_id not in ended:
            continue
        cut, no_room = sample.finish_reason == "length", sample.finish_reason == "context"
        if math.isfinite(sample.reward):
            step_rewards[sample.role].append(sample.reward)
        rewards = (sample.reward, float(sample.info.get("team_reward", 0.0)), float(sample.info.get("local_reward", 0.0)))
        nonfinite[sample.role] += not all(map(math.isfinite, rewards))
        truncated[sample.role].append(float(cut))
        overflow[sample.role].append(float(no_room))
        format_errors[sample.role].append(float(sample.info.get("parse_error") is not None and not cut and not no_room))
        turns[sample.episode_id] = max(turns.get(sample.episode_id, 0), sample.turn + 1)
    final_team = [float(out.samples[ep.sample_ids[-1]].info.get("team_reward", 0.0)) for ep in out.episodes if ep.sample_ids]
    final_team = [x for x in final_team if math.isfinite(x)]
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
        "context_overflow_rate": {role: mean(v) for role, v in sorted(overflow.items())},
        "nonfinite_rewards": {role: count for role, count in sorted(nonfinite.items()) if count},
        "mean_turns": mean(list(turns.values())),
        "replies": len(ended),
        "cut_episodes": int(out.stats.get("cut_episodes", 0)),
    }
