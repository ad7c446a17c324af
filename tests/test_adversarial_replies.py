"""No reply raises from `env.step` (issue 11 #6): hostile programs are penalised, reported actions,
and a poisoned reply in one fork leaves the environment and its other forks untouched."""

from __future__ import annotations

import pytest

import llm_marl_envs
from llm_marl_envs.core.text import compile_error
from tests.envs.adversarial import POISON, RECURSING_PROGRAM, env_names, reach, snapshot


@pytest.fixture(scope="module")
def fast_sandbox():
    from llm_marl_envs.sandbox import Sandbox, SandboxLimits

    with Sandbox(SandboxLimits(wall_time_s=1.0, cpu_time_s=1.0, memory_mb=256)) as sandbox:
        yield sandbox


@pytest.mark.parametrize("program,error", [
    ("print(1)", None),
    ("a." * 3000 + "a", RecursionError),
    ("-" * 100_000 + "1", MemoryError),
    ("print('\x00')", (SyntaxError, ValueError)),
    ("print('\ud800')", (SyntaxError, ValueError)),
    ("def f(:", SyntaxError),
])
def test_compile_error_never_raises(program, error):
    found = compile_error(program)
    assert found is None if error is None else isinstance(found, error)


# (env, the role that writes programs): every environment that compiles a reply's program.
PROGRAM_ROLES = [("plan_path", "tool"), ("sokoban", "tool"), ("sudoku", "tool"), ("math", "tool"), ("code", "coder")]


@pytest.mark.parametrize("name,role", PROGRAM_ROLES)
def test_a_program_that_makes_compile_recurse_is_a_penalised_action(name, role, fast_sandbox):
    env = reach(llm_marl_envs.registry.make_raw(name, sandbox=fast_sandbox), role)
    env.step(RECURSING_PROGRAM)
    info = env.infos[role]
    assert info["parse_error"] is not None
    terms = info["local_terms"]
    assert terms.get("fmt", terms.get("build")) == 0.0  # the format (code: build) term is lost
    assert env.infos[role].get("code_status", env.infos[role].get("tool_status")) in ("error", "syntax_error")
