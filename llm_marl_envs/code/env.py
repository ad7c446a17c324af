"""Code: a coder writes a stdin/stdout program, a tester writes test cases (AT-GRPO Sec. 5.1; rewards A.1.2; prompts A.2.2).

| | |
|---|---|
| Creation | `llm_marl_envs.code_v4.env()` / `pettingzoo.make("aec", "llm_marl/Code-v4")` |
| Agents | `coder`, `tester` (mode "mas"); `coder` alone for one turn (mode "coder", the paper's single-agent baseline) |
| Turn order | coder, tester, coder, tester, ... for up to `max_turns` turns |
| Observation | `{"messages": [chat in OpenAI format], "turn": int}`: the problem, and from turn 1 on the mismatch history |
| Action | the role's raw reply (`str`) |
| Parallel | no (AEC only; both roles of a turn see the same history, as in the paper's side-by-side turns) |

Arguments: `mode` ("mas" | "coder"), `max_turns` (T; default 4 for "mas", 1 for "coder"),
`problems` (None = the shipped bank of original problems; an APPS, CodeContests or LiveCodeBench
JSON/JSONL/parquet file, `save_to_disk` folder or Hub id, see `llm_marl_envs.code.problems`; or a
list of `Problem`), `dataset_format` ("auto" | "apps" |
"codecontests" | "livecodebench"), `dataset_split` (the split a file's problems belong to, or
"hash"), `hidden_tests` (hidden tests per generated instance, default 10: the problem's edge inputs
plus seeded generator draws), `time_limit_s` (CPU seconds per test run; default None: the problem's own
limit, CodeContests' `time_limit`, but at least 1.0 s, and 1.0 s for a problem without one; a number: that limit
for every problem; either way at most the sandbox's `cpu_time_s`), `memory_limit_mb` (MiB of address space per
test run; default None: the problem's own limit, CodeContests' `memory_limit_bytes`, but at least 64 MiB and at most
the sandbox's `memory_mb`, which a problem without one gets; a whole number from 64 to the sandbox's `memory_mb`:
that limit for every problem), `render_mode`, `sandbox` (a shared `llm_marl_envs.sandbox.Sandbox`).
`reset(seed, options={"split": ...})`; an instance is (problem, variant): the variant seeds the hidden-test draw,
and every variant of a problem belongs to the problem's split, so splits are disjoint by problem.

Example observation (coder, turn 0; the tester's is alike and asks for one test case):

    [{"role": "system", "content": "You are a helpful assistant that writes Python to solve the problem. ..."},
     {"role": "user", "content": "Important:\\n- Read all inputs via input(). ...\\nNow solve:\\nProblem:\\n```\\n
      Sum of two\\n\\nRead two integers a and b and print their sum.\\n\\nInput: one line with two integers ...\\n\\n
      Example input:\\n3 5\\nExample output:\\n8\\n```\\n\\nFirst, decide on the number and types of inputs ...\\n\\n
      Please answer in the following format:\\nCode:\\n```python\\n(your code here)\\n```"}]

From turn 1 on, both roles see the mismatch history instead: for every earlier turn, the coder's
code and each test of the tester's suite with its input, expected output, the program's actual
output and PASSED or MISMATCH. The hidden tests are never shown.

Action grammar. Coder: a ```python block (the first one counts); the program reads stdin and
prints the answer. CRLF line endings are read as newlines, and a block indented as a whole (in a
markdown list item, fences included) loses its common indentation. Tester: `**Test Input:**` then the input, `**Test Output:**` then the expected
output, each preferably in a ``` block (the last pair counts; see `code.parse`). A test whose
input equals an earlier test's replaces it (a corrected test); otherwise it joins the suite.

    Code:
    ```python
    a, b = map(int, input().split())
    print(a + b)
    ```

    **Test Input:**
    ```
    -4 10
    ```
    **Test Output:**
    ```
    6
    ```

Rewards (A.1.2), per agent at turn k: r = λ·r_team + (1-λ)·m·r_loc, r_loc = Σ c_l·s_l, λ_code = 0.5.

| term | who | value | coefficient |
|---|---|---|---|
| r_team | both | p_k: fraction of the golden hidden tests that code_k passes | λ = 0.5 |
| build | coder | code_k compiles | 0.10 |
| run | coder | code_k exits normally on the smoke subset (the public examples) | 0.10 |
| nr | coder | fraction of G_{k-1} that code_k still passes; 1 when G_{k-1} is empty | 0.80 |
| valid | tester | this turn's test is executable, deterministic and consistent with the reference | 0.20 |
| cov | tester | min(1, MutScore_k / τ_mut), τ_mut = 0.6 | 0.80 |

G_{k-1} = the golden tests code_{k-1} passed. A test passes when the program exits normally and prints the
expected output's tokens, real numbers within 1e-6 (or the tolerance the statement states: "absolute or relative
error does not exceed 10^{-9}", `Problem.real_tolerance`) and letters in either case where the statement accepts
that (`code.runner.outputs_match`). A program may print twice the longest expected output
of the golden tests, or the sandbox's output cap when that is more. MutScore_k = the fraction of the reference
solution's non-equivalent mutants (`code.mutation`) that the valid tests of the tester's suite
kill (a mutant is killed when it crashes, prints another output, or runs over 10x the reference's
CPU time on that input, clamped to [0.02 s, the problem's time limit but at least 1 s]). Masks: the
coder's is 1 when its reply holds a program (build and run logs exist), else 0, and its terms are
then reported as 0; the tester's is 1 when the problem has a reference solution whose mutation
analysis ran, else 0 (e.g. LiveCodeBench, which ships no solutions).

Interpretations. (1) The appendix gives no λ for code; we use 0.5 (algorithms remix from the
breakdown in `infos`). (2) S_k for p_k and G_{k-1} is the golden hidden suite (issue 3: "team
reward = pass rate on the golden tests"); the tester's tests drive termination and the mismatch
history. (3) The coder acts first in a turn and both roles see only the history of earlier turns,
so the paper's side-by-side turn holds; the tester's r_team is the turn's shared p_k, which is
known at its step; its local terms depend only on its own tests and the reference solution, never
on the coder's reply. (4) "valid": the reference runs without error on the input (executable,
respects the input format), two independent runs of the reference agree (deterministic), and the
expected output equals the reference's (consistent); inputs or outputs over 5,000 characters are
a format error. (5) MutScore counts the whole suite (the tests of earlier turns too), as the
paper's "mutation score of the test suite at k". (6) Equivalent mutants are those that no input of
the problem's mutation pool (edge inputs, examples and 16 seeded draws; the fixed tests of a
dataset problem) tells apart from the reference; they are dropped. (7) `parse_error` is set when
the coder's reply yields no working program (no code block, a syntax error, or a failed smoke
run) and when the tester's reply holds no test case; wrong answers and invalid tests are not
format errors. (8) p_k, G and nr use the literal formulas: a program that does not compile at turn
0 still gets nr = 1, as in the paper (its reward, 0.4, stays below any program that compiles).
(9) The tester writes one test per turn (A.2.2); a test with the same input as an earlier one
replaces it, so a corrected test does not leave the wrong one in the suite.

Termination: the episode terminates when code_k passes every test of the tester's suite (at the
tester's step; also when the program then fails hidden tests), and is truncated after `max_turns`
turns; the "coder" mode ends after its one
turn. `success` (in `infos` at the end) = the last program passes ALL golden hidden tests.
`infos[agent]` also holds the breakdown, `parse_error`, `turn`, and per role: `code_status`,
`golden_passed`, `golden_total` (coder); `test_valid`, `test_check`, `suite_size`,
`mutants_killed`, `mutants_total`, `suite_passed` (tester).

Version history:
- v4: a CodeContests problem's tests run under its own memory limit (`memory_limit_bytes`, in MiB rounded
  up; at least 64 MiB, at most the sandbox's `memory_mb`; v3 gave every program the sandbox's 512 MiB, so
  a program over a 256 MB problem's limit passed); the reference keeps the sandbox's.
  An expected output's real numbers (a decimal point or an exponent) take any number within 1e-6, absolute or
  relative, as Codeforces' checkers do, in a program's tests, the tester's validity check and the mutation
  analysis (v3 compared tokens: a correct program printing 0.3333333333333333 for 0.333333 failed, and a
  reference printing more digits than the dataset left the tester's mask at 0). A dataset problem whose
  statement accepts any of several answers ("If there are multiple answers, print any of them") is skipped
  and counted (`LoadReport.any_answer`): no dataset ships its checker, and v3 failed a correct program that
  printed another valid answer.
  Where the statement accepts the answer in any case ("You can output YES and NO in any case"), letters
  compare case-insensitively (`Problem.any_case`; v3 failed a correct program printing "yes" for "YES", and a
  reference printing "Yes" left the tester's mask at 0).
  Where the statement states the error a real answer may have ("absolute or relative error does not exceed
  10^{-9}", "10 - 4", "1e-4"; "absolute error" alone: absolute only), real numbers compare within it instead of
  1e-6 (`Problem.real_tolerance`, `code.problems.statement_tolerance`), in a program's tests, the tester's
  validity check and the mutation analysis (v3 compared tokens exactly: a correct program of a 1e-4 problem
  printing 0.33335 for 0.333333 failed; 1e-6 for every problem would still fail it, and would pass an answer
  off by 1e-7 on a 1e-9 problem).
- v3: a CodeContests problem's tests run under its own time limit (`time_limit`; at least 1 s), unless
  `time_limit_s` is given (v2 ran every problem under 1 CPU second: a correct program of a 2-5 s problem
  that needed more was killed and failed its tests); the reference gets at least as long.
  A CodeContests problem that reads or writes named files (`input_file`, `output_file`: input.txt) is
  skipped (v2 fed its tests on stdin, where a program following the statement, and its reference, read
  the file and failed: reward 0 and the tester's mask 0).
  A mutant is timed out at 10x the reference's CPU time clamped to [0.02 s, the problem's time limit but at
  least 1 s] (v2: [0.02, 1] s whatever the limit: a slow but correct mutant of a 3 s problem, which a program
  may be, counted as killed). The mutation analysis is cached per time limit too.
  A CodeContests problem's reference is its first Python 3 solution that compiles, as APPS's is (v2 took the
  first marked Python 3: one that did not compile, a Python 2 one mislabelled, made every tester test invalid
  and the tester's mask 0).
  An APPS problem keeps its first 20 tests with distinct inputs, as CodeContests and LiveCodeBench do (v2
  kept all, repeats included: some rows have hundreds of tests, all run at every coder step).
- v2: a program may print twice the longest expected output of its golden tests (v1 kept the sandbox's
  64 KiB cap: a correct program on a dataset test with a longer expected output, common in CodeContests'
  generated tests, was killed with output_limit and failed it).
  The mutation analysis gives the reference the same room (v1 capped it at 1 MiB: a longer expected
  output made the analysis unavailable and the tester's mask 0).
  An APPS problem's reference is its first solution that compiles (v1 took the first: a Python 2
  solution marked every tester test invalid and left the tester's mask at 0).
- v1: the coder's code block is read with CRLF line endings (a ```` ```python\\r\\n ```` fence was not
  found: no code, reward 0) and without the indentation of a block indented as a whole, e.g. in a
  markdown list item (v0 ran it as written: an IndentationError, build = run = 0).
- v0: initial release.
"""

