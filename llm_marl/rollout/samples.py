"""Records a rollout produces: one `Sample` per generated reply, one `Episode` per finished line of play.

A sample carries what the update needs (prompt ids, response ids, the log-probs it was sampled
with, the adapter that produced it) and what the algorithm needs to score it (role, turn, the
environment's reward breakdown read right after its step). The algorithm fills in `credit`,
`group_key` and `advantage` afterwards (`llm_marl.algorithms.assign_advantages`).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

Message = dict[str, str]


@dataclass
class Sample:
    """One generated reply of one role at one decision point."""

    sample_id: int
    """Index in `Rollout.samples`."""
    task_id: str
    """The environment instance (task) this sample belongs to: the `e` of AT-GRPO's group key."""
    episode_id: str
    """The line of play it was generated on (`<task_id>/g<i>` for parallel, `<task_id>` for tree)."""
    decision_id: int
    """The decision point: every candidate drawn from one observation shares it (one request, n=K)."""
    candidate: int
    """Index of this reply among the candidates of its decision point (0..n-1)."""
    role: str
    turn: int
    """The environment's turn index from the observation (shared by the roles acting in one turn)."""
    step: int
    """Number of agent steps taken on this line of play before this one (0 for the first reply)."""
    adapter: str | None
    messages: list[Message]
    """The chat the role saw (the prompt)."""
    text: str
    """The reply the environment read (without a thinking model's reasoning, which `reasoning` keeps)."""
    prompt_ids: list[int]
    response_ids: list[int]
    old_logprobs: list[float]
    """log π_old(token) of each response token, as sampled (the trainer may recompute them)."""
    finish_reason: str = "stop"
    reward: float = 0.0
    """The environment's own reward for this step (`rewards[role]`, the paper's mixed reward)."""
    info: dict[str, Any] = field(default_factory=dict)
    """`infos[role]` right after this step: team_reward, local_reward, local_terms, mask, ..."""
    selected: bool = True
    """False for tree candidates that lost the argmax (their fork was dropped)."""
    trainable: bool = True
    """False for replies that were not sampled from a policy (fixed/replayed text)."""
    plan_info: dict[str, Any] = field(default_factory=dict)
    """What the sampling plan noted about this reply (e.g. MHGPO's fork point and phase)."""
    credit: float = math.nan
    """The scalar the algorithm assigns (before group normalisation)."""
    group_key: Hashable | None = None
    advantage: float = 0.0
    reasoning: str = ""
    """A thinking model's reasoning before the reply ("" without one); its tokens are in `response_ids`."""

    @property
    def num_response_tokens(self) -> int:
        return len(self.response_ids)


@dataclass
class Episode:
    """A finished line of play: the selected path from reset to the end."""

    episode_id: str
    task_id: str
    sample_ids: list[int]
    """Samples along the path, in order (for tree: the selected candidates only)."""
    final_infos: dict[str, dict[str, Any]]
    """`infos` of every agent when the episode ended (MATPO reads acc/fmt here)."""
    returns: dict[str, float]
    """Sum of each role's step rewards along the path."""
    success: bool
    steps: int
    cut: bool = False
    """True when the driver stopped it at `max_steps` before the environment ended it."""
    error: str | None = None
    """The environment error that ended this line of play early (see `Branch.error`), else None."""
    counterfactual: Any = None
    """For a replay (`llm_marl.rollout.replay`): the `Counterfactual` it plays; None for a real episode."""


@dataclass
class Rollout:
    samples: list[Sample]
    episodes: list[Episode]
    stats: dict[str, float] = field(default_factory=dict)
    """waves, engine_calls, requests, completions, samples, episodes, cut_episodes."""
    timings: dict[str, float] = field(default_factory=dict)
    """Wall seconds of the rollout (`rollout_s`) and of its parts: engine calls (`generate_s`),
    environment work (`env_s`) and tool waits (`tool_s`, sandboxed programs and searches, prefetched
    ones included); the rest is the driver's own bookkeeping. Empty for a rollout merged from
    rollout workers' shards."""

    def episode(self, episode_id: str) -> Episode:
        for ep in self.episodes:
            if ep.episode_id == episode_id:
                return ep
        raise KeyError(episode_id)

    def episodes_by_id(self) -> dict[str, Episode]:
        return {ep.episode_id: ep for ep in self.episodes}

    @property
    def real_episodes(self) -> list[Episode]:
        """Episodes that were played, not counterfactual replays (metrics and success rates use these)."""
        return [ep for ep in self.episodes if ep.counterfactual is None]


def batches_by_adapter(samples: Iterable[Sample], trainable_only: bool = True) -> dict[str | None, list[Sample]]:
    """Per-policy batches B_m = ∪_{i: σ(i)=m} D_i (AT-GRPO Eq. 2): samples routed by adapter."""
    out: dict[str | None, list[Sample]] = {}
    for s in samples:
        if trainable_only and not s.trainable:
            continue
        out.setdefault(s.adapter, []).append(s)
    return out


SEGMENTS = ("sample", "episode", "episode-agent")
"""Loss segments: each reply; each rollout (MATPO); each agent's replies in one rollout (SHARP Eq. 15)."""


def collate(samples: list[Sample], segment: str = "sample", pad_id: int = 0) -> dict[str, Any]:
    """Pad a batch for the loss (`llm_marl.loss`). B = len(samples), T = longest response.

    Returns tensors: `prompt_ids` list[list[int]] (left as lists, the policy builds inputs),
    `response_ids` [B, T] long, `response_mask` [B, T] float (1 on generated tokens),
    `old_logprobs` [B, T] float, `advantages` [B] float, `segment_ids` [B] long (one id per sample,
    per episode with `segment="episode"`: MATPO's per-rollout token normaliser, or per (episode,
    agent) with `"episode-agent"`: SHARP's trajectory-level ratio of one agent).
    """
    import torch

    if segment not in SEGMENTS:
        raise ValueError(f"segment must be one of {', '.join(SEGMENTS)}, got {segment!r}")
    width = max((len(s.response_ids) for s in samples), default=0)
    ids = torch.full((len(samples), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(samples), width))
    old = torch.zeros((len(samples), width))
    seg_index: dict[Hashable, int] = {}
    seg = []
    for b, s in enumerate(samples):
        n = len(s.response_ids)
        if len(s.old_logprobs) != n:
            raise ValueError(f"sample {s.sample_id}: {n} response tokens but {len(s.old_logprobs)} old log-probs")
        ids[b, :n] = torch.tensor(s.response_ids, dtype=torch.long)
        mask[b, :n] = 1.0
        old[b, :n] = torch.tensor(s.old_logprobs, dtype=torch.float32)
        key = {"sample": s.sample_id, "episode": s.episode_id, "episode-agent": (s.episode_id, s.role)}[segment]
        seg.append(seg_index.setdefault(key, len(seg_index)))
    return {
        "prompt_ids": [list(s.prompt_ids) for s in samples],
        "response_ids": ids,
        "response_mask": mask,
        "old_logprobs": old,
        "advantages": torch.tensor([s.advantage for s in samples], dtype=torch.float32),
        "segment_ids": torch.tensor(seg, dtype=torch.long),
    }
