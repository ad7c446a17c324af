"""Code oracle: a scripted coder and tester that know the shipped problem bank.

Both read the problem text from the prompt and look it up in the bank. The coder answers with the
problem's reference solution; the tester draws a fresh input from the problem's generator (seeded
by the problem and the turn), runs the reference solution on it in the sandbox and answers with
that input and output. It only acts through text: nothing here reads environment state.

A dataset's problems (the environment's `problems=`, which `make_oracle` passes) are known too when
they ship a reference solution (APPS, CodeContests): the coder answers with it, the tester with the
problem's first example. A problem without one gets a reply without code or test, which the
environment scores as a format error (`knows` is False: demonstrations leave its episode out); a problem set with no reference at all (LiveCodeBench) is
refused with a ValueError, rather than failing every episode (and teaching SFT that reply).
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

import numpy as np

from ..base import Agent, last_user_text

_OPEN, _CLOSE = "Problem:\n```\n", "\n```"


class CodeOracle(Agent):
    env_options = ("problems", "dataset_format", "dataset_split")
    """Options of the environment the oracle must know (`make_oracle` takes them from the env's)."""

    def __init__(self, time_limit_s: float = 2.0, problems: Any = None, dataset_format: str = "auto",
                 dataset_split: str = "test"):
        from llm_marl_envs.code.bank import PROBLEMS
        from llm_marl_envs.code.problems import load_problems

        pool = PROBLEMS
        if problems is not None:  # the environment's problems, loaded as it loads them
            pool = load_problems(problems, dataset_format, dataset_split) if isinstance(problems, (str, Path)) else list(problems)
            if not any(p.reference is not None for p in pool):
                raise ValueError(f"the code oracle answers with a problem's reference solution, and none of the {len(pool)} "
                                 f"problems of problems={str(problems)[:80]!r} has one (LiveCodeBench ships none); use "
                                 "another agent, or a dataset with solutions (APPS, CodeContests)")
        self.index = {p.text(): p for p in pool if p.reference is not None}
        self.time_limit_s = time_limit_s

    def problem(self, observation: dict[str, Any]):
        # The problem's own text may hold a ``` line (a dataset statement): try each fence that could close it.
        text = last_user_text(observation)
        start = text.find(_OPEN)
        end = start + len(_OPEN) - 1
        while start >= 0 and (end := text.find(_CLOSE, end + 1)) >= 0:
            if (problem := self.index.get(text[start + len(_OPEN):end])) is not None:
                return problem
        return None

    def knows(self, role: str, observation: dict[str, Any]) -> bool:
        return self.problem(observation) is not None

    def act(self, role: str, observation: dict[str, Any]) -> str:
        problem = self.problem(observation)
        if problem is None:
            return "I do not know this problem."
        if role == "coder":
            return f"The reference approach.\nCode:\n```python\n{problem.reference.rstrip()}\n```"
        return self.test_case(problem, int(observation.get("turn", 0)))

    def test_case(self, problem: Any, turn: int) -> str:
        from llm_marl_envs.code.parse import format_test
        from llm_marl_envs.code.problems import TestCase, with_newline
        from llm_marl_envs.code.runner import run_trusted
        from llm_marl_envs.sandbox import default_sandbox

        example = (problem.examples or problem.tests)[0]
        if problem.generate is not None:
            rng = np.random.default_rng(np.random.SeedSequence([zlib.crc32(problem.key.encode()), 0x7E57, turn]))
            stdin = with_newline(problem.generate(rng))
            (status, output), = run_trusted(default_sandbox(), problem.reference, [stdin], self.time_limit_s)
            if status == "ok":
                return "I derived the output by working the input through the solution.\n" + format_test(TestCase(stdin, output))
        return "The example from the statement.\n" + format_test(example)