from __future__ import annotations

import threading
import zlib
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ..core.base import Message, Play, TextAECEnv
from ..core.instances import SPLITS, check_split, split_of
from ..core.rewards import RewardBreakdown
from ..core.text import compile_error
from ..sandbox.limits import MIN_MEMORY_MB
from . import prompts
from .mutation import MutationAnalysis, analyse
from .parse import parse_code, parse_test
from .problems import Problem, TestCase, check_unique, load_problems, with_newline
from .prompts import TestRun, TurnRecord
from .runner import RunCache, output_room, outputs_match, passes, program_jobs, program_limits, run_program, run_trusted

LAMBDA_CODE = 0.5
CODER_COEF = {"build": 0.10, "run": 0.10, "nr": 0.80}
TESTER_COEF = {"valid": 0.20, "cov": 0.80}
TAU_MUT = 0.60
MODES: dict[str, tuple[str, ...]] = {"mas": ("coder", "tester"), "coder": ("coder",)}
MUTATION_POOL_DRAWS = 16
DEFAULT_TIME_LIMIT_S = 1.0
"""CPU seconds per test for a problem without a time limit of its own (and the least a dataset's limit gives)."""
MUTANT_MIN_CAP_S = 1.0
"""The least CPU time cap of a mutant's run (v2's cap for every problem)."""
_VARIANTS = 2**31


