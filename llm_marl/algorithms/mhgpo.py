"""MHGPO: multi-agent heterogeneous group policy optimisation (parameter-shared MAS, no critic).

Paper: G. Chen et al., "Heterogeneous Group-Based Reinforcement Learning for LLM-based Multi-Agent
Systems": Eq. 4-6, Alg. 1-5.

- Sampling plan: `fork_on(G, A_i)` (Alg. 2): one reply per agent until A_i's first turn, G replies
  there (one request), one reply per agent on each of the G lines afterwards. `--sampling`:
  `is` runs fork_on at every agent and keeps only the G replies at each fork point (homogeneous
  groups, Alg. 4); `fof` forks on the entry agent (Alg. 3); `rr` draws the fork agent per query
  from `--fork-probs` (Alg. 5; paper: (0.7, 0.1, 0.2) for rewriter, reranker, answerer).
- Credit (Eq. 4): the rollout forms a tree (a prefix shared by the G lines). A final output's
  shared reward is the episode's terminal team reward (F1 on MASS); every other output's is the
  mean of its direct successors' shared rewards, i.e. of the next step on each line through it.
  R_{k,i} = R^shared_{k,i} + R^spe_k, the agent's own penalty at its step (`penalty` in infos).
- Group identifier (Eq. 5): outputs at and after the fork point are grouped by (query, fork agent,
  agent, k-th turn of that agent): the fork agent's G outputs share one input (homogeneous), later
  agents' outputs have different inputs (heterogeneous). Outputs before the fork point are single;
  RR regroups them across the batch with the other single outputs of the same agent and fork point,
  in shuffled groups of G (Alg. 5, and the text: "grouped with ⌊p_i·batch_size⌋ - 1 other rollouts").
- Loss (Eq. 6): the clipped surrogate with 1/|o| per output, averaged over outputs
  (`--loss-agg seq-mean`), minus β·KL to the reference with β = 0.001 (Table 2); both are the
  defaults of `llm-marl train --algo mhgpo`. One shared adapter (parameter sharing) is the default
  σ; `--policy per-role` also works.

Deviations from the paper:
1. Eq. 6 weighs agent k's outputs by 1/(n·G_k); we average all outputs equally. Identical when every
   agent has the same number of outputs (IS, and FoF/RR on a chain where each agent acts once per
   line), different for RR's regrouped singles.
2. Alg. 5 leaves the last |P_single| mod G singles unassigned; we add them to the last full group of
   their (agent, fork point) pool, or keep them as a group of their own when the pool is smaller than G
   (a group of one gets advantage 0 and is counted).
3. The fork point is the agent's *first* turn (Alg. 2); on environments where agents act more than
   once, k (the agent's turn index) is part of the group identifier so turns are not mixed.
4. RR's draw of the fork agent and the regrouping shuffle are seeded by the task ids, so a resumed run
   repeats them.
"""

from __future__ import annotations

import zlib
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from llm_marl.config import opt
from llm_marl.rollout import Branch, Decision, Rollout, Sample, SamplingPlan
from llm_marl.rollout.replay import episode_value

ADVANTAGE_UNIT = "sample"
LOSS_DEFAULTS = {"kl_beta": 0.001, "ratio_level": "token", "loss_agg": "seq-mean"}
"""Eq. 6: token ratios, 1/|o_{k,i}| per output, mean over outputs, β = 0.001 (Table 2)."""
PAPER_FORK_PROBS = (0.7, 0.1, 0.2)
Sampling = Literal["is", "fof", "rr"]


@dataclass(frozen=True)
class Config:
    """MHGPO settings (paper defaults: G = 4, RR probabilities (0.7, 0.1, 0.2))."""

    G: int = opt(4, "MHGPO group size: replies drawn at the fork point (paper: 4)")
    sampling: Sampling = opt("fof", "MHGPO rollout sampling: is (fork at every agent, homogeneous groups only), fof (fork on the first agent), rr (fork agent drawn per query)")
    fork_probs: str = opt("", "RR fork probability of each role in turn order, comma-separated (default: 0.7,0.1,0.2 for three roles, else uniform)")
    loss_segment: Literal["sample", "episode"] = opt("sample", "loss normaliser unit: each output (Eq. 6: 1/|o_{k,i}|)")

    def __post_init__(self) -> None:
        if self.G < 2:
            raise ValueError(f"MHGPO needs G >= 2 replies at the fork point to compare (got G={self.G}); use --G 4")
        if self.sampling not in ("is", "fof", "rr"):
            raise ValueError(f"--sampling must be is, fof or rr, got {self.sampling!r}")
        if self.fork_probs:
            probs = self.probabilities_given()
            if not all(0 <= p <= 1 for p in probs) or abs(sum(probs) - 1.0) > 1e-6:  # NaN fails too
                raise ValueError(f"--fork-probs must be non-negative and sum to 1, got {self.fork_probs!r}")

    def probabilities_given(self) -> tuple[float, ...]:
        try:
            return tuple(float(x) for x in self.fork_probs.split(","))
        except ValueError:
            raise ValueError(f"--fork-probs must be comma-separated numbers such as 0.7,0.1,0.2, got {self.fork_probs!r}") from None

    def probabilities(self, roles: list[str]) -> tuple[float, ...]:
        """RR's categorical distribution over `roles` (turn order)."""
        if self.fork_probs:
            probs = self.probabilities_given()
            if len(probs) != len(roles):
                raise ValueError(f"--fork-probs has {len(probs)} values for {len(roles)} roles ({', '.join(roles)}); give one per role")
            return probs
        return PAPER_FORK_PROBS if len(roles) == 3 else tuple(1.0 / len(roles) for _ in roles)


