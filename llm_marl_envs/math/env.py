"""Math: a reasoner and a Python tool agent answer a math problem (AT-GRPO Sec. 5.1; rewards
appendix A.1.1; prompts A.2.2 "Math MAS Workflow").

| | |
|---|---|
| Creation | `llm_marl_envs.math_v2.env()` / `pettingzoo.make("aec", "llm_marl/Math-v2")`; `math_v2.parallel_env()` |
| Agents | `reasoner`, `tool` (mode "mas"); `reasoner` alone (mode "reasoner"); `tool` alone (mode "tool") |
| Turn order | reasoner, tool, reasoner, tool, ... for up to `max_turns` turns; within a turn neither sees the other's reply |
| Observation | `{"messages": [chat in OpenAI format], "turn": int}`: the problem, then (turns > 0) the mismatch history |
| Action | the role's raw reply (`str`) |
| Parallel | yes (`parallel_env`): the two roles of a turn act on the same information |

Arguments:
- `mode` ("mas" | "reasoner" | "tool"): the workflow or a single-agent baseline.
- `max_turns` (T, default 4): turn budget.
- `difficulty` (1 | 2 | 3 | None = mixed), `topics` (subset of arithmetic, algebra, number_theory,
  combinatorics, probability), `generators` (subset of generator names): which generated problems.
- `dataset` (a JSONL/JSON/parquet file, a `save_to_disk` folder, a Hub id such as
  `openai/gsm8k:main@test`, or a list of `MathInstance`): use these problems instead of generated
  ones; `dataset_format` ("auto" | "gsm8k" | "math" | "aime" | "polaris" | "jsonl"), see
  `llm_marl_envs.math.datasets`. Dataset problems are split by the hash of their question text,
  like generated ones; to evaluate on a whole benchmark (`llm-marl eval --split all`), pass each
  problem with `reset(options={"instance": problem})` (`raw_env.dataset_instances()` lists them).
- `render_mode` (None | "ansi" | "human"), `sandbox` (a shared `llm_marl_envs.sandbox.Sandbox`).

`reset(seed, options={"split": "train"|"val"|"test", "instance": MathInstance})`.

Problems (`llm_marl_envs.math.generators`): 20 seeded generators with exact answers computed by
construction (integers and `Fraction`s, never floats), each at difficulty 1, 2 and 3 —
arithmetic: integer_expression, fraction_arithmetic, percent; algebra: linear_equation,
quadratic_equation (rational roots), linear_system (2 or 3 unknowns), function_value;
number_theory: gcd_lcm, modular_power, divisors, primes, congruence (incl. CRT);
combinatorics: choose, arrangements, row_arrangements, distributions, permutation_counts;
probability: dice, urn, coins. Each instance records `source`, `difficulty`, `generator`,
`topic` and its parameters; its key is the question text, so splits are disjoint by content.

Example observation (reasoner, turn 0):

    [{"role": "system", "content": "You are a helpful assistant that solves math problems via careful reasoning."},
     {"role": "user", "content": "Problem:\\nWhat is the greatest common divisor of 84 and 126?\\n\\nFirst, outline
      the key reasoning steps. ... The final line must contain only the boxed answer, e.g., #### \\\\boxed{123}"}]

Action grammar. Reasoner: any reasoning, then the final answer in `\\boxed{...}` (nested braces
allowed); the last box counts; without a box, the first line after the last `####` counts:

    **Reasoning Steps:** 84 = 2^2·3·7 and 126 = 2·3^2·7 ...
    #### \\boxed{42}

Tool: one ```python block (at most 16,000 characters; the first python block counts) whose program
prints the answer; the last non-empty printed line is the answer (`Fraction(1, 3)` reprs read as 1/3):

    ```python
    import math
    print(math.gcd(84, 126))
    ```

CRLF line endings are read as newlines, and a block indented as a whole (in a markdown list item,
fences included) loses its common indentation (`core.text.extract_code`). The program runs in the
sandbox (standard library only, time/memory/output limits, no network). Answers are compared by
`llm_marl_envs.math.verify.answers_match` (Math-Verify + NumEq, δ = 1e-6; exact values must be
equal).

Workflow. Turn k: the reasoner answers ŷ_k and the tool's program prints ỹ_k. From turn 1 on, both
see every previous turn: the reasoner's reply and extracted answer, the tool's code, execution status,
printed output and answer, and whether they matched. The episode ends when ŷ_k and ỹ_k are both
present and equivalent (agreement), or after T turns. The final answer is the reasoner's answer of
the last turn played (the paper's boxed answer); `success` = CheckFinal(final answer, y*).
Single-agent modes: the role's own answer is final; the episode ends as soon as it gives one
(reasoner: an extracted answer; tool: a program that ran and printed something), else after T turns
(later turns show the role its previous attempts and what was wrong with them).

Rewards (A.1.1), per agent i at turn k: r_k^i = λ·r_k^team + (1 − λ)·m_k^i·r_k^{i,loc} with
r_k^{i,loc} = Σ_l c_l^i·s_{l,k}^i and λ_math = 0.70 (A.1.1 gives λ_math and the terms; the mixing
formula is the one A.1.3–A.1.5 write out for the other tasks). `infos` carries the breakdown, so a
trainer can remix it, e.g. AT-GRPO Eq. 4: α·r_team + r_loc.

| term | who | value | coefficient |
|---|---|---|---|
| r_team | both | CheckFinal(final answer of turn k, y*) ∈ {0, 1}: the reasoner's ŷ_k (mode "tool": ỹ_k) | λ = 0.70 |
| fmt | reasoner | a final answer was extracted (`\\boxed{}` or `####`) | 0.20 |
| tool | reasoner | (not used) | 0.00 |
| step | reasoner | CheckFinal(ŷ_k, y*) | 0.80 |
| fmt | tool | a python block that compiles, within the 16,000-character budget | 0.10 |
| tool | tool | the program exited normally (sandbox status "ok": no error, timeout or limit) | 0.10 |
| step | tool | CheckFinal(ỹ_k, y*) | 0.80 |

Masks: the reasoner's m = 1{y* available} = 1 (every instance has a reference answer); the tool's
m = 1{y* and execution logs available} = 0 only when the reply has no code block.
Interpretations of the paper: (1) its team term is paid "at termination (k = T)"; every turn here
can be the last (agreement ends the episode) and rewards must be known at the acting agent's own
step (AT-GRPO Alg. 1 line 10 scores each candidate before the transition), so r_team at turn k is
the check of the answer that would be final if the episode ended at k: the reasoner's ŷ_k, known
at the reasoner's step and shared by the tool at the same turn. On the last turn it is the paper's
value. (2) "step" is defined for numeric answers in the paper; here any answer the checker can
compare (numbers, fractions, tuples, sets, radicals, intervals) scores it. (3) The reasoner's c_tool
is 0, so its breakdown lists fmt and step only.

Termination: the episode ends on agreement (a termination, whether or not the answer is right) or
after T turns (a truncation, unless that last turn agreed or succeeded).
`infos[agent]` holds the breakdown, `parse_error`, `turn`, `success`, the role's `answer`, the
tool's `tool_status`, `agreed` (mode "mas", at the tool's step) and, on the last step,
`final_answer`.

Version history:
- v2: a percentage reference answer (MATH's `12.5\\%`) accepts its number written as a decimal (`12.5`,
  `25.0` for `25\\%`): NumEq now reads Math-Verify's unevaluated 1/100 (v1's NumEq stage failed on it, so
  only the forms Math-Verify's exact check accepts, `25` and `0.25`, were right).
  A decimal with thousands separators (`1,234.5`) is one number (v1 read the list {1, 234.5}: wrong).
  A number in scientific notation (`1e+20`, `1e-05`: how Python prints a float from 1e16 on and below
  1e-4) is a number (v1 read none: a tool's right `print(x)` was wrong).
  A final line in markdown bold (`#### **18**`) is read without its asterisks (v1: the answer `**18**`, wrong).
- v1: the tool's code block is read with CRLF line endings (a ```` ```python\\r\\n ```` fence was not
  found: no code, mask 0) and without the indentation of a block indented as a whole, e.g. in a
  markdown list item (v0 ran it as written: an IndentationError, fmt = tool = step = 0).
- v0: initial release.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from ..core.base import Message, Play, TextAECEnv
from ..core.clock import tool_wait
from ..core.instances import split_of
from ..core.rewards import RewardBreakdown
from ..core.text import compile_error, extract_code
from . import prompts
from .datasets import FORMATS, load_dataset
from .problems import MathInstance, MathProblemConfig, generate
from .records import MathContext, ReasonerAttempt, ToolAttempt, TurnRecord
from .verify import answers_match, extract_answer, extract_printed_answer

Mode = Literal["mas", "reasoner", "tool"]
MODES: dict[str, tuple[str, ...]] = {"mas": ("reasoner", "tool"), "reasoner": ("reasoner",), "tool": ("tool",)}

LAMBDA_MATH = 0.70
REASONER_COEF = {"fmt": 0.20, "step": 0.80}
"""A.1.1: c_fmt = 0.20, c_tool = 0.00 (omitted), c_step = 0.80."""
TOOL_COEF = {"fmt": 0.10, "tool": 0.10, "step": 0.80}
MAX_CODE_CHARS = 16_000
"""The tool's code budget (characters): longer programs fail s_fmt and are not run."""
_SHOWN_OUTPUT_CHARS = 2_000


