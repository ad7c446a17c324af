"""The shipped problem bank: size, graded difficulty, disjoint splits, seeded hidden tests, and every
reference solution passing its examples and its hidden tests when run as a normal sandboxed program."""

from __future__ import annotations

from collections import Counter

import pytest

from llm_marl_envs.code import bank
from llm_marl_envs.code.env import hidden_inputs, instance_for, mutation_analysis, raw_env
from llm_marl_envs.code.env import golden_tests as golden_of
from llm_marl_envs.code.mutation import generate_mutants
from llm_marl_envs.code.runner import passes, program_limits
from llm_marl_envs.core.instances import SPLITS, draw_instance
from llm_marl_envs.sandbox import Sandbox, SandboxLimits

PROBLEMS = bank.PROBLEMS
HIDDEN = 10


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxLimits(wall_time_s=5.0, cpu_time_s=5.0, memory_mb=512)) as sb:
        yield sb


def test_bank_size_difficulty_and_splits():
    assert len(PROBLEMS) >= 80
    assert len({p.id for p in PROBLEMS}) == len(PROBLEMS)
    assert len({p.text() for p in PROBLEMS}) == len(PROBLEMS)  # the oracle looks problems up by text
    counts = Counter((p.split, p.difficulty) for p in PROBLEMS)
    for split in SPLITS:
        for level in (1, 2, 3):
            assert counts[(split, level)] >= 3, (split, level)
    assert sum(p.split == "test" for p in PROBLEMS) >= 15


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.id)
def test_problem_record(problem):
    assert problem.title and problem.examples and len(problem.edge_inputs) <= 2
    assert "Input:" in problem.statement and "Output:" in problem.statement and "```" not in problem.text()
    first = hidden_inputs(instance_for(problem), HIDDEN)
    assert hidden_inputs(instance_for(problem), HIDDEN) == first  # seeded: same variant, same tests
    assert len(set(first)) == HIDDEN and len(set(first) - set(problem.edge_inputs)) >= 8
    other = hidden_inputs(instance_for(problem, 10**6), HIDDEN)
    assert other != first
    assert generate_mutants(problem.reference), "no mutation site in the reference solution"


def test_every_reference_passes_its_examples_and_hidden_tests(sandbox):
    """Expected outputs come from the reference in the batch harness; here the reference runs as an
    ordinary program, one process per test, and must pass every example and hidden test."""
    jobs, expected, owner = [], [], []
    for problem in PROBLEMS:
        tests = list(problem.examples) + list(golden_of(instance_for(problem, 7), HIDDEN, sandbox, 1.0))
        for t in tests:
            jobs.append((problem.reference, t.input))
            expected.append(t.output)
            owner.append(problem.id)
    results = sandbox.run_many(jobs, program_limits(sandbox, 2.0))
    failures = sorted({pid for pid, r, out in zip(owner, results, expected) if not passes(r, out)})
    assert not failures, f"reference solutions failing their tests: {failures}"
    assert len(jobs) >= len(PROBLEMS) * (HIDDEN + 1)


def test_instances_stay_in_their_problem_split():
    env = raw_env()
    seen = {split: set() for split in SPLITS}
    for split in SPLITS:
        for seed in range(300):
            instance = draw_instance(env.instance_namespace, split, seed, env._make_instance)
            assert instance.problem.split == split
            seen[split].add(instance.problem.id)
    assert seen["test"] == {p.id for p in PROBLEMS if p.split == "test"}


def test_test_split_mutation_analysis(sandbox):
    for problem in PROBLEMS:
        if problem.split != "test":
            continue
        analysis = mutation_analysis(problem, sandbox, 1.0)
        assert analysis.available and len(analysis.mutants) >= 3, problem.id
        assert analysis.generated >= len(analysis.mutants)
