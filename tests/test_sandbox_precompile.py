"""Programs compiled by the owner (`llm_marl_envs/sandbox/_precompile.py`): the child runs exactly the
code its own compile would make, and everything the compile would print is still printed."""

from __future__ import annotations

import binascii
import itertools
import marshal
import warnings
from dataclasses import asdict

import pytest

from llm_marl_envs.code.bank import PROBLEMS
from llm_marl_envs.code.mutation import generate_mutants
from llm_marl_envs.code.runner import HARNESS
from llm_marl_envs.sandbox import Sandbox, SandboxLimits, pool

from llm_marl_envs.sandbox import _precompile
from llm_marl_envs.sandbox._precompile import MAX_CHARS, SUPPORTED, owner_compiled, precompiled, seen_before

LIMITS = SandboxLimits(wall_time_s=5.0, cpu_time_s=5.0, memory_mb=256, output_bytes=10_000)
only_311 = pytest.mark.skipif(not SUPPORTED, reason="the owner compiles programs on Python 3.11 only (its warnings are checked)")


@pytest.mark.skipif(SUPPORTED, reason="on Python 3.11 the owner compiles programs (the tests below)")
def test_on_another_python_every_program_is_compiled_by_the_child():
    assert precompiled("print(1)") is None and precompiled(HARNESS) is None
    assert owner_compiled(HARNESS) is None
    assert owner_compiled(HARNESS) is None  # its second run too: nothing is compiled by the owner


def _child_compile(source: str):
    """The child's compile (`_run.run`), and whether it warned."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = compile(source, "main.py", "exec", dont_inherit=True)
    return code, bool(caught)


@only_311
def test_the_owner_compiles_what_the_child_would():
    """Over the bank's references, every mutant of them and the tester's harness: what the owner
    compiles is equal to the child's code object, line and column tables included."""
    corpus = [HARNESS]
    for problem in PROBLEMS:
        corpus += [problem.reference, *(m.source for m in generate_mutants(problem.reference))]
    compiled = [(source, precompiled(source)) for source in corpus]
    assert sum(data is not None for _, data in compiled) >= 0.9 * len(corpus)
    for source, data in compiled:
        if data is not None:
            mine, (theirs, warned) = marshal.loads(binascii.a2b_base64(data)), _child_compile(source)
            assert mine == theirs and not warned
            assert list(mine.co_positions()) == list(theirs.co_positions())
            assert list(mine.co_lines()) == list(theirs.co_lines())


WARNING_PROGRAMS = [
    "x = 1\nprint(x is 1)", "print(x is not 'a')", "print(x is -1)", "print(x is (1, 2))", "print(x is 'ab'[0])",
    "assert (x, 'message')", "print('abc'(1))", "print([1, 2](3))", "print(f'{x}'(1))", "print((1, 2)(3))",
    "print(1[0])", "print({1, 2}[0])", "print([1, 2]['a'])", "print((1, 2)[1.5])", "print('abc'['x'])",
    "print(1if x else 2)", "print(0x1for x in y)", "print(1or 2)", "print(0o7and 1)", "print(1.5in y)",
]


@only_311
@pytest.mark.parametrize("source", WARNING_PROGRAMS)
def test_a_program_that_warns_while_compiling_is_left_to_the_child(source):
    assert _child_compile(source)[1], "not a program that warns: the test is wrong"
    assert precompiled(source) is None


@only_311
def test_nothing_the_owner_compiles_warns():
    """Operands, callers, subscripted values, asserts and number-keyword pairs of every kind,
    combined: whatever the owner compiles compiles without a warning."""
    operands = ["x", "x.y", "f(x)", "x[0]", "x[0][1]", "None", "True", "...", "1", "-1", "'a'", "b'a'", "1.5", "1j",
                "(1, 2)", "(x, 1)", "()", "[1]", "{1}", "{1: 2}", "f'{x}'", "'ab'[0]", "(1 + 2)", "(x + 1)",
                "(lambda: 1)", "[i for i in x]", "{i for i in x}", "(i for i in x)", "(x if y else 1)", "not x"]
    shapes = ["print({a} is {b})", "print({a} is not {b})", "print({a}({b}))", "print({a}[{b}])", "assert {a}, {b}",
              "assert ({a}, {b})", "print({a} == {b})", "y = {a}\nz = {b}"]
    numbers = ["1", "0x1f", "0o7", "0b1", "1.5", "1e5", "1j", "1_0"]
    keywords = ["and", "else", "for", "if", "in", "is", "not", "or"]
    sources = [shape.format(a=a, b=b) for shape in shapes for a, b in itertools.product(operands, repeat=2)]
    sources += [f"print({n}{k} x)" for n in numbers for k in keywords] + [f"print({n} {k} x)" for n in numbers for k in keywords]
    owner_compiled = 0
    for source in sources:
        if precompiled(source) is not None:
            owner_compiled += 1
            assert not _child_compile(source)[1], source
    assert owner_compiled > len(sources) // 3  # the check does not turn every program away


