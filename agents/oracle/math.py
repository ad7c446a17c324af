"""Math oracle: solves generated problems through the text interface.

How it knows the answer: it reads the problem text in its observation and recognises it with the
generators' own parser and solver (`llm_marl_envs.math.problems.recognise`), which reads the
parameters back out of the question; it never looks at the environment's state. The reasoner
writes that exact answer as `#### \\boxed{...}`; the tool writes the generator's standard-library
program, which computes the answer itself (Fractions, integer arithmetic, brute force) in the
sandbox.

Dataset problems cannot be parsed: give the oracle a lookup table `answers` (question -> answer,
e.g. `{p.question: p.answer for p in load_dataset(path)}`); an unknown problem gets an honest
"cannot solve" reply (the reasoner boxes nothing, the tool prints nothing useful).
"""

from __future__ import annotations

import re
from typing import Any

from llm_marl_envs.math.problems import recognise

from ..base import Agent, last_user_text

_PROBLEM = re.compile(r"Problem:\n(.*?)\n\n", re.S)


class MathOracle(Agent):
    def __init__(self, answers: dict[str, str] | None = None):
        self.answers = {" ".join(q.split()): a for q, a in (answers or {}).items()}

    def _lookup(self, task: str) -> str | None:
        found = _PROBLEM.search(task)
        return self.answers.get(" ".join(found.group(1).split())) if found else None

    def act(self, role: str, observation: dict[str, Any]) -> str:
        task = last_user_text(observation)
        problem = recognise(task)
        if role == "reasoner":
            if problem is not None:
                answer = problem.answer()
                how = f"This is a {problem.generator.name.replace('_', ' ')} problem; solving it exactly gives {answer}."
            else:
                answer = self._lookup(task)
                how = "This problem is in my answer table." if answer is not None else "I cannot solve this problem."
            if answer is None:
                return "**Reasoning Steps:**\n" + how
            return f"**Reasoning Steps:**\n{how}\n\n#### \\boxed{{{answer}}}"
        if problem is not None:
            return f"**Code:**\n```python\n{problem.program()}```"
        answer = self._lookup(task)
        if answer is not None:
            return f"**Code:**\n```python\n# answer from the table\nprint({answer!r})\n```"
        return "**Code:**\n```python\nraise SystemExit('cannot solve this problem')\n```"
