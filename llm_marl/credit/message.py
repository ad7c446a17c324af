"""Agent -> message credit: signed PRM labels split φ_i over an agent's messages (Shapley-PRM Sec. 4.1.2, Eq. 6-10).

    s_{i,t} = J(H_{t-1}, m_{i,t}) ∈ {-1, 0, +1}                       (Eq. 6)
    S_i = Σ_{u ∈ T_i} |s_{i,u}|                                        (Eq. 7)
    ω_{i,t} = |s_{i,t}| / S_i if S_i > 0, else 1/|T_i|                 (Eq. 8)
    r_{i,t} = s_{i,t} · ω_{i,t} · φ_i                                  (Eq. 9)
    Σ_t r_{i,t} = φ_i  (claimed "by construction")                     (Eq. 10)

Eq. 9 as written gives Σ_t r_{i,t} = φ_i · (P - N) / S_i, with P and N the numbers of +1 and -1
labels, so Eq. 10 holds only when no label is -1 and at least one is +1 (or φ_i = 0). With all
labels 0 the "uniform fallback" weights are multiplied by s = 0 and every reward is 0.
`allocate(..., conserve=False)` returns the literal Eq. 9 numbers; `conserve=True` (default) applies
Deviation 1, so that Eq. 10 holds for every label pattern.

Deviation 1: the Eq. 9 rewards are projected onto the conservation constraint, adding the residual
  φ_i - Σ_t r_{i,t} equally to each of the agent's |T_i| messages (the smallest change, in the
  Euclidean norm, for which Eq. 10 holds). This is a no-op whenever Eq. 10 already holds, gives
  the uniform fallback φ_i/|T_i| when all labels are 0 (the fallback's evident intent), and keeps
  every gap r_{i,t} - r_{i,u} = (s_{i,t} - s_{i,u}) φ_i / S_i of Eq. 9, so the ordering
  aligned > neutral > counter-aligned (reversed for φ_i < 0) is kept. Aligned messages always get
  the sign of φ_i; counter-aligned ones get the opposite sign only while N < |T_i|/2, and neutral
  ones get 2N·φ_i/(S_i·|T_i|) (0 when N = 0). Rescaling by S_i/(P - N) instead would keep
  signs, but is undefined for P = N, flips them for P < N and grows without bound as P - N -> 0.

The second half of Eq. 10, Σ_{i,t} r_{i,t} = R_sys, also needs Σφ = R_sys (v(∅) = 0, see
shapley.efficiency_gap) and every agent to have spoken: credit of agents without messages is
reported in `MessageCredit.dropped`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

LABELS = (-1, 0, 1)


@dataclass(frozen=True)
class Message:
    """One agent emission m_{i,t} (text, code or tool call) at position `index` of the trace."""

    agent: str
    index: int
    text: str
    info: Mapping[str, Any] = field(default_factory=dict)
    """The environment's infos for this step (parse_error, penalty, local_reward, ...)."""


class Judge(Protocol):
    """Eq. 6 judge: the signed label s of `message` given the trace before it (H_{t-1})."""

    def __call__(self, history: Sequence[Message], message: Message) -> int: ...


def allocation_weights(labels: Sequence[int]) -> list[float]:
    """ω_{i,t} of Eq. 7-8 for one agent's labels in trace order: |s|/S, or 1/|T_i| when S = 0."""
    if not labels:
        raise ValueError("an agent with no messages has nothing to allocate; skip it (its credit is dropped)")
    bad = [s for s in labels if s not in LABELS]
    if bad:
        raise ValueError(f"labels must be -1, 0 or +1 (Eq. 6), got {bad}; map the judge's output to a sign")
    S = sum(abs(s) for s in labels)
    return [abs(s) / S for s in labels] if S > 0 else [1.0 / len(labels)] * len(labels)


def allocate(labels: Sequence[int], phi_i: float, conserve: bool = True) -> list[float]:
    """Message rewards r_{i,t} = s·ω·φ_i (Eq. 9) for one agent; conserve=True adds Deviation 1 so Σ_t r = φ_i."""
    r = [s * w * phi_i for s, w in zip(labels, allocation_weights(labels))]
    if conserve:
        residual = (phi_i - sum(r)) / len(r)
        r = [x + residual for x in r]
    return r


def conservation_gap(rewards: Sequence[float], phi_i: float) -> float:
    """Σ_t r_{i,t} - φ_i for one agent's message rewards: 0 when Eq. 10 holds, -φ_i·2N/S for literal Eq. 9."""
    return sum(rewards) - phi_i


@dataclass(frozen=True)
class MessageCredit:
    """Per-message rewards and labels in trace order, plus the φ of agents that never spoke."""

    rewards: list[float]
    labels: list[int]
    dropped: dict[str, float]
    """φ_i of agents in `phi` without messages: nothing to allocate it to, so it is not in `rewards`."""


def message_rewards(messages: Sequence[Message], phi: Mapping[str, float], judge: Judge,
                    conserve: bool = True) -> MessageCredit:
    """Label every message with `judge` (history = messages before it) and split each φ_i over agent i's messages."""
    missing = sorted({m.agent for m in messages} - set(phi))
    if missing:
        raise ValueError(f"phi has no credit for agents {missing}; pass the Shapley value of every agent that spoke")
    labels = [judge(messages[:k], m) for k, m in enumerate(messages)]
    rewards = [0.0] * len(messages)
    for agent, phi_i in phi.items():
        positions = [k for k, m in enumerate(messages) if m.agent == agent]
        if positions:
            for k, r in zip(positions, allocate([labels[k] for k in positions], phi_i, conserve)):
                rewards[k] = r
    dropped = {a: float(p) for a, p in phi.items() if all(m.agent != a for m in messages)}
    return MessageCredit(rewards=rewards, labels=labels, dropped=dropped)


# --- judges: the Protocol is the plug for an LLM judge or a compact PRM (out of scope here) ---------------

@dataclass(frozen=True)
class ConstantJudge:
    """Gives every message the same label; label=1 reduces Eq. 9 to an equal split of φ_i."""

    label: int = 1

    def __call__(self, history: Sequence[Message], message: Message) -> int:
        return self.label


@dataclass(frozen=True)
class InfoJudge:
    """Rule-based Eq. 6 judge reading the environment's infos for the message; first matching row wins.

    | condition                                              | label   |
    |--------------------------------------------------------|---------|
    | `info["parse_error"]` truthy, or `info["penalty"] < 0`  | -1      |
    | `info["local_reward"] > 0`                              | +1      |
    | otherwise (valid message, no local progress)           | `clean` |

    `clean` defaults to +1 (a valid message counts as aligned); use 0 to call such messages neutral.
    The infos measure the system direction, which is the agent's own direction (Eq. 6) only when
    φ_i > 0: for a harmful agent this judge is a stand-in, not the paper's alignment judge.
    """

    clean: int = 1

    def __call__(self, history: Sequence[Message], message: Message) -> int:
        info = message.info
        if info.get("parse_error") or info.get("penalty", 0) < 0:
            return -1
        if info.get("local_reward", 0) > 0:
            return 1
        return self.clean


@dataclass(frozen=True)
class CallableJudge:
    """Adapts any function (history, message) -> label to the Judge protocol."""

    fn: Callable[[Sequence[Message], Message], int]

    def __call__(self, history: Sequence[Message], message: Message) -> int:
        return self.fn(history, message)
