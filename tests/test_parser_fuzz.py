"""Parser fuzzing of every environment and role (issue 11), seeded and bounded in time.

Every role gets at least 10,000 replies (hypothesis, derandomized: the same replies on every run)
through `env.step`, on forks of an environment at that role's turn, from grammar-aware strategies
(`tests/envs/grammar.py`: near misses of the real formats) as well as random text. Tool programs
run on a stand-in sandbox that prints fuzzed output, so the program's output is fuzzed through the
proposal parsers as well; the code environment's roles, whose every step runs programs, get their
parsers fuzzed directly. A smaller budget of replies then goes through `env.step` with the real
sandbox. After each step: no exception, finite rewards, JSON-friendly infos with a `parse_error`
key, and an observation inside the observation space.
"""

from __future__ import annotations

import json
import math
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import llm_marl_envs
from llm_marl_envs.code.parse import parse_code, parse_test
from llm_marl_envs.core.text import compile_error
from llm_marl_envs.sandbox import ExecResult, Sandbox, SandboxLimits
from tests.envs.adversarial import reach
from tests.envs.grammar import PRINTED_OUTPUT, REPLIES, RUNNABLE, mutate

# Compiling fuzzed programs warns about their escape sequences; that is the program's business.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::SyntaxWarning")

REPLIES_PER_ROLE = 10_000
BATCH = 50
"""Replies per hypothesis example: each example draws grammar-built seeds and a seeded random
generator, and the batch is made of near misses of those seeds (`grammar.mutate`); one hypothesis
example per reply would spend the whole budget inside hypothesis."""


