"""Scale-out on Ray core and torch.distributed: engine actors, rollout workers, trainer ranks.

    cluster = ClusterConfig(engines=2, rollout_workers=2, trainer_ranks=2)   # llm-marl train --engines 2 ...
    with ClusterRun(cluster, policy, engine_factory=..., trainer=TrainerSpec(...)) as scale:
        out = scale.rollout(tasks, plan, sigma, sampling)          # shards never split a task
        scale.update(out.samples, optim, loss, temperature, segment, rng)   # gradients all-reduced
        scale.engine.sync_adapters()                                # adapters to every engine actor

`ray` is an optional extra (`pip install -e '.[ray]'`) imported only when a cluster starts; the
rest of the package (configuration, task shards, rollout merging) imports without it.
"""

from __future__ import annotations

from typing import Any

from .config import ClusterConfig, ClusterError
from .shards import merge_rollouts, shard_tasks

INSTALL_HINT = "multi-process training needs Ray: pip install -e '.[ray]' (or pip install 'llm-marl[ray]')"

__all__ = ["INSTALL_HINT", "ClusterConfig", "ClusterError", "merge_rollouts", "require_ray", "shard_tasks"]


def require_ray() -> Any:
    """`import ray`, or one line naming the install command."""
    try:
        import ray
    except ImportError:
        raise ClusterError(INSTALL_HINT) from None
    return ray


def __getattr__(name: str) -> Any:
    # The Ray-side classes import lazily (their modules need nothing from Ray at import time either).
    if name == "ClusterRun":
        from .cluster import ClusterRun

        return ClusterRun
    if name in ("EngineActor", "EngineSpec", "RolloutWorker", "TrainerRank", "TrainerSpec"):
        from . import actors

        return getattr(actors, name)
    if name == "RayEnginePool":
        from .pool import RayEnginePool

        return RayEnginePool
    raise AttributeError(name)