def test_long_or_broken_programs_are_left_to_the_child():
    assert precompiled("x = 1\n" * (MAX_CHARS // 6 + 1)) is None
    assert precompiled("def (:") is None and precompiled("print('\0')") is None
    assert precompiled("x = " + "(" * 300 + "1" + ")" * 300) is None  # too deep for the parser


PROGRAMS = [
    ("print(input()[::-1])", "abc\n"), ("import sys\nprint(sys.argv, __name__, sys.stdin.read())", "a b\n"),
    ("def f(n):\n    return n * f(n - 1) if n else 1\nprint(f(10))", ""), ("x = 1\nraise ValueError(x)", ""),
    ("def (:", ""), ("print(1 is 1)", ""), ("import sys\nsys.exit(3)", ""), ("assert 1 == 2, 'no'", ""),
    ("class A:\n    '''doc'''\n    def m(self):\n        return f'{self!r:>5}'\nprint(A.__doc__, len(A().m()))", ""),
    ("print(__builtins__ is not None, [k for k in globals() if not k.startswith('__')])", ""),
]


@only_311
def test_a_program_runs_the_same_compiled_by_the_owner_or_by_the_child(monkeypatch):
    """A program that runs again is compiled by the owner (the first run is compiled by the child):
    every result is the same as the child's compile gives."""
    sent: list[bool] = []
    job = pool._job

    def recording_job(code, stdin, limits):
        made = job(code, stdin, limits)
        sent.append("compiled" in made)
        return made

    monkeypatch.setattr(pool, "_job", recording_job)
    with Sandbox(LIMITS, workers=2) as sandbox:
        programs = [(code + f"\n# {id(sent)}", stdin) for code, stdin in PROGRAMS]  # new to this process
        first = [sandbox.run(code, stdin) for code, stdin in programs]
        again = [sandbox.run(code, stdin) for code, stdin in programs] + sandbox.run_many(programs)
        assert not any(sent[:len(programs)]) and sum(sent[len(programs):]) >= 12
        monkeypatch.setattr(pool, "owner_compiled", lambda source: None)
        child = [sandbox.run(code, stdin) for code, stdin in programs] + sandbox.run_many(programs)
    assert again == child and first == child[:len(programs)]


def test_a_program_is_counted_as_seen_after_its_first_run():
    source = f"print({id(LIMITS)} + 1)"
    assert not seen_before(source) and seen_before(source) and seen_before(source)
    for i in range(_precompile._SEEN_MAX + 1):  # the oldest is forgotten
        seen_before(f"x = {i}")
    assert not seen_before(source)


def test_compiled_data_that_is_not_code_is_not_run():
    with Sandbox(LIMITS, workers=1) as sandbox:
        job = {"code": "print(1)", "stdin": "", "limits": asdict(LIMITS),
               "compiled": binascii.b2a_base64(marshal.dumps(123)).decode()}
        result = sandbox._submit(job, LIMITS)
        assert result.status == "crash" and "[sandbox] setup failed: " in result.stderr and result.stdout == ""
        assert sandbox.run("print(2)").stdout == "2\n"


@only_311
def test_a_batch_of_new_programs_leaves_each_to_the_child(monkeypatch):
    """A job a batch could not yet queue behind a running one keeps the call it made: its program
    still counts as run once, so the child compiles it (the owner's compile costs more than it
    saves for a program run once)."""
    sent: list[bool] = []  # whether each job that reached a server carried the owner's code
    send, send_queued = pool._Worker.send, pool._Worker.send_queued

    def recording_send(worker, job, deadline):
        sent.append("compiled" in job)
        return send(worker, job, deadline)

    def recording_send_queued(worker, job):
        queued = send_queued(worker, job)
        if queued:
            sent.append("compiled" in job)
        return queued

    monkeypatch.setattr(pool._Worker, "send", recording_send)
    monkeypatch.setattr(pool._Worker, "send_queued", recording_send_queued)
    with Sandbox(LIMITS, workers=2) as sandbox:
        programs = [(f"import time\ntime.sleep(0.05)\nprint({i}, {id(sent)})", "") for i in range(8)]
        assert [r.stdout.split()[0] for r in sandbox.run_many(programs)] == [str(i) for i in range(8)]
    assert sent == [False] * 8