@dataclass(frozen=True)
class CodeInstance:
    """One episode's task: a problem and the variant that seeds its hidden-test draw."""

    problem: Problem
    variant: int

    def key(self) -> str:
        return f"{self.problem.key}#{self.variant}"


def instance_for(problem: Problem, start: int = 0) -> CodeInstance:
    """The first variant >= start whose key lies in the problem's split."""
    variant = start % _VARIANTS
    while split_of(f"{problem.key}#{variant}") != problem.split:
        variant = (variant + 1) % _VARIANTS
    return CodeInstance(problem, variant)


# ---------------------------------------------------------------------------------------------
# hidden tests and mutation analysis (cached per process: deterministic functions of the problem)

_GOLDEN: OrderedDict[tuple, tuple[TestCase, ...]] = OrderedDict()
_GOLDEN_MAX = 4096
_ANALYSES: dict[tuple, MutationAnalysis] = {}
_CACHE_LOCK = threading.Lock()  # environments may be stepped from several threads


def _problem_rng(problem: Problem, *words: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([zlib.crc32(problem.key.encode()), *words]))


def draw_inputs(problem: Problem, rng: np.random.Generator, count: int, start: Sequence[str] = ()) -> list[str]:
    """`start` plus distinct generator draws, `count` inputs in all (fewer if the generator cannot)."""
    inputs = [with_newline(s) for s in start]
    for _ in range(50 * max(count, 1)):
        if len(inputs) >= count:
            break
        x = with_newline(problem.generate(rng))
        if x not in inputs:
            inputs.append(x)
    return inputs