def _rng(*keys: str) -> np.random.Generator:
    return np.random.default_rng([zlib.crc32(k.encode()) for k in keys])


class ForkOn(SamplingPlan):
    """MHGPO's fork_on (Alg. 2) at the fork agents `config.sampling` picks for each query."""

    name = "fork_on"

    def __init__(self, config: Config):
        self.config = config

    def fork_agents(self, task: Any, env: Any) -> list[str]:
        roles = list(env.possible_agents)
        if self.config.sampling == "is":
            return roles
        if self.config.sampling == "fof":
            return [env.agent_selection]
        probs = np.asarray(self.config.probabilities(roles), dtype=float)
        return [roles[int(_rng("rr", task.task_id).choice(len(roles), p=probs / probs.sum()))]]

    def start(self, task: Any, env: Any) -> list[Branch]:
        return [Branch(env=env.fork(), task=task, episode_id=f"{task.task_id}/fork:{agent}", data={"fork": agent, "forked": False})
                for agent in self.fork_agents(task, env)]

    def decide(self, branch: Branch, agent: str, observation: dict[str, Any]) -> Decision:
        at_fork = agent == branch.data["fork"] and not branch.data["forked"]
        return Decision(n=self.config.G if at_fork else 1)

    def expand(self, turn: Any) -> list[Branch]:
        branch = turn.branch
        if turn.agent == branch.data["fork"] and not branch.data["forked"]:
            branch.data["forked"] = True  # copied into the G forks
            outcomes = [turn.step(c, fork=True, episode_id=f"{branch.episode_id}/g{c}") for c in range(len(turn.replies))]
            phase = "fork"
        else:
            outcomes = [turn.step(0, fork=False)]
            phase = "after" if branch.data["forked"] else "prefix"
        for o in outcomes:
            o.sample.plan_info = {"fork": branch.data["fork"], "phase": phase}
            if self.config.sampling == "is" and phase != "fork":
                o.sample.trainable = False  # IS keeps only the homogeneous groups at the fork points
        return [o.branch for o in outcomes]


def check_env(env: Any, config: Config) -> None:
    # RR reads --fork-probs per query, in the first rollout: a count that does not match the roles is said
    # before the model loads, not as a traceback in step 1.
    if config.sampling == "rr":
        config.probabilities(list(env.possible_agents))


def sampling_plan(config: Config) -> SamplingPlan:
    return ForkOn(config)


# ---------------------------------------------------------------------------- Eq. 4
def shared_rewards(rollout: Rollout) -> dict[int, float]:
    """R^shared of every sample on a real episode (Eq. 4, Aggr = mean over direct successors)."""
    successors: dict[int, set[int]] = defaultdict(set)
    leaf_value: dict[int, float] = {}
    for ep in rollout.real_episodes:
        path = ep.sample_ids
        for a, b in zip(path, path[1:]):
            successors[a].add(b)
        if path:
            leaf_value[path[-1]] = episode_value(rollout, ep)
    memo: dict[int, float] = {}
    on_paths = {sid for ep in rollout.real_episodes for sid in ep.sample_ids}
    for sid in sorted(on_paths, reverse=True):  # a successor is always recorded after its predecessor
        kids = successors.get(sid)
        memo[sid] = float(np.mean([memo[k] for k in kids])) if kids else leaf_value[sid]
    return memo


def turn_indices(rollout: Rollout) -> dict[int, int]:
    """k of each sample: how many earlier turns its agent took on its line of play."""
    out: dict[int, int] = {}
    for ep in rollout.real_episodes:
        count: dict[str, int] = defaultdict(int)
        for sid in ep.sample_ids:
            role = rollout.samples[sid].role
            out.setdefault(sid, count[role])
            count[role] += 1
    return out


def assign(rollout: Rollout, config: Config) -> None:
    """Eq. 4 credits and Eq. 5 group identifiers (with RR's batch-level regrouping of single outputs):
    both need the whole rollout tree, so MHGPO has no per-sample credit()/group_key()."""
    shared = shared_rewards(rollout)
    k_of = turn_indices(rollout)
    singles: dict[tuple[str, str, int], list[Sample]] = defaultdict(list)
    for s in rollout.samples:
        if not s.trainable:
            continue
        if s.sample_id not in shared:
            raise ValueError(f"sample {s.sample_id} ({s.episode_id}) is on no finished episode; cannot back-propagate its reward")
        s.credit = shared[s.sample_id] + float(s.info.get("penalty", 0.0))
        fork = s.plan_info.get("fork", "")
        if s.plan_info.get("phase") == "prefix":
            singles[(fork, s.role, k_of[s.sample_id])].append(s)
        else:
            s.group_key = (s.task_id, fork, s.role, k_of[s.sample_id])
    for pool_key, pool in sorted(singles.items()):
        rng = _rng("regroup", *pool_key[:2], str(pool_key[2]), *sorted(s.task_id for s in pool))
        order = [pool[i] for i in rng.permutation(len(pool))]
        chunks = max(1, len(order) // config.G)
        for j, s in enumerate(order):
            s.group_key = ("regrouped", *pool_key, min(j // config.G, chunks - 1))
