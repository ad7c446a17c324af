"""Counterfactual replays: re-play a finished episode with some agents ablated (SHARP Eq. 11, Shapley Eq. 2).

    plan = Replays(parallel(4), choose=lambda episode, players: [frozenset({p}) for p in players if p != "planner"])
    out = rollout(tasks, plan, engine, sigma)
    out.episodes                  # real episodes, then replays with `episode.counterfactual` set
    replay_values(out)            # {(episode id, absent agents): terminal value}

`Replays` wraps any sampling plan. On a real line of play it keeps an untouched copy of the state
just before each agent's first turn (`Branch.snapshots`). When the episode ends, `choose(episode,
players)` names the coalitions to ablate (sets of absent agents); each replay starts from the
snapshot at the first turn of its first absent agent, so everything before is the original trace
(Shapley paper, "Simulating coalitions"). From there present agents regenerate (one sample each)
and absent agents emit the baseline: the environment's `masked_reply` or `noop_reply`, or a sample
of the frozen reference (adapters disabled). Replays are new branches of the same `rollout` call, so
they share its engine waves with the lines still running; their samples are never trained.

The value of an episode is its terminal team reward: `team_reward` in the infos of the last step
(acc for deep search, F1 for MASS), the R_acc of SHARP Eq. 10 and v(S) of Shapley Eq. 2.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .plans import Branch, Counterfactual, Decision, SamplingPlan
from .samples import Episode, Rollout

BASELINES = ("masked", "noop", "reference")
Choose = Callable[[str, Sequence[str]], list[frozenset[str]]]
"""(episode id, players in order of first turn) -> the sets of absent agents to replay."""


def episode_value(rollout_or_samples: Any, episode: Episode) -> float:
    """Terminal team reward of `episode`: `team_reward` of its last step (0 for an empty episode)."""
    samples = rollout_or_samples.samples if isinstance(rollout_or_samples, Rollout) else rollout_or_samples
    if not episode.sample_ids:
        return 0.0
    return float(samples[episode.sample_ids[-1]].info.get("team_reward", 0.0))


def players_of(rollout: Rollout, episode: Episode) -> list[str]:
    """Roles that acted on the episode, in order of their first turn."""
    seen: dict[str, None] = {}
    for sid in episode.sample_ids:
        seen.setdefault(rollout.samples[sid].role, None)
    return list(seen)


def replay_values(rollout: Rollout) -> dict[tuple[str, frozenset[str]], float]:
    """{(original episode id, absent agents): value} for every replay, plus (id, ∅) for every real episode."""
    out: dict[tuple[str, frozenset[str]], float] = {}
    for ep in rollout.episodes:
        key = (ep.episode_id, frozenset()) if ep.counterfactual is None else (ep.counterfactual.of, ep.counterfactual.absent)
        out[key] = episode_value(rollout, ep)
    return out


class Replays(SamplingPlan):
    """`base`'s rollouts plus, for each finished real episode, the replays `choose` asks for.

    `eager=True` starts a replay at the first turn of its first absent agent instead of at the end of
    the episode, so it runs alongside the original line (fewer waves). It needs a `choose` that can
    decide from the players seen so far (SHARP: one replay per worker) and a base plan that does not
    rename the line after that turn (e.g. `parallel`, not MHGPO's forks).
    """

    def __init__(self, base: SamplingPlan, choose: Choose, baseline: str = "masked",
                 track: Callable[[str], bool] = lambda role: True, eager: bool = False):
        if baseline not in BASELINES:
            raise ValueError(f"baseline must be one of {', '.join(BASELINES)}, got {baseline!r}")
        self.base = base
        self.choose = choose
        self.baseline = baseline
        self.track = track
        """Roles whose first turn is snapshotted (only those can be ablated)."""
        self.eager = eager
        self.name = f"{base.name}+replays"

    def start(self, task: Any, env: Any) -> list[Branch]:
        return self.base.start(task, env)

    def decide(self, branch: Branch, agent: str, observation: dict[str, Any]) -> Decision:
        cf = branch.counterfactual
        if cf is None:
            return self.base.decide(branch, agent, observation)
        if agent not in cf.absent:
            return Decision(n=1)
        if cf.baseline == "reference":
            return Decision(n=1, reference=True)
        env = branch.env.unwrapped if hasattr(branch.env, "unwrapped") else branch.env
        reply = env.masked_reply(agent) if cf.baseline == "masked" else env.noop_reply(agent)
        return Decision(replies=(reply,))

    def expand(self, turn: Any) -> list[Branch]:
        branch = turn.branch
        if branch.counterfactual is not None:
            return [turn.step(0, fork=False).branch]
        first_turn = turn.agent not in branch.snapshots and self.track(turn.agent)
        if first_turn:
            branch.snapshots[turn.agent] = turn.snapshot()
        out = self.base.expand(turn)
        if first_turn and self.eager:
            out += self._spawn(branch, branch.episode_id, only_first=turn.agent)
        return out

    def finished(self, branch: Branch, episode: Episode) -> list[Branch]:
        if branch.counterfactual is not None:
            return []
        out = list(self.base.finished(branch, episode))
        if not self.eager:
            out += self._spawn(branch, episode.episode_id)
        return out

    def _spawn(self, branch: Branch, episode_id: str, only_first: str | None = None) -> list[Branch]:
        """Replay branches for the coalitions `choose` names (those whose first absent agent is `only_first`)."""
        players = list(branch.snapshots)  # insertion order = order of first turns
        out = []
        for absent in self.choose(episode_id, players):
            absent = frozenset(absent)
            unknown = absent - set(players)
            if unknown:
                raise ValueError(f"cannot ablate {sorted(unknown)} in {episode_id}: they never acted (players: {players})")
            if not absent:
                continue
            first = min(absent, key=players.index)
            if only_first is not None and first != only_first:
                continue
            snap = branch.snapshots[first]
            cf = Counterfactual(of=episode_id, absent=absent, baseline=self.baseline)
            out.append(Branch(env=snap.env.fork(), task=snap.task, episode_id=f"{episode_id}/without:{'+'.join(sorted(absent))}",
                              path=list(snap.path), steps=snap.steps, infos=dict(snap.infos), data=dict(snap.data),
                              counterfactual=cf))
        return out
