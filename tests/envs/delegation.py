"""A tiny planner + worker delegation environment for MATPO tests (the real deep-search env is later).

Roles: `planner`, `worker_0`. Each turn the planner either delegates a subtask with
`<delegate>subtask</delegate>` (a valid tool call; the worker then answers in a fresh context
that recaps the main task) or answers with `\\boxed{answer}`, which ends the episode. Any other
planner reply is an invalid tool call. The worker must reply `<summary>...</summary>`; the planner
sees only that summary. At the planner's last turn (`max_turns`), any reply ends the episode.

Rewards (MATPO): at the end `infos["planner"]` has team_reward = acc (boxed answer equals the
instance's answer), local_reward = fmt = 0.5·fmt_p + 0.5·fmt_w (fmt_p: valid planner tool calls /
planner tool calls, 1 when there were none; fmt_w: valid worker summaries / worker replies; fmt_p
alone when no worker ran), reward = 0.9·acc + 0.1·fmt (λ = 0.9). Intermediate steps report
team 0 and the validity of that one call.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from llm_marl_envs.core.base import Play, TextAECEnv
from llm_marl_envs.core.rewards import RewardBreakdown

_DELEGATE = re.compile(r"<delegate>(.+?)</delegate>", re.S)
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_SUMMARY = re.compile(r"<summary>(.+?)</summary>", re.S)
LAMBDA = 0.9


@dataclass(frozen=True)
class Question:
    question: str
    answer: str

    def key(self) -> str:
        return f"{self.question}|{self.answer}"


class raw_env(TextAECEnv):
    metadata = {"render_modes": ["human", "ansi"], "name": "delegation_v0", "is_parallelizable": False}
    delegating_role = "planner"
    instance_namespace = "delegation"

    def __init__(self, max_turns: int = 3, render_mode: str | None = None):
        super().__init__(("planner", "worker_0"), max_turns=max_turns, render_mode=render_mode)

    def _make_instance(self, rng: np.random.Generator) -> Question:
        a, b = (int(x) for x in rng.integers(1, 50, size=2))
        return Question(f"What is {a} + {b}?", str(a + b))

    def _start(self) -> None:
        self.subtask: str | None = None
        self.summaries: list[str] = []
        self.planner_calls = 0
        self.planner_valid = 0
        self.worker_calls = 0
        self.worker_valid = 0

    def _messages(self, agent: str) -> list[dict[str, str]]:
        q = self.instance.question
        if agent == "planner":
            seen = "\n".join(f"Worker summary {i + 1}: {s}" for i, s in enumerate(self.summaries)) or "(none yet)"
            return [{"role": "system", "content": "You are the planner. Delegate with <delegate>...</delegate> or answer with \\boxed{}."},
                    {"role": "user", "content": f"Task: {q}\n{seen}\nTurn {self.turn + 1} of {self.max_turns}."}]
        return [{"role": "system", "content": "You are a worker. Reply with <summary>...</summary>."},
                {"role": "user", "content": f"Main task (recap): {q}\nSubtask: {self.subtask}"}]

    def fmt(self) -> float:
        fmt_p = self.planner_valid / self.planner_calls if self.planner_calls else 1.0
        if not self.worker_calls:
            return fmt_p
        return 0.5 * fmt_p + 0.5 * self.worker_valid / self.worker_calls

    def _final(self, acc: float) -> RewardBreakdown:
        return RewardBreakdown(team=acc, terms={"fmt": self.fmt()}, coefficients={"fmt": 1.0}, mask=1.0, lam=LAMBDA)

    def _play(self, agent: str, reply: str) -> Play:
        if agent == "worker_0":
            m = _SUMMARY.search(reply)
            self.worker_calls += 1
            self.worker_valid += m is not None
            self.summaries.append(m.group(1).strip() if m else "(no summary)")
            self.turn += 1
            bd = RewardBreakdown(0.0, {"fmt": float(m is not None)}, {"fmt": 1.0}, mask=1.0, lam=LAMBDA)
            return Play(bd, next_agent="planner", parse_error=None if m else "no <summary> block")
        boxed = _BOXED.search(reply)
        last_turn = self.turn + 1 >= self.max_turns
        if boxed is not None:
            acc = float(boxed.group(1).strip() == self.instance.answer)
            self.turn += 1
            return Play(self._final(acc), next_agent=None, success=bool(acc))
        call = _DELEGATE.search(reply)
        self.planner_calls += 1
        self.planner_valid += call is not None
        error = None if call else "no <delegate> or \\boxed{} found"
        if last_turn:
            self.turn += 1
            return Play(self._final(0.0), next_agent=None, parse_error=error)
        if call is None:
            self.turn += 1
            return Play(RewardBreakdown(0.0, {"fmt": 0.0}, {"fmt": 1.0}, mask=1.0, lam=LAMBDA), next_agent="planner", parse_error=error)
        self.subtask = call.group(1).strip()
        return Play(RewardBreakdown(0.0, {"fmt": 1.0}, {"fmt": 1.0}, mask=1.0, lam=LAMBDA), next_agent="worker_0")

    def _render_state(self) -> str:
        return f"{self.instance.question} summaries={self.summaries}"