def fuzz(strategy: st.SearchStrategy, check, replies: int = REPLIES_PER_ROLE, *extra: st.SearchStrategy) -> int:
    """Run `check(reply, *extras)` on `replies` near misses of seeds drawn from `strategy` (and
    from each `extra` strategy); seeded, so every run sees the same replies. Returns the count."""
    batch = min(BATCH, replies)
    done = 0
    if replies < BATCH:  # a small budget: every reply straight from the strategy, no mutation

        @settings(max_examples=replies, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
        @given(strategy)
        def each(reply):
            nonlocal done
            check(reply)
            done += 1

        each()
        return done

    @settings(max_examples=-(-replies // batch), derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(st.lists(strategy, min_size=2, max_size=2), st.tuples(*(st.lists(e, min_size=2, max_size=2) for e in extra)),
           st.integers(0, 2**32 - 1))
    def run(seeds, extra_seeds, seed):
        nonlocal done
        rnd = random.Random(seed)  # plain Random: hypothesis's st.randoms() costs ~50 us a call
        for _ in range(batch):
            check(mutate(rnd, seeds), *(mutate(rnd, s) for s in extra_seeds))
            done += 1

    run()
    return done


class PrintingSandbox:
    """Stands in for the sandbox: every program "prints" the fuzzed output set before the step."""

    def __init__(self):
        self.result = ExecResult("", "", 0, "ok")

    def __deepcopy__(self, memo):
        return self

    def run(self, code, stdin="", limits=None):
        return self.result


def check_step(env, agent: str, reply: str) -> None:
    env.step(reply)
    assert all(math.isfinite(r) for r in env.rewards.values())
    info = env.infos[agent]
    assert "parse_error" in info and math.isfinite(info["reward"])
    json.dumps(env.infos)  # JSON-friendly facts only
    nxt = env.agent_selection
    assert env.observation_space(nxt).contains(env.observe(nxt))


# (env, variant kwargs, role, reply format): every role of every environment whose step runs no
# program, or runs it on the stand-in sandbox. The puzzles' roles are fuzzed in their single-role
# variants, where the role keeps the turn (the same parsers and `_play` code as in "mas"): one fork
# then takes several replies, at later turns too. The "mas" steps are the poisoned-fork tests'.
STEP_ROLES = [
    ("plan_path", {"mode": "tool"}, "tool", "moves"), ("plan_path", {"mode": "planner"}, "planner", "moves"),
    ("sokoban", {"mode": "tool"}, "tool", "moves"), ("sokoban", {"mode": "planner"}, "planner", "moves"),
    ("sudoku", {"mode": "tool"}, "tool", "sudoku"), ("sudoku", {"mode": "planner"}, "planner", "sudoku"),
    ("math", {"mode": "reasoner"}, "reasoner", "math"), ("math", {"mode": "tool"}, "tool", "math"),
    ("deep_search", {}, "planner", "deep_search"), ("deep_search", {}, "worker_0", "deep_search"),
    ("deep_search", {"mode": "single"}, "planner", "deep_search"),
    ("mass", {}, "rewriter", "rewriter"), ("mass", {}, "reranker", "reranker"), ("mass", {}, "answerer", "answerer"),
    ("mass", {"mode": "single"}, "answerer", "answerer"),
]


class AtRole:
    """Forks of an environment at `role`'s turn: a fork serves replies while the turn stays `role`'s."""

    def __init__(self, env, role: str):
        self.env, self.role, self.current = env, role, None

    def __call__(self):
        c = self.current
        if c is None or c.agent_selection != self.role or c.terminations[self.role] or c.truncations[self.role]:
            self.current = self.env.fork()
        return self.current


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name,kwargs,role,fmt", STEP_ROLES, ids=[f"{n}-{r}-{kw.get('mode', 'mas')}" for n, kw, r, _ in STEP_ROLES])
def test_every_reply_is_a_legal_action(name, kwargs, role, fmt):
    sandbox = PrintingSandbox()
    env = reach(llm_marl_envs.registry.make_raw(name, **kwargs), role)
    env._sandbox = sandbox if hasattr(env, "_sandbox") else None  # programs print the fuzzed output
    at_role = AtRole(env, role)

    def check(reply, printed=""):
        # The status rides on the printed text, so one seeded stream decides both.
        status = "ok" if len(printed) % 4 else ("error", "timeout")[len(printed) % 8 // 4]
        sandbox.result = ExecResult(printed, "", 0 if status == "ok" else 1, status)
        check_step(at_role(), role, reply)

    outputs = (PRINTED_OUTPUT,) if role == "tool" else ()
    assert fuzz(REPLIES[fmt], check, REPLIES_PER_ROLE, *outputs) >= REPLIES_PER_ROLE


def _code_parsers(reply: str) -> None:
    code, error = parse_code(reply)
    assert (code is None) != (error is None)
    if code is not None:
        compile_error(code)
    test, error = parse_test(reply)
    assert (test is None) != (error is None)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("fmt", ["coder", "tester"])
def test_code_parsers_take_every_reply(fmt):
    assert fuzz(REPLIES[fmt], _code_parsers) >= REPLIES_PER_ROLE


# ------------------------------------------------------------------ the real sandbox, a smaller budget
SANDBOX_ROLES = [("plan_path", "tool", 40), ("sokoban", "tool", 40), ("sudoku", "tool", 40), ("math", "tool", 40),
                 ("code", "coder", 25), ("code", "tester", 25)]


@pytest.fixture(scope="module")
def fast_sandbox():
    with Sandbox(SandboxLimits(wall_time_s=1.0, cpu_time_s=1.0, memory_mb=256)) as sandbox:
        yield sandbox


@pytest.mark.timeout(180)
@pytest.mark.parametrize("name,role,budget", SANDBOX_ROLES, ids=[f"{n}-{r}" for n, r, _ in SANDBOX_ROLES])
def test_replies_that_run_programs_are_legal_actions(name, role, budget, fast_sandbox):
    at_role = reach(llm_marl_envs.registry.make_raw(name, sandbox=fast_sandbox), role)
    strategy = REPLIES["tester"] if role == "tester" else RUNNABLE
    assert fuzz(strategy, lambda reply: check_step(at_role.fork(), role, reply), budget) >= budget