def hidden_inputs(instance: CodeInstance, count: int) -> list[str]:
    problem = instance.problem
    if problem.generate is None:
        return [t.input for t in problem.tests]
    return draw_inputs(problem, _problem_rng(problem, instance.variant), count, problem.edge_inputs)


def golden_tests(instance: CodeInstance, count: int, sandbox: Any, time_limit_s: float) -> tuple[TestCase, ...]:
    """The instance's hidden tests with expected outputs (from the reference for generated problems)."""
    problem = instance.problem
    if problem.generate is None:
        return problem.tests
    key = (instance.key(), problem.reference_hash, count)
    with _CACHE_LOCK:
        if key in _GOLDEN:
            _GOLDEN.move_to_end(key)
            return _GOLDEN[key]
    inputs = hidden_inputs(instance, count)
    runs = run_trusted(sandbox, problem.reference, inputs, max(time_limit_s, 2.0))
    for stdin, (status, _) in zip(inputs, runs):
        if status != "ok":
            raise RuntimeError(f"problem {problem.key}: the reference solution failed ({status}) on a generated "
                               f"input {stdin[:80]!r}; fix the problem's generator or reference")
    tests = tuple(TestCase(stdin, out) for stdin, (_, out) in zip(inputs, runs))
    with _CACHE_LOCK:
        _GOLDEN[key] = tests
        while len(_GOLDEN) > _GOLDEN_MAX:
            _GOLDEN.popitem(last=False)
    return tests


def mutation_pool(problem: Problem) -> list[tuple[str, str | None]]:
    """Inputs (with expected outputs where the data gives them) that decide mutant equivalence."""
    if problem.generate is None:
        pool = {t.input: t.output for t in (*problem.examples, *problem.tests)}
        return list(pool.items())
    start = [*problem.edge_inputs, *(ex.input for ex in problem.examples)]
    inputs = draw_inputs(problem, _problem_rng(problem, 0x6D75), len(start) + MUTATION_POOL_DRAWS, start)
    return [(x, None) for x in dict.fromkeys(inputs)]


def mutation_analysis(problem: Problem, sandbox: Any, time_limit_s: float) -> MutationAnalysis | None:
    """The problem's non-equivalent mutants (cached per problem and time limit); None without a reference.

    `time_limit_s`: a program's CPU seconds per test. The reference gets at least 2 s; a mutant gets 10x
    the reference's time, at most what a program gets (a mutant slower than that would fail as a program
    too), but at least 1 s, as the sandbox gives a program (it rounds CPU limits up to whole seconds)."""
    if problem.reference is None:
        return None
    reference_time = max(time_limit_s, 2.0)
    mutant_time = max(MUTANT_MIN_CAP_S, min(sandbox.limits.cpu_time_s, time_limit_s))
    key = (problem.key, problem.reference_hash, reference_time, mutant_time, tuple(problem.judging.items()))
    with _CACHE_LOCK:
        found = _ANALYSES.get(key)
    if found is None:
        found = analyse(sandbox, problem.reference, mutation_pool(problem), reference_time, mutant_time_s=mutant_time,
                        judging=problem.judging)
        with _CACHE_LOCK:
            found = _ANALYSES.setdefault(key, found)
    return found


