"""No reply raises from `env.step` (issue 11 #6): hostile programs are penalised, reported actions,
and a poisoned reply in one fork leaves the environment and its other forks untouched."""

from __future__ import annotations

import pytest

import llm_marl_envs
from llm_marl_envs.core.text import compile_error
from tests.envs.adversarial import (PARSER_OVERFLOW_PROGRAM, PARSER_OVERFLOW_SOURCE, POISON, RECURSING_PROGRAM,
                                    RECURSING_SOURCE, env_names, reach, snapshot)


@pytest.fixture(scope="module")
def fast_sandbox():
    from llm_marl_envs.sandbox import Sandbox, SandboxLimits

    with Sandbox(SandboxLimits(wall_time_s=1.0, cpu_time_s=1.0, memory_mb=256)) as sandbox:
        yield sandbox


@pytest.mark.parametrize("program,error", [
    ("print(1)", None),
    (RECURSING_SOURCE, RecursionError),
    (PARSER_OVERFLOW_SOURCE, MemoryError),
    ("print('\x00')", (SyntaxError, ValueError)),
    ("print('\ud800')", (SyntaxError, ValueError)),
    ("def f(:", SyntaxError),
])
def test_compile_error_never_raises(program, error):
    found = compile_error(program)
    assert found is None if error is None else isinstance(found, error)


# (env, the role that writes programs): every environment that compiles a reply's program.
PROGRAM_ROLES = [("plan_path", "tool"), ("sokoban", "tool"), ("sudoku", "tool"), ("math", "tool"), ("code", "coder")]
# Programs on which compile raises something other than SyntaxError. The math tool refuses a program
# longer than 16,000 characters before compiling it, and the deep nestings tried (attribute chains,
# binary operators) make Python 3.13's compiler recurse only beyond that length: math gets the
# parser's MemoryError only.
UNCOMPILABLE = [(name, role, program) for name, role in PROGRAM_ROLES
                for program in ("recursion", "parser_overflow") if (name, program) != ("math", "recursion")]


@pytest.mark.parametrize("name,role,program", UNCOMPILABLE)
def test_a_program_that_compile_cannot_take_is_a_penalised_action(name, role, program, fast_sandbox):
    env = reach(llm_marl_envs.registry.make_raw(name, sandbox=fast_sandbox), role)
    env.step({"recursion": RECURSING_PROGRAM, "parser_overflow": PARSER_OVERFLOW_PROGRAM}[program])
    info = env.infos[role]
    assert "does not compile" in info["parse_error"]  # compile's error, not a failed run
    terms = info["local_terms"]
    assert terms.get("fmt", terms.get("build")) == 0.0  # the format (code: build) term is lost
    assert env.infos[role].get("code_status", env.infos[role].get("tool_status")) in ("error", "syntax_error")


# Every variant of every environment (mas and the single-agent baselines).
VARIANTS = [(name, variant, kwargs) for name in env_names() for variant, kwargs in llm_marl_envs.registry.get(name).variants]


@pytest.mark.parametrize("name,variant,kwargs", VARIANTS, ids=[f"{n}-{v}" for n, v, _ in VARIANTS])
def test_a_poisoned_reply_in_one_fork_leaves_the_others_untouched(name, variant, kwargs, fast_sandbox):
    """The environment side of "a tree rollout with one poisoned candidate completes": at every
    turn of an oracle episode, each hostile reply is stepped in its own fork and returns normally;
    the environment and a sibling fork are unchanged, and the sibling then plays on exactly like
    the environment."""
    from agents.oracle import make_oracle

    env = llm_marl_envs.registry.make_raw(name, sandbox=fast_sandbox, **kwargs)
    oracle = make_oracle(name)
    env.reset(seed=1, options={"split": "test"})
    oracle.reset(1)
    sibling = env.fork()
    roles_seen = set()
    while not (all(env.terminations.values()) or all(env.truncations.values())):
        agent = env.agent_selection
        roles_seen.add(agent)
        before = snapshot(env)
        for label, poison in POISON.items():
            poisoned = env.fork()
            poisoned.step(poison)  # returns normally: the reply is an action like any other
            assert env.agent_selection == agent, label
        assert snapshot(env) == before and snapshot(sibling) == before
        reply = oracle.act(agent, env.observe(agent))
        env.step(reply)
        sibling.step(reply)
        assert snapshot(sibling) == snapshot(env)
    entry = llm_marl_envs.registry.get(name)
    assert roles_seen >= set(env.possible_agents) & set(entry.roles[:3]), roles_seen  # workers beyond the hops never act
