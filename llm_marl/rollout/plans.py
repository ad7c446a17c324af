"""Sampling plans: where a rollout branches, and which branch goes on.

The driver (`driver.rollout`) owns the AEC loop and the engine; a plan only answers three
questions, so a new plan (MHGPO's `fork_at`, SHARP's `replay(mask=...)`) is a new class here and
no change to the driver:

- `start(task, env)`: the initial lines of play for a freshly reset environment;
- `decide(branch, agent, observation)`: how many replies to draw at this decision point
  (`Decision(n=K)`), or which fixed replies to apply instead of sampling (`Decision(replies=[...])`);
- `expand(turn)`: apply the replies with `turn.step(c, fork=...)` and return the branches that go on;
- `finished(branch, episode)` (optional): new lines of play to start when one ends, e.g. the
  counterfactual replays of SHARP and Shapley credit (`llm_marl.rollout.replay`). They join the
  same waves as the lines still running, so replays share engine calls with ordinary rollouts.

`turn.step(c, fork=True)` steps reply c on a fresh `fork()` of the branch's environment and leaves
the branch untouched; `fork=False` steps the branch itself (at most once per turn). Either way the
reply becomes a `Sample` whose reward breakdown is read from that environment right after the step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .samples import Episode, Sample

if TYPE_CHECKING:
    from .driver import Task, Turn


@dataclass
class Branch:
    """One live line of play: an environment the branch owns, and the path that led to it."""

    env: Any
    task: Task
    episode_id: str
    path: list[int] = field(default_factory=list)
    """Sample ids along this line of play, in order."""
    steps: int = 0
    infos: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Latest `infos` of every agent (kept here so dead-agent steps cannot erase them)."""
    data: dict[str, Any] = field(default_factory=dict)
    """Plan-private state (copied into forks)."""
    counterfactual: Counterfactual | None = None
    """Set on replay branches: what they ablate. Their samples are never trained."""
    snapshots: dict[str, Branch] = field(default_factory=dict)
    """Untouched copies of this line of play just before an agent's first turn (kept by replay plans);
    shared, never stepped, by forks."""
    error: str | None = None
    """Set when the environment raised while stepping this line (a broken contract): the line ends
    there, its last reply penalised, and the rest of the rollout goes on."""


@dataclass(frozen=True)
class Counterfactual:
    """A replay of episode `of` in which the agents in `absent` are replaced by a baseline policy."""

    of: str
    """The original episode id."""
    absent: frozenset[str]
    baseline: str = "masked"
    """"masked": the environment's masked reply (`masked_reply(agent)`); "noop": its no-op reply
    (`noop_reply(agent)`); "reference": sampled from the frozen reference (adapters disabled)."""


@dataclass(frozen=True)
class Decision:
    n: int = 1
    """Replies to sample from the engine for this decision point (one request with `n`)."""
    replies: tuple[str, ...] | None = None
    """Fixed replies to apply instead of sampling (counterfactual replays); never trained on."""
    reference: bool = False
    """Sample from the frozen reference policy (no adapter) instead of the role's adapter."""

    def __post_init__(self) -> None:
        if self.replies is None and self.n < 1:
            raise ValueError(f"Decision.n must be >= 1, got {self.n}")


class SamplingPlan:
    """Base class; see the module docstring for the contract."""

    name = "plan"

    def start(self, task: Task, env: Any) -> list[Branch]:
        raise NotImplementedError

    def decide(self, branch: Branch, agent: str, observation: dict[str, Any]) -> Decision:
        return Decision(n=1)

    def expand(self, turn: Turn) -> list[Branch]:
        raise NotImplementedError

    def finished(self, branch: Branch, episode: Episode) -> list[Branch]:
        return []


class Parallel(SamplingPlan):
    """`parallel(G)`: G independent episodes per task, one reply per decision point.

    The G episodes start from forks of one reset environment (so they play the same instance) and
    never share state afterwards. This is the GRPO/MATPO plan (AT-GRPO Fig. 3a).
    """

    name = "parallel"

    def __init__(self, G: int):
        if int(G) < 1:
            raise ValueError(f"parallel(G) needs G >= 1, got {G}")
        self.G = int(G)

    def start(self, task: Task, env: Any) -> list[Branch]:
        return [Branch(env=env.fork(), task=task, episode_id=f"{task.task_id}/g{g}") for g in range(self.G)]

    def expand(self, turn: Turn) -> list[Branch]:
        return [turn.step(0, fork=False).branch]


def default_score(sample: Sample) -> float:
    """The environment's own reward for the step."""
    return float(sample.reward)


class Tree(SamplingPlan):
    """`tree(K)`: AT-GRPO Alg. 1 lines 8-13.

    At every agent turn, K replies are drawn from ONE request (one identical observation); each is
    stepped on its own fork of the current state and scored from that fork's infos right after its
    step; the argmax candidate's fork becomes the continuing state (first index on ties). The
    branch's own environment is never stepped, and selection happens per agent turn, so the next
    agent's K candidates all see the selected state.
    """

    name = "tree"

    def __init__(self, K: int, score: Callable[[Sample], float] = default_score):
        if int(K) < 1:
            raise ValueError(f"tree(K) needs K >= 1, got {K}")
        self.K = int(K)
        self.score = score

    def start(self, task: Task, env: Any) -> list[Branch]:
        return [Branch(env=env, task=task, episode_id=task.task_id)]

    def decide(self, branch: Branch, agent: str, observation: dict[str, Any]) -> Decision:
        return Decision(n=self.K)

    def expand(self, turn: Turn) -> list[Branch]:
        outcomes = [turn.step(c, fork=True) for c in range(len(turn.replies))]
        scores = [float(self.score(o.sample)) for o in outcomes]
        # A candidate whose step broke the environment is never the one that continues, if another is left.
        best = max(range(len(scores)), key=lambda c: (outcomes[c].branch.error is None, scores[c], -c))
        for c, o in enumerate(outcomes):
            o.sample.selected = c == best
        return [outcomes[best].branch]


def parallel(G: int) -> Parallel:
    return Parallel(G)


def tree(K: int, score: Callable[[Sample], float] = default_score) -> Tree:
    return Tree(K, score)
