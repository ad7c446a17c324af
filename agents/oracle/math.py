"""Math oracle: solves generated problems through the text interface.

How it knows the answer: it reads the problem text in its observation and recognises it with the
generators' own parser and solver (`llm_marl_envs.math.problems.recognise`), which reads the
parameters back out of the question; it never looks at the environment's state. The reasoner
writes that exact answer as `#### \\boxed{...}`; the tool writes the generator's standard-library
program, which computes the answer itself (Fractions, integer arithmetic, brute force) in the
sandbox.

Dataset problems cannot be parsed: the oracle looks them up in the environment's own `dataset`
(`make_oracle` passes it, as the environment was made with it) or a lookup table `answers` (question
-> answer); an unknown problem gets an honest "cannot solve" reply (the reasoner boxes nothing, the
tool prints nothing useful), and `knows` is False (demonstrations leave its episode out).
"""

from __future__ import annotations

import os
from typing import Any

from llm_marl_envs.math.problems import recognise

from ..base import Agent, last_user_text


class MathOracle(Agent):
    env_options = ("dataset", "dataset_format")
    """Options of the environment the oracle must know (`make_oracle` takes them from the env's)."""

    def __init__(self, answers: dict[str, str] | None = None, dataset: Any = None, dataset_format: str = "auto"):
        table = {}
        if dataset is not None:  # the environment's problems, loaded as it loads them
            from llm_marl_envs.math.datasets import load_dataset

            instances = load_dataset(dataset, dataset_format) if isinstance(dataset, (str, os.PathLike)) else list(dataset)
            table = {i.question: i.answer for i in instances}
        self.answers = {" ".join(q.split()): a for q, a in {**table, **(answers or {})}.items()}

    def _lookup(self, task: str) -> str | None:
        """The table's answer to the problem after "Problem:" (which may hold blank lines, as the
        instructions after it begin after one)."""
        _, found, rest = task.partition("Problem:\n")
        if not (found and self.answers):
            return None
        paragraphs = rest.split("\n\n")
        return next((self.answers[q] for n in range(1, len(paragraphs) + 1)
                     if (q := " ".join("\n\n".join(paragraphs[:n]).split())) in self.answers), None)

    def knows(self, role: str, observation: dict[str, Any]) -> bool:
        task = last_user_text(observation)
        return self._lookup(task) is not None or recognise(task) is not None

    def act(self, role: str, observation: dict[str, Any]) -> str:
        task = last_user_text(observation)
        # A dataset's problem is its own (a GSM8K question could read as a generator's); a generated one is recognised.
        problem = recognise(task) if self._lookup(task) is None else None
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
