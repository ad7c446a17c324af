"""Task shards for rollout workers, and the merge of their rollouts (pure; no Ray needed)."""

from __future__ import annotations

import dataclasses

from llm_marl.rollout import Rollout, Task


def shard_tasks(tasks: list[Task], workers: int) -> list[list[Task]]:
    """`tasks` in `workers` contiguous shards of whole tasks, sizes differing by at most one (empty shards dropped).

    A task's parallel episodes, tree forks and counterfactual replays are all played by the worker
    that holds it, so every group key (instance, agent, turn; a query's rollouts) stays in one shard.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    size, extra = divmod(len(tasks), workers)
    out, start = [], 0
    for w in range(workers):
        end = start + size + (w < extra)
        out.append(tasks[start:end])
        start = end
    return [shard for shard in out if shard]


def merge_rollouts(parts: list[Rollout]) -> Rollout:
    """One Rollout from the shards' rollouts, in shard order: sample and decision ids renumbered, stats summed.

    The samples are those one process would produce on all the tasks (for deterministic engines),
    but numbered shard by shard rather than wave by wave across every task.

    `waves` and `engine_calls` are the largest of any shard (the shards ran side by side), and the timings those of
    the slowest shard (longest `rollout_s`), the one the step waited for: summed over shards running side by side,
    they would outgrow the step's wall time.
    """
    samples, episodes, stats = [], [], {}
    for part in parts:
        offset, decisions = len(samples), 1 + max((s.decision_id for s in samples), default=-1)
        for s in part.samples:
            samples.append(dataclasses.replace(s, sample_id=s.sample_id + offset, decision_id=s.decision_id + decisions))
        for ep in part.episodes:
            episodes.append(dataclasses.replace(ep, sample_ids=[i + offset for i in ep.sample_ids]))
        for key, value in part.stats.items():
            stats[key] = max(stats.get(key, 0), value) if key in ("waves", "engine_calls") else stats.get(key, 0) + value
    slowest = max(parts, key=lambda part: part.timings.get("rollout_s", 0.0), default=None)
    return Rollout(samples=samples, episodes=episodes, stats=stats, timings=dict(slowest.timings) if slowest else {})
