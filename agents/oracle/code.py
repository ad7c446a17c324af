"""Code oracle: a scripted coder and tester that know the shipped problem bank.

Both read the problem text from the prompt and look it up in the bank. The coder answers with the
problem's reference solution; the tester draws a fresh input from the problem's generator (seeded
by the problem and the turn), runs the reference solution on it in the sandbox and answers with
that input and output. It only acts through text: nothing here reads environment state. Problems
outside the bank (datasets) get a reply without code or test, which the environment scores as a
format error.
"""

from __future__ import annotations

import re
import zlib
from typing import Any

import numpy as np

from ..base import Agent, last_user_text

_PROBLEM = re.compile(r"Problem:\n```\n(.*?)\n```", re.S)


class CodeOracle(Agent):
    def __init__(self, time_limit_s: float = 2.0):
        from llm_marl_envs.code.bank import PROBLEMS

        self.index = {p.text(): p for p in PROBLEMS}
        self.time_limit_s = time_limit_s

    def problem(self, observation: dict[str, Any]):
        found = _PROBLEM.search(last_user_text(observation))
        return self.index.get(found.group(1)) if found else None

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

        example = problem.examples[0]
        if problem.generate is not None:
            rng = np.random.default_rng(np.random.SeedSequence([zlib.crc32(problem.key.encode()), 0x7E57, turn]))
            stdin = with_newline(problem.generate(rng))
            (status, output), = run_trusted(default_sandbox(), problem.reference, [stdin], self.time_limit_s)
            if status == "ok":
                return "I derived the output by working the input through the solution.\n" + format_test(TestCase(stdin, output))
        return "The example from the statement.\n" + format_test(example)