class ProblemBank:
    """Dataset problems grouped by split (by the hash of their key). Shared, never copied, by forks."""

    def __init__(self, instances: Sequence[MathInstance]):
        self.instances = list(instances)
        self.by_split: dict[str, list[MathInstance]] = {"train": [], "val": [], "test": []}
        for inst in self.instances:
            self.by_split[split_of(inst.key())].append(inst)

    def __deepcopy__(self, memo: dict) -> ProblemBank:
        return self

    def __len__(self) -> int:
        return len(self.instances)


class raw_env(TextAECEnv):
    metadata = {"render_modes": ["human", "ansi"], "name": "math_v2", "is_parallelizable": True}
    instance_namespace = "math"

    def __init__(self, mode: Mode = "mas", max_turns: int = 4, difficulty: int | None = None,
                 topics: Sequence[str] | None = None, generators: Sequence[str] | None = None,
                 dataset: str | os.PathLike[str] | Sequence[MathInstance] | None = None, dataset_format: str = "auto",
                 render_mode: str | None = None, sandbox: Any = None):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {sorted(MODES)} (mas = reasoner + tool), got {mode!r}")
        if dataset_format not in FORMATS:
            raise ValueError(f"dataset_format must be one of {', '.join(FORMATS)}, got {dataset_format!r}")
        if dataset_format != "auto" and not isinstance(dataset, (str, os.PathLike)):
            raise ValueError("dataset_format describes a dataset= file; without one it would do nothing: pass dataset= or drop it")
        self.mode = mode
        self._sandbox = sandbox
        self.config = MathProblemConfig(difficulty, topics, generators)
        self.bank: ProblemBank | None = None
        if dataset is not None:
            if (difficulty, topics, generators) != (None, None, None):
                raise ValueError("difficulty, topics and generators choose generated problems; drop them when passing dataset=")
            instances = (load_dataset(dataset, dataset_format) if isinstance(dataset, (str, os.PathLike))
                         else list(dataset) if isinstance(dataset, Sequence) else [])  # `dataset=123`: the message below
            if not instances or not all(isinstance(i, MathInstance) for i in instances):
                raise ValueError("dataset must be a file, folder or Hub id, or a non-empty list of MathInstance")
            self.bank = ProblemBank(instances)
        super().__init__(MODES[mode], max_turns=max_turns, render_mode=render_mode)

    # ------------------------------------------------------------------ instances
    def _make_instance(self, rng: np.random.Generator) -> MathInstance:
        if self.bank is None:
            return generate(rng, self.config)
        items = self.bank.by_split[self.split]
        if not items:
            raise ValueError(
                f"the dataset has no {self.split!r} problems ({len(self.bank)} problems in all; splits are assigned "
                "by the hash of the question text): use a larger dataset, another split, or options={'instance': ...}"
            )
        return items[int(rng.integers(len(items)))]

    def dataset_instances(self, split: str | None = None) -> list[MathInstance] | None:
        """The loaded dataset problems (of one split, or all, in file order); None for generated problems."""
        if self.bank is None:
            return None
        return list(self.bank.instances if split is None else self.bank.by_split[split])

    def _start(self) -> None:
        self.history: list[TurnRecord] = []
        self.pending_reasoner: ReasonerAttempt | None = None
        """The reasoner's attempt of the current turn, until the tool closes the turn (mode "mas")."""

    def _shared_runtimes(self) -> list[Any]:
        return [self._sandbox] if self._sandbox is not None else []

    @property
    def sandbox(self) -> Any:
        if self._sandbox is None:
            from llm_marl_envs.sandbox import default_sandbox

            self._sandbox = default_sandbox()
        return self._sandbox

    # ------------------------------------------------------------------ observations
    def context(self) -> MathContext:
        return MathContext(problem=self.instance.question, turn=self.turn, max_turns=self.max_turns,
                           mode=self.mode, history=list(self.history))

    def _messages(self, agent: str) -> list[Message]:
        ctx = self.context()
        return prompts.reasoner_messages(ctx) if agent == "reasoner" else prompts.tool_messages(ctx)

    def _render_state(self) -> str:
        inst: MathInstance = self.instance
        about = ", ".join(f"{k}={v}" for k, v in (("source", inst.source), ("generator", inst.generator),
                                                  ("difficulty", inst.difficulty)) if v is not None)
        lines = [f"problem: {inst.question}", f"reference answer: {inst.answer} ({about})"]
        for rec in self.history:
            r = rec.reasoner.answer if rec.reasoner is not None else None
            t = rec.tool.answer if rec.tool is not None else None
            parts = [f"turn {rec.turn + 1}:"]
            if rec.reasoner is not None:
                parts.append(f"reasoner={r!r}{' (right)' if rec.reasoner.correct else ''}")
            if rec.tool is not None:
                parts.append(f"tool={t!r} [{rec.tool.status}]{' (right)' if rec.tool.correct else ''}")
            if self.mode == "mas":
                parts.append("agreed" if rec.agreed else "mismatch")
            lines.append(" ".join(parts))
        if self.pending_reasoner is not None:
            lines.append(f"turn {self.turn + 1}: reasoner={self.pending_reasoner.answer!r} (waiting for the tool)")
        return "\n".join(lines)

    # ------------------------------------------------------------------ reading replies
    def check(self, answer: str | None) -> bool:
        """CheckFinal(answer, y*)."""
        return answer is not None and answers_match(answer, self.instance.answer)

    def read_reasoner(self, reply: str) -> ReasonerAttempt:
        answer, error = extract_answer(reply)
        return ReasonerAttempt(reply=reply, answer=answer, error=error, correct=self.check(answer))

    def planned_calls(self, agent: str, reply: str) -> list[tuple[Any, tuple[Any, ...]]]:
        if agent != "tool":
            return []
        code, _ = extract_code(reply)
        if code is None or len(code) > MAX_CODE_CHARS or compile_error(code) is not None:
            return []
        return [(self.sandbox, (code, ""))]

    def run_tool(self, reply: str) -> ToolAttempt:
        code, error = extract_code(reply)
        if code is None:
            return ToolAttempt(None, "no_code", "", None, error, fmt=False, ran_ok=False, correct=False)
        if len(code) > MAX_CODE_CHARS:
            return ToolAttempt(code[:MAX_CODE_CHARS], "over_budget", "", None,
                               f"program longer than {MAX_CODE_CHARS} characters", fmt=False, ran_ok=False, correct=False)
        exc = compile_error(code)
        if exc is not None:
            # Not worth a process: report it like the interpreter would.
            return ToolAttempt(code, "syntax_error", f"{type(exc).__name__}: {exc}", None, "program does not compile",
                               fmt=False, ran_ok=False, correct=False)
        with tool_wait():
            result = self.sandbox.run(code)
        output = result.stdout if result.ok else result.stdout + result.stderr
        answer = extract_printed_answer(result.stdout) if result.ok else None
        if not result.ok:
            error = f"program failed ({result.status})"
        elif answer is None:
            error = "program printed nothing"
        return ToolAttempt(code, result.status, output[-_SHOWN_OUTPUT_CHARS:], answer, error, fmt=True,
                           ran_ok=result.ok, correct=self.check(answer))

    # ------------------------------------------------------------------ rewards (A.1.1)
    @staticmethod
    def reasoner_reward(attempt: ReasonerAttempt, team: bool) -> RewardBreakdown:
        """r = λ·r_team + (1 − λ)·m·(0.2·s_fmt + 0.8·s_step), m = 1 (y* always available)."""
        terms = {"fmt": float(attempt.answer is not None), "step": float(attempt.correct)}
        return RewardBreakdown(float(team), terms, REASONER_COEF, mask=1.0, lam=LAMBDA_MATH)

    @staticmethod
    def tool_reward(attempt: ToolAttempt, team: bool) -> RewardBreakdown:
        """r = λ·r_team + (1 − λ)·m·(0.1·s_fmt + 0.1·s_tool + 0.8·s_step), m = 1{execution logs exist}."""
        terms = {"fmt": float(attempt.fmt), "tool": float(attempt.ran_ok), "step": float(attempt.correct)}
        mask = 0.0 if attempt.code is None else 1.0
        return RewardBreakdown(float(team), terms, TOOL_COEF, mask=mask, lam=LAMBDA_MATH)

    # ------------------------------------------------------------------ workflow
    def _play(self, agent: str, reply: str) -> Play:
        if agent == "reasoner":
            attempt = self.read_reasoner(reply)
            # r_team at turn k: the check of the turn's final answer, which is this answer.
            breakdown = self.reasoner_reward(attempt, team=attempt.correct)
            details: dict[str, Any] = {"answer": attempt.answer or ""}
            if self.mode == "mas":
                self.pending_reasoner = attempt
                return Play(breakdown, next_agent="tool", parse_error=attempt.error, details=details)
            record = TurnRecord(self.turn, attempt, None, agreed=False)
            return self._close_turn(record, breakdown, attempt.error, details, stop=attempt.answer is not None)

        attempt = self.run_tool(reply)
        details = {"answer": attempt.answer or "", "tool_status": attempt.status}
        if self.mode == "tool":
            breakdown = self.tool_reward(attempt, team=attempt.correct)
            record = TurnRecord(self.turn, None, attempt, agreed=False)
            return self._close_turn(record, breakdown, attempt.error, details, stop=attempt.answer is not None)
        reasoner = self.pending_reasoner
        team = reasoner is not None and reasoner.correct
        agreed = bool(
            reasoner is not None and reasoner.answer is not None and attempt.answer is not None
            and answers_match(attempt.answer, reasoner.answer)
        )
        details["agreed"] = agreed
        breakdown = self.tool_reward(attempt, team=team)
        record = TurnRecord(self.turn, reasoner, attempt, agreed=agreed)
        return self._close_turn(record, breakdown, attempt.error, details, stop=agreed)

    def _close_turn(self, record: TurnRecord, breakdown: RewardBreakdown, error: str | None,
                    details: dict[str, Any], stop: bool) -> Play:
        self.history.append(record)
        self.pending_reasoner = None
        self.turn += 1
        done = stop or self.turn >= self.max_turns
        final = record.tool if self.mode == "tool" else record.reasoner
        success = done and final is not None and final.correct
        if done:
            details["final_answer"] = (final.answer if final is not None else None) or ""
        # Agreement (or a usable single-agent answer) is the task's natural end: a termination.
        return Play(breakdown, next_agent=None if done else self.possible_agents[0], success=success,
                    terminated=stop, parse_error=error, details=details)

    def final_answer(self) -> str | None:
        """The episode's final answer so far: the last turn's reasoner answer (tool answer in mode "tool")."""
        if not self.history:
            return None
        last = self.history[-1]
        attempt = last.tool if self.mode == "tool" else last.reasoner
        return attempt.answer if attempt is not None else None
