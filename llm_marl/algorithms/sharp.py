"""SHARP: Shapley-style marginal credit for planner-worker tool-integrated planning.

Paper: "SHARP": Eq. 7-15, Alg. 1, appendix C
(α = β = 0.9, γ = 0.1, ε = 0.2, δ = 1e-6) and D (credit sparsification p).

- Sampling plan: `parallel(G)` rollouts of the planner and the workers it calls, plus one
  counterfactual replay per evaluated worker m: the episode replayed from just before m's first
  turn with m's output masked (`masked_reply`: a summary with no content), the planner and later
  workers regenerating (`llm_marl.rollout.replay`). A replay starts at m's first turn and runs
  alongside the rest of the trajectory, in the same engine waves; `rollout/counterfactual_completions`
  counts its generations.
- Credit of agent m on trajectory τ_i (Alg. 1):
    R^b = R_acc(τ_i) (Eq. 7, broadcast), R^tool = valid calls / calls of m (Eq. 9, 0 without calls),
    credit_m = R_acc(τ_i) - R_acc(τ_i without m) (Eq. 11-12) for each evaluated worker, 0 for workers
    left out by sparsification (appendix D: each worker is evaluated with probability p),
    R^mc_planner = λ · mean_m max(credit_m, 0) (Eq. 13),
    R̄ = α·R^b + β·R^mc + γ·R^tool, shared by all of m's replies in τ_i.
- Group (Eq. 14): agent identity m over the G trajectories of a query: key (query, role), one member
  per (trajectory, agent).
- Loss (Eq. 15): one trajectory-level ratio per (trajectory, agent) (`--ratio-level sequence` with
  `episode-agent` loss segments), clipped, averaged (`seq-mean`); the defaults of `llm-marl train --algo sharp`.

Environment contract: a `planner` role that delegates to the other roles (workers) and whose final
step has `team_reward` = acc; deep_search's planner infos give the tool scores (`fmt_p`, and
`workers[*].fmt`); elsewhere R^tool is the mean `local_reward` of the agent's steps.

Deviations from the paper:
1. J_SHARP weighs each (trajectory, agent) term by 1/(G·|{0} ∪ M_i|); we average the terms of a
   minibatch equally.
2. Worker identities are the environment's roles (`worker_0` is the first subtask of every trajectory).
3. The replays regenerate with the current policy at the rollout temperature (the paper says only
   that other agents and their interactions are preserved); before the masked turn they are the
   original trace exactly.
4. λ (planner scale, Eq. 13) is not given in the paper; default 1.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from llm_marl.config import opt
from llm_marl.rollout import Episode, Rollout, Sample, SamplingPlan, parallel
from llm_marl.rollout.replay import Replays, episode_value, players_of, replay_values

ADVANTAGE_UNIT = "episode"
"""One member per (trajectory, agent); all of an agent's replies in a trajectory share it."""
LOSS_DEFAULTS = {"kl_beta": 0.0, "ratio_level": "sequence", "loss_agg": "seq-mean"}
"""Eq. 15: one trajectory-level ratio per (trajectory, agent) segment, averaged over segments; no KL term."""


@dataclass(frozen=True)
class Config:
    """SHARP settings (appendix C: α = β = 0.9, γ = 0.1, 8 rollouts per query)."""

    G: int = opt(4, "SHARP trajectories per query (paper: 8)")
    alpha: float = opt(0.9, "SHARP weight α of the broadcast accuracy reward (Eq. 7)")
    beta: float = opt(0.9, "SHARP weight β of the marginal credit reward (Eq. 11-13)")
    gamma: float = opt(0.1, "SHARP weight γ of the tool process reward (Eq. 9)")
    planner_scale: float = opt(1.0, "SHARP λ of the planner's credit, λ·mean(max(credit, 0)) (Eq. 13; not given in the paper)")
    sparsify_p: float = opt(1.0, "SHARP credit sparsification p: probability that a worker gets a counterfactual replay (appendix D)")
    planner_role: str = opt("planner", "the role that delegates subtasks to the workers")
    baseline: Literal["masked", "noop", "reference"] = opt("masked", "what replaces the ablated worker in replays (paper: masked)")
    loss_segment: Literal["sample", "episode", "episode-agent"] = opt("episode-agent", "loss segment: one trajectory-level ratio per (trajectory, agent) (Eq. 15)")

    def __post_init__(self) -> None:
        if self.G < 2:
            raise ValueError(f"SHARP needs G >= 2 trajectories per query to compare (got G={self.G}); use --G 4")
        if not 0.0 <= self.sparsify_p <= 1.0:
            raise ValueError(f"--sparsify-p must be in [0, 1], got {self.sparsify_p}")
        weights = {"--alpha": self.alpha, "--beta": self.beta, "--gamma": self.gamma, "--planner-scale": self.planner_scale}
        if not all(map(math.isfinite, weights.values())):  # a NaN credit stopped step 1 with a traceback
            raise ValueError("SHARP's weights must be finite numbers, got " + ", ".join(f"{k} {v}" for k, v in weights.items()))