def load_bank() -> list[Problem]:
    from .bank import PROBLEMS

    return list(PROBLEMS)


@dataclass
class TestCheck:
    """The verdict on one tester test (cached per (input, expected output))."""

    __test__ = False  # not a pytest class
    valid: bool
    reason: str
    killed: frozenset[int]


class raw_env(TextAECEnv):
    metadata = {"render_modes": ["human", "ansi"], "name": "code_v4", "is_parallelizable": False}
    instance_namespace = "code"

    def __init__(self, mode: Literal["mas", "coder"] = "mas", max_turns: int | None = None,
                 problems: str | Path | Sequence[Problem] | None = None,
                 dataset_format: Literal["auto", "apps", "codecontests", "livecodebench"] = "auto",
                 dataset_split: str = "test", hidden_tests: int = 10, time_limit_s: float | None = None,
                 memory_limit_mb: int | None = None, render_mode: str | None = None, sandbox: Any = None):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {sorted(MODES)} (mas = coder + tester), got {mode!r}")
        if max_turns is None:
            max_turns = 1 if mode == "coder" else 4
        if mode == "coder" and max_turns != 1:
            raise ValueError(f"mode='coder' is the one-turn single-agent baseline: leave max_turns unset or 1, got {max_turns}")
        if int(hidden_tests) < 1:
            raise ValueError(f"hidden_tests must be >= 1, got {hidden_tests}")
        if time_limit_s is not None and not float(time_limit_s) > 0:
            raise ValueError(f"time_limit_s must be > 0 seconds (or None: each problem's own limit), got {time_limit_s}")
        if (dataset_format, dataset_split) != ("auto", "test") and not isinstance(problems, (str, Path)):
            raise ValueError("dataset_format and dataset_split describe a problems= file; without one they would do "
                             "nothing: pass problems= or drop them")
        self.mode = mode
        self.hidden_tests = int(hidden_tests)
        self.time_limit_s = None if time_limit_s is None else float(time_limit_s)
        if sandbox is None:
            from llm_marl_envs.sandbox import default_sandbox

            sandbox = default_sandbox()  # cheap: its workers start on first use
        self._sandbox = sandbox
        most = sandbox.limits.memory_mb
        if memory_limit_mb is not None and (isinstance(memory_limit_mb, bool) or not isinstance(memory_limit_mb, int)
                                            or not MIN_MEMORY_MB <= memory_limit_mb <= most):
            raise ValueError(f"memory_limit_mb must be a whole number of MiB from {MIN_MEMORY_MB} (the interpreter's need) to "
                             f"{most} (the sandbox's memory_mb), or None: each problem's own limit; got {memory_limit_mb!r}")
        self.memory_limit_mb = memory_limit_mb
        self._cache = RunCache()
        if problems is None:
            pool = load_bank()
        elif isinstance(problems, (str, Path)):
            pool = load_problems(problems, dataset_format, dataset_split)
        else:
            pool = list(problems) if isinstance(problems, Sequence) else []  # `problems=123`: the message below, not list()'s
            if not pool or not all(isinstance(p, Problem) for p in pool):
                raise ValueError("problems must be None (the shipped bank), a dataset path, or a non-empty list of Problem")
        check_unique(pool)
        self.problems: list[Problem] = pool
        self.from_bank = problems is None
        """The shipped bank draws new hidden tests per instance, so it is not a fixed dataset."""
        self.split_counts = {s: sum(p.split == s for p in pool) for s in SPLITS}
        super().__init__(MODES[mode], max_turns=max_turns, render_mode=render_mode)

    # ------------------------------------------------------------------ runtimes
    def _shared_runtimes(self) -> list[Any]:
        return [self._sandbox, self._cache]

    @property
    def sandbox(self) -> Any:
        return self._sandbox

    # ------------------------------------------------------------------ instances
    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        opts = options or {}
        if opts.get("instance") is None:
            split = check_split(opts.get("split", "train"))
            if not self.split_counts[split]:
                raise ValueError(f"this problem set has no {split!r} problems ({self.split_counts}); reset with another "
                                 "split, or load the dataset with dataset_split=... ('hash' spreads it over all splits)")
        super().reset(seed=seed, options=options)

    def dataset_instances(self, split: str | None = None) -> list[CodeInstance] | None:
        """One instance per loaded problem (of one split, or all, in file order); None for the shipped bank."""
        if self.from_bank:
            return None
        return [instance_for(p) for p in self.problems if split is None or p.split == split]

    def _make_instance(self, rng: np.random.Generator) -> CodeInstance:
        problem = self.problems[int(rng.integers(len(self.problems)))]
        return instance_for(problem, int(rng.integers(_VARIANTS)))

    def _start(self) -> None:
        inst: CodeInstance = self.instance
        self.problem = inst.problem
        self.problem_text = self.problem.text()
        self.history: list[TurnRecord] = []
        self.code: str | None = None
        self.code_note = ""
        self.code_compiles = False
        self.golden_pass: list[bool] = []
        self.prev_golden_pass: list[bool] = []
        """G_{k-1} membership: which golden tests code_{k-1} passed."""
        self.team = 0.0
        self.suite: list[TestCase] = []
        self._checks: dict[tuple[str, str], TestCheck] = {}
        self._golden: tuple[TestCase, ...] | None = None

    def golden(self) -> tuple[TestCase, ...]:
        if self._golden is None:
            self._golden = golden_tests(self.instance, self.hidden_tests, self.sandbox, self.problem_time_limit())
            # Programs get room to print the longest expected output (datasets ship outputs of megabytes).
            self._output_bytes = output_room(self.sandbox.limits.output_bytes, (t.output for t in self._golden))
        return self._golden

    def analysis(self) -> MutationAnalysis | None:
        return mutation_analysis(self.problem, self.sandbox, self.problem_time_limit())

    # ------------------------------------------------------------------ observations
    def _messages(self, agent: str) -> list[Message]:
        turn = min(self.turn, self.max_turns - 1)
        if agent == "tester":
            return prompts.tester_messages(self.problem_text, turn, self.history)
        return prompts.coder_messages(self.problem_text, turn, self.history)

    def _render_state(self) -> str:
        p = self.problem
        lines = [f"problem {p.key} ({p.split}, difficulty {p.difficulty}){': ' + p.title if p.title else ''}"]
        if self.code is not None or self.golden_pass:
            passed = sum(self.golden_pass)
            lines.append(f"program: {self.code_note}; golden tests passed {passed}/{len(self.golden_pass)}")
        if self.suite:
            valid = sum(self._checks[(t.input, t.output)].valid for t in self.suite if (t.input, t.output) in self._checks)
            lines.append(f"tester suite: {len(self.suite)} test(s), {valid} valid")
        return "\n".join(lines)

    # ------------------------------------------------------------------ steps
    def _play(self, agent: str, reply: str) -> Play:
        return self._play_coder(reply) if agent == "coder" else self._play_tester(reply)

    def _limits(self):
        self.golden()  # sets _output_bytes
        return program_limits(self.sandbox, self.problem_time_limit(), self._output_bytes, self.problem_memory_limit())

    def problem_time_limit(self) -> float:
        """CPU seconds a program gets per test of this episode's problem (see `time_limit_s`)."""
        if self.time_limit_s is not None:
            return self.time_limit_s
        # A dataset's limit was set for its judge (C++ first): never below the default a problem without one gets.
        return max(DEFAULT_TIME_LIMIT_S, self.problem.time_limit_s or 0.0)

    def problem_memory_limit(self) -> int:
        """MiB of address space a program gets per test of this episode's problem (see `memory_limit_mb`): its own
        limit (CodeContests' `memory_limit_bytes`) but at least MIN_MEMORY_MB, for the interpreter, and the sandbox's
        `memory_mb` for a problem without one; never more than the sandbox's. The reference keeps the sandbox's."""
        if self.memory_limit_mb is not None:
            return self.memory_limit_mb  # checked at construction: within [MIN_MEMORY_MB, the sandbox's memory_mb]
        own = self.problem.memory_limit_mb
        return min(self.sandbox.limits.memory_mb, max(MIN_MEMORY_MB, own) if own else self.sandbox.limits.memory_mb)

    def _reference_time(self) -> float:
        return max(self.problem_time_limit(), 2.0)

    def _reference_limits(self):
        return program_limits(self.sandbox, self._reference_time())

    def _smoke_inputs(self, golden: tuple[TestCase, ...]) -> list[str]:
        return [ex.input for ex in self.problem.examples] or [golden[0].input]

    def _updated_suite(self, test: TestCase | None) -> tuple[list[TestCase], str]:
        """The tester's suite after `test`: a test with the input of an earlier one replaces it."""
        suite = list(self.suite)
        if test is None:
            return suite, ""
        same = next((i for i, t in enumerate(suite) if t.input.split() == test.input.split()), None)
        if same is None:
            suite.append(test)
            return suite, f"added test {len(suite)}"
        suite[same] = test
        return suite, f"replaced test {same + 1} (same input)"

    def planned_calls(self, agent: str, reply: str) -> list[tuple[Any, tuple[Any, ...]]]:
        """The sandbox runs `step(reply)` makes that are not cached yet: the coder's program on the
        golden and smoke inputs; for the tester, code_k on the updated suite, the reference on the new
        test's input and the mutation batches that input needs (see `_play_coder`, `_play_tester`)."""
        if agent == "coder":
            code, _ = parse_code(reply)
            if code is None or compile_error(code) is not None:
                return []
            golden = self.golden()
            runs = [(job, self._limits()) for job in program_jobs(code, [t.input for t in golden] + self._smoke_inputs(golden),
                                                                  self._limits(), self._cache)]
        else:
            test, _ = parse_test(reply)
            suite, _ = self._updated_suite(test)
            runs = []
            if self.code is not None and self.code_compiles:
                runs += [(job, self._limits()) for job in program_jobs(self.code, [t.input for t in suite], self._limits(), self._cache)]
            if test is not None and (test.input, test.output) not in self._checks and self.problem.reference is not None:
                reference, limits = self.problem.reference, self._reference_limits()
                runs += [(job, limits) for job in program_jobs(reference, [test.input], limits, self._cache)]
                analysis = self.analysis()
                if analysis is not None and analysis.available:
                    runs += [((code, stdin), limits) for code, stdin, limits in
                             analysis.planned_kills(self.sandbox, reference, test.input)]
        return [(self.sandbox, job, {"limits": limits}) for job, limits in runs]

    def _play_coder(self, reply: str) -> Play:
        """Coder terms (A.1.2): build, run (smoke subset), nr (non-regression on G_{k-1})."""
        golden = self.golden()
        code, error = parse_code(reply)
        status = "no_code"
        golden_pass = [False] * len(golden)
        build = run_ok = 0.0
        if code is not None:
            exc = compile_error(code)
            if exc is None:
                build = 1.0
            else:
                status, error = "syntax_error", f"the program does not compile: {type(exc).__name__}: {exc}"[:300]
        if build:
            smoke = self._smoke_inputs(golden)
            results = run_program(self.sandbox, code, [t.input for t in golden] + smoke, self._limits(), self._cache)
            golden_pass = [passes(r, t.output, **self.problem.judging) for r, t in zip(results, golden)]
            failed = [r for r in results[len(golden):] if not r.ok]
            run_ok = float(not failed)
            status = "ok" if run_ok else "smoke_failed"
            if failed:
                error = f"the program failed on the example input ({failed[0].status})"
        kept = [i for i, ok in enumerate(self.prev_golden_pass) if ok]
        nr = sum(golden_pass[i] for i in kept) / len(kept) if kept else 1.0
        if code is None:
            nr = 0.0  # no program, no logs: the mask is 0 and every term is reported as 0
        p = sum(golden_pass) / len(golden) if golden else 0.0
        breakdown = RewardBreakdown(p, {"build": build, "run": run_ok, "nr": nr}, CODER_COEF,
                                    mask=0.0 if code is None else 1.0, lam=LAMBDA_CODE)
        self.code, self.code_compiles, self.team = code, bool(build), p
        self.code_note = {"ok": "compiled; ran on the example", "smoke_failed": "compiled; failed on the example",
                          "syntax_error": "does not compile", "no_code": "no code block"}[status]
        self.prev_golden_pass, self.golden_pass = golden_pass, golden_pass
        details = {"code_status": status, "golden_passed": int(sum(golden_pass)), "golden_total": len(golden)}
        if self.mode == "coder":
            self.turn += 1
            return Play(breakdown, None, success=bool(golden) and all(golden_pass), parse_error=error, details=details)
        return Play(breakdown, "tester", parse_error=error, details=details)

    def _check(self, test: TestCase) -> TestCheck:
        """valid = executable, deterministic, consistent with the reference; and which mutants it kills."""
        key = (test.input, test.output)
        if key in self._checks:
            return self._checks[key]
        if self.problem.reference is None:
            check = TestCheck(False, "no reference solution to check tests against", frozenset())
        else:
            analysis = self.analysis()
            with ThreadPoolExecutor(2) as pool:
                process = pool.submit(run_program, self.sandbox, self.problem.reference, [test.input],
                                      self._reference_limits(), self._cache)
                batch = pool.submit(analysis.kills, self.sandbox, self.problem.reference, test.input) \
                    if analysis is not None and analysis.available else None
                first = process.result()[0]
                second = batch.result() if batch is not None else None
            killed: frozenset[int] = frozenset()
            if not first.ok:
                check = TestCheck(False, f"the reference solution fails on this input ({first.status})", killed)
            elif second is not None and (second[0] != "ok" or not outputs_match(first.stdout, second[1], **self.problem.judging)):
                check = TestCheck(False, "the reference solution's output on this input is not reproducible", killed)
            elif not outputs_match(first.stdout, test.output, **self.problem.judging):
                check = TestCheck(False, "the expected output disagrees with the reference solution", killed)
            else:
                check = TestCheck(True, "valid", second[2] if second is not None else killed)
        self._checks[key] = check
        return check

    def _play_tester(self, reply: str) -> Play:
        """Tester terms (A.1.2): valid (this turn's test), cov = min(1, MutScore/τ_mut) over the suite."""
        test, error = parse_test(reply)
        check: TestCheck | None = None
        self.suite, note = self._updated_suite(test)
        if test is None:
            note = f"no parsable test ({error})"
        with ThreadPoolExecutor(1) as background:
            # code_k on the suite (the stopping rule) runs while the test is checked.
            suite_runs = background.submit(self._run_suite)
            if test is not None:
                check = self._check(test)
            analysis = self.analysis()
            checks = [self._check(t) for t in self.suite]
            runs = suite_runs.result()
        killed = frozenset().union(*(c.killed for c in checks if c.valid)) if checks else frozenset()
        available = analysis is not None and analysis.available
        score = analysis.score(killed) if available else 0.0
        terms = {"valid": float(check is not None and check.valid), "cov": min(1.0, score / TAU_MUT) if available else 0.0}
        breakdown = RewardBreakdown(self.team, terms, TESTER_COEF, mask=1.0 if available else 0.0, lam=LAMBDA_CODE)
        self.history.append(TurnRecord(self.turn, self.code, self.code_note, runs, note))
        self.turn += 1
        suite_passed = bool(runs) and all(r.passed for r in runs)
        details = {
            "test_valid": bool(check is not None and check.valid), "test_check": check.reason if check else (error or ""),
            "suite_size": len(self.suite), "mutants_killed": len(killed) if available else 0,
            "mutants_total": len(analysis.mutants) if available else 0, "suite_passed": suite_passed,
        }
        done = suite_passed or self.turn >= self.max_turns
        success = done and bool(self.golden_pass) and all(self.golden_pass)
        # Agreement on the tester's suite ends the workflow: a terminal state even when the program
        # fails the golden tests.
        return Play(breakdown, None if done else "coder", success=success, terminated=suite_passed,
                    parse_error=error, details=details)

    def _run_suite(self) -> list[TestRun]:
        """code_k on every test of the tester's suite, for the stopping rule and the mismatch history."""
        if self.code is None or not self.code_compiles:
            reason = "not run: no program" if self.code is None else "not run: the program does not compile"
            return [TestRun(t, reason, "", False) for t in self.suite]
        results = run_program(self.sandbox, self.code, [t.input for t in self.suite], self._limits(), self._cache)
        return [TestRun(t, r.status, r.stdout if r.ok else r.stdout + r.stderr[-600:],
                        passes(r, t.output, **self.problem.judging))
                for t, r in zip(self.suite, results)]

