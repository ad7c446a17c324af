"""Rollout: sampling plans over `fork()`, the wave-batched driver, and the sample records.

    from llm_marl.rollout import make_tasks, rollout, tree, parallel
"""

from .driver import Outcome, Reply, RequestTag, Task, Turn, is_done, make_tasks, resolve_sigma, rollout
from .plans import Branch, Decision, Parallel, SamplingPlan, Tree, default_score, parallel, tree
from .samples import Episode, Rollout, Sample, batches_by_adapter, collate

__all__ = [
    "Branch", "Decision", "Episode", "Outcome", "Parallel", "Reply", "RequestTag", "Rollout", "Sample", "SamplingPlan", "Task", "Tree",
    "Turn", "batches_by_adapter", "collate", "default_score", "is_done", "make_tasks", "parallel", "resolve_sigma",
    "rollout", "tree",
]
