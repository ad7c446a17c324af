"""The sandbox contains hostile programs and still runs honest ones (issue 2, item 3)."""

from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest

from llm_marl_envs.sandbox import ExecResult, Sandbox, SandboxLimits, default_sandbox

LIMITS = SandboxLimits(wall_time_s=2.0, cpu_time_s=2.0, memory_mb=256, output_bytes=10_000)


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(LIMITS, workers=2) as sb:
        yield sb


def descendants(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children = (task / "children").read_text().split()
        for child in map(int, children):
            out += [child, *descendants(child)]
    return out


def assert_nothing_left(sandbox: Sandbox) -> None:
    for worker in sandbox._all:
        assert descendants(worker.proc.pid) == [], "a sandboxed process outlived its run"


@pytest.mark.parametrize(
    "code,stdin,status,stdout",
    [
        ("print(sum(range(10)))", "", "ok", "45\n"),
        ("print(input()[::-1])", "hello\n", "ok", "olleh\n"),
        ("import sys\nsys.stderr.write('warning\\n')\nprint(1)", "", "ok", "1\n"),  # stderr is not failure
        ("raise SystemExit(3)", "", "error", ""),
        ("raise ValueError('boom')", "", "error", ""),
        ("def (", "", "error", ""),
        ("open('notes.txt', 'w').write('hi')\nprint(open('notes.txt').read())", "", "ok", "hi\n"),
        ("import json, math, itertools, heapq\nprint(json.dumps([math.comb(5, 2)]))", "", "ok", "[10]\n"),
    ],
)
def test_honest_and_failing_programs(sandbox, code, stdin, status, stdout):
    result = sandbox.run(code, stdin)
    assert result.status == status, result
    assert result.stdout == stdout
    assert result.ok == (status == "ok")


def test_errors_report_the_traceback_and_exit_code(sandbox):
    result = sandbox.run("x = 1\nraise ValueError('boom')")
    assert result.exit_code == 1
    assert 'File "main.py", line 2' in result.stderr and "ValueError: boom" in result.stderr
    assert sandbox.run("raise SystemExit(3)").exit_code == 3


HOSTILE = {
    "infinite loop": ("while True:\n    pass", {"timeout"}),
    "sleeping forever": ("import time\ntime.sleep(1000)", {"timeout"}),
    "fork bomb": ("import os\nwhile True:\n    os.fork()", {"blocked"}),
    "subprocess": ("import subprocess\nsubprocess.run(['sleep', '100'])", {"blocked"}),
    "os.system": ("import os\nos.system('sleep 100 &')", {"blocked"}),
    "memory bomb": ("x = bytearray(10**10)", {"memory"}),
    "growing memory": ("chunks = []\nwhile True:\n    chunks.append(' ' * 10**6)", {"memory"}),
    "100 MB of output": ("print('x' * 100_000_000)", {"output_limit"}),
    "output loop": ("while True:\n    print('spam' * 100)", {"output_limit"}),
    "network to loopback": ("import socket\nsocket.create_connection(('127.0.0.1', 9), timeout=1)", {"blocked"}),
    "network to an address": ("import socket\ns = socket.socket()\ns.connect(('1.1.1.1', 80))", {"blocked"}),
    "ctypes escape": ("import ctypes\nctypes.CDLL(None).system(b'id')", {"blocked"}),
    "caught violation": ("try:\n    open('/tmp/x_llm_marl_caught', 'w')\nexcept BaseException:\n    print('escaped')", {"blocked"}),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_programs_are_stopped_and_reported(sandbox, name):
    code, statuses = HOSTILE[name]
    result = sandbox.run(code)
    assert result.status in statuses, result
    assert "escaped" not in result.stdout
    assert len(result.stdout) + len(result.stderr) <= LIMITS.output_bytes + 200
    assert_nothing_left(sandbox)
    assert sandbox.run("print('still works')").stdout == "still works\n"


def test_writing_outside_its_directory_is_blocked(sandbox, tmp_path):
    target = tmp_path / "escape.txt"
    for code in (f"open({str(target)!r}, 'w').write('x')", f"import os\nos.remove({str(tmp_path)!r})",
                 "open('../escape.txt', 'w').write('x')", "import os\nos.mkdir('/tmp/llm_marl_escape_dir')"):
        result = sandbox.run(code)
        assert result.status == "blocked", (code, result)
    assert not target.exists() and not os.path.exists("/tmp/llm_marl_escape_dir")


def test_reading_outside_its_directory_is_blocked(sandbox, tmp_path):
    secret = tmp_path / "hidden_tests.json"
    secret.write_text('{"answer": 42}')
    for path in (str(secret), "/etc/passwd", __file__):
        result = sandbox.run(f"print(open({path!r}).read())")
        assert result.status == "blocked", (path, result)
        assert "42" not in result.stdout


def test_each_run_gets_a_fresh_directory(sandbox):
    sandbox.run("open('left_behind.txt', 'w').write('x')")
    result = sandbox.run("import os\nprint(sorted(f for f in os.listdir('.') if not f.startswith('.')))")
    assert result.stdout == "[]\n"


def test_run_many_keeps_order_and_runs_concurrently(sandbox):
    jobs = [(f"print({i} * {i})", "") for i in range(8)]
    assert [r.stdout for r in sandbox.run_many(jobs)] == [f"{i * i}\n" for i in range(8)]


def test_dead_worker_is_replaced(sandbox):
    for worker in list(sandbox._all):
        worker.kill()
    assert sandbox.run("print(7)").stdout == "7\n"


def test_fresh_interpreter_mode():
    with Sandbox(LIMITS, warm=False) as cold:
        assert cold.run("print(input())", "cold\n") == ExecResult("cold\n", "", 0, "ok")
        assert cold.run("while True: pass").status == "timeout"


def test_shared_default_and_no_copy():
    assert default_sandbox() is default_sandbox()
    sb = default_sandbox()
    assert copy.deepcopy(sb) is sb


def test_bad_limits_name_the_fix():
    with pytest.raises(ValueError, match="wall_time_s"):
        SandboxLimits(wall_time_s=0)
    with pytest.raises(ValueError, match="memory_mb"):
        SandboxLimits(memory_mb=8)