def check_env(env: Any, config: Config) -> None:
    roles = list(env.possible_agents)
    delegating = getattr(env.unwrapped, "delegating_role", None)
    if delegating is None or len(roles) < 2:
        raise ValueError(f"SHARP needs a planner that delegates subtasks to workers; {env.metadata.get('name', 'this environment')} "
                         f"(roles {', '.join(roles)}) has none. Use deep_search_v3 with mode='mas'.")
    if delegating != config.planner_role:
        raise ValueError(f"the delegating role here is {delegating!r}, not {config.planner_role!r}: pass --planner-role {delegating}")


def is_worker(role: str, config: Config) -> bool:
    return role != config.planner_role


def evaluated(episode_id: str, worker: str, p: float) -> bool:
    """Sparsification draw (appendix D), seeded by the trajectory and worker so a resume repeats it."""
    if p >= 1.0:
        return True
    if p <= 0.0:
        return False
    return bool(np.random.default_rng([zlib.crc32(episode_id.encode()), zlib.crc32(worker.encode())]).random() < p)


def sampling_plan(config: Config) -> SamplingPlan:
    def choose(episode_id: str, players: list[str]) -> list[frozenset[str]]:
        return [frozenset({m}) for m in players if is_worker(m, config) and evaluated(episode_id, m, config.sparsify_p)]

    # Eager: a worker's replay starts at its first turn and runs alongside the rest of the trajectory.
    return Replays(parallel(config.G), choose, baseline=config.baseline, track=lambda role: is_worker(role, config), eager=True)


def tool_reward(rollout: Rollout, episode: Episode, role: str, config: Config) -> float:
    """R^tool (Eq. 9): valid tool calls / tool calls of `role` on the trajectory; 0 without calls."""
    final = episode.final_infos.get(config.planner_role, {})
    if "workers" in final and "fmt_p" in final:  # deep_search's records
        if role == config.planner_role:
            return float(final["fmt_p"])
        runs = [w for w in final["workers"] if w.get("agent") == role]
        return float(np.mean([w["fmt"] for w in runs])) if runs else 0.0
    values = [float(rollout.samples[s].info.get("local_reward", 0.0)) for s in episode.sample_ids if rollout.samples[s].role == role]
    return float(np.mean(values)) if values else 0.0


def agent_rewards(rollout: Rollout, episode: Episode, config: Config,
                  values: dict[tuple[str, frozenset[str]], float] | None = None) -> dict[str, dict[str, float]]:
    """{role: {"b", "mc", "tool", "credit", "total"}} for every agent of a real trajectory (Alg. 1 lines 5-9)."""
    values = replay_values(rollout) if values is None else values
    acc = episode_value(rollout, episode)
    players = players_of(rollout, episode)
    workers = [m for m in players if is_worker(m, config)]
    credit = {m: acc - values[(episode.episode_id, frozenset({m}))] if (episode.episode_id, frozenset({m})) in values else 0.0
              for m in workers}
    out = {}
    for m in players:
        if is_worker(m, config):
            mc = credit[m]
        else:
            mc = config.planner_scale * float(np.mean([max(c, 0.0) for c in credit.values()])) if workers else 0.0
        tool = tool_reward(rollout, episode, m, config)
        out[m] = {"b": acc, "mc": mc, "tool": tool, "credit": credit.get(m, float("nan")),
                  "total": config.alpha * acc + config.beta * mc + config.gamma * tool}
    return out


def group_key(sample: Sample, config: Config) -> Hashable:
    """Eq. 14: statistics per agent identity m over the query's G trajectories."""
    return (sample.task_id, sample.role)


def assign(rollout: Rollout, config: Config) -> None:
    """Alg. 1 credits of every trainable reply (they need the replays, so there is no per-sample credit())."""
    values = replay_values(rollout)
    by_id = rollout.episodes_by_id()
    table: dict[str, dict[str, dict[str, float]]] = {}
    for s in rollout.samples:
        if not s.trainable:
            continue
        if s.episode_id not in by_id:
            raise ValueError(f"sample {s.sample_id} is on no finished trajectory ({s.episode_id})")
        if s.episode_id not in table:
            table[s.episode_id] = agent_rewards(rollout, by_id[s.episode_id], config, values)
        s.credit = table[s.episode_id][s.role]["total"]
        s.group_key = group_key(s, config)
