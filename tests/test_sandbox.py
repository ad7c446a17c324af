"""The sandbox contains hostile programs and still runs honest ones (issue 2, item 3).

Statuses only, no timings: speed claims live in benchmarks/throughput.py.
"""

from __future__ import annotations

import copy
import dis
import fcntl
import json
import os
import signal
import subprocess
import sys
import termios
import threading
import time
import types
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from llm_marl_envs.sandbox import ExecResult, Sandbox, SandboxLimits, _protocol, default_sandbox, pool
from tests.support.processes import running, wait_until_dead
from tests.support.sandbox_corpus import (MEMORY_SCAN, SET_DIRECTORY_FLAGS, attempt, descendants, describe, janitor,
                                          left_behind, sandboxed, with_sandbox_dir)

LIMITS = SandboxLimits(wall_time_s=2.0, cpu_time_s=2.0, memory_mb=256, output_bytes=10_000)


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(LIMITS, workers=2) as sb:
        yield sb


def assert_nothing_left(sandbox: Sandbox) -> None:
    for pid in sandbox._worker_pids():  # a supervisor: below it, the fork server and its spare
        left = left_behind(pid)
        assert not left, f"a sandboxed process outlived its run: {'; '.join(map(describe, left))}"


def is_server(pid: int) -> bool:
    """A supervisor, a fork server, or a program forked from one (they share the command line)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return False
    return b"_server.py" in cmdline or b"_supervisor.py" in cmdline


def janitor_pipe_bytes(janitor_pid: int, end: int) -> int:
    """The bytes waiting in the pipe whose `end` the janitor holds: os.O_RDONLY for the fork
    server's orders, os.O_WRONLY for its answers."""
    for fd in Path(f"/proc/{janitor_pid}/fd").iterdir():
        flags = int(Path(f"/proc/{janitor_pid}/fdinfo/{fd.name}").read_text().split("flags:")[1].split()[0], 8)
        if os.readlink(fd).startswith("pipe:") and flags & os.O_ACCMODE == end:
            reader = os.open(fd, os.O_RDONLY | os.O_NONBLOCK)  # the same pipe, opened anew
            try:
                return int.from_bytes(fcntl.ioctl(reader, termios.FIONREAD, bytes(4)), "little")
            finally:
                os.close(reader)
    raise AssertionError(f"the janitor {janitor_pid} holds no such pipe")


def wait_for_a_byte(janitor_pid: int, end: int, what: str, within: float = 5.0) -> None:
    """Until the pipe whose `end` the janitor holds has a byte in it (see janitor_pipe_bytes)."""
    deadline = time.monotonic() + within
    while not janitor_pipe_bytes(janitor_pid, end):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {within} s")
        time.sleep(0.01)


def servers_under_this_process() -> set[int]:
    return {pid for pid in descendants(os.getpid()) if is_server(pid)}


@pytest.mark.parametrize(
    "code,stdin,status,stdout",
    [
        ("print(sum(range(10)))", "", "ok", "45\n"),
        ("print(input()[::-1])", "hello\n", "ok", "olleh\n"),
        ("import sys\nprint(len(sys.stdin.read()))", "x" * 300_000, "ok", "300000\n"),  # more than a pipe holds
        ("import sys\nsys.stderr.write('warning\\n')\nprint(1)", "", "ok", "1\n"),  # stderr is not failure
        ("raise SystemExit(3)", "", "error", ""),
        ("raise ValueError('boom')", "", "error", ""),
        ("def (", "", "error", ""),
        ("open('notes.txt', 'w').write('hi')\nprint(open('notes.txt').read())", "", "ok", "hi\n"),
        ("import json, math, itertools, heapq\nprint(json.dumps([math.comb(5, 2)]))", "", "ok", "[10]\n"),
        ("from pathlib import Path\nPath('d').mkdir()\n(Path('d') / 'x').write_text('1')\nprint([p.name for p in Path('d').iterdir()])",
         "", "ok", "['x']\n"),
        ("import tempfile\nwith tempfile.TemporaryDirectory() as d:\n    print('tmp')", "", "ok", "tmp\n"),
        ("import asyncio\nasync def f():\n    return 3\nprint(asyncio.run(f()))", "", "ok", "3\n"),
        ("import threading\nt = threading.Thread(target=print, args=('thread',))\nt.start()\nt.join()", "", "ok", "thread\n"),
        ("x = 5\nimport __main__\nprint(__main__.x)", "", "ok", "5\n"),
        ("print('héllo ✓')", "", "ok", "héllo ✓\n"),
        ("print(open('/dev/stdin').read().upper())", "abc", "ok", "ABC\n"),
        ("print(open(0).read().split())", "1 2\n3", "ok", "['1', '2', '3']\n"),
        ("f = open('/dev/stdout', 'w')\nf.write('left open\\n')", "", "ok", "left open\n"),
        ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", "", "crash", ""),
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
    syntax = sandbox.run("def (")
    assert syntax.exit_code == 1 and "SyntaxError" in syntax.stderr


def test_results_are_deterministic(sandbox):
    code = "import sys\nprint('out')\nprint('err', file=sys.stderr)\nraise SystemExit(2)"
    assert sandbox.run(code) == sandbox.run(code) == ExecResult("out\n", "err\n", 2, "error")


def test_partial_output_survives_a_timeout(sandbox):
    result = sandbox.run("print('partial')\nwhile True:\n    pass")
    assert result.status == "timeout" and result.stdout == "partial\n" and result.exit_code is None


def test_numpy_imports_without_ctypes(sandbox):
    pytest.importorskip("numpy")
    result = sandbox.run("import numpy as np\nprint(int(np.arange(5).sum()))")
    assert (result.status, result.stdout) == ("ok", "10\n"), result


SECRET_ENV = "LLM_MARL_SANDBOX_TEST_SECRET"

HOSTILE = {
    "infinite loop": ("while True:\n    pass", {"timeout"}),
    "sleeping forever": ("import time\ntime.sleep(1000)", {"timeout"}),
    "fork bomb": ("import os\nwhile True:\n    os.fork()", {"blocked"}),
    "subprocess": ("import subprocess\nsubprocess.run(['sleep', '100'])", {"blocked"}),
    "os.system": ("import os\nos.system('sleep 100 &')", {"blocked"}),
    "exec": ("import os\nos.execv('/bin/sh', ['sh', '-c', 'sleep 100'])", {"blocked"}),
    "memory bomb": ("x = bytearray(10**10)", {"memory"}),
    "growing memory": ("chunks = []\nwhile True:\n    chunks.append(' ' * 10**6)", {"memory"}),
    "100 MB of output": ("print('x' * 100_000_000)", {"output_limit"}),
    "output loop": ("while True:\n    print('spam' * 100)", {"output_limit"}),
    "network to loopback": ("import socket\nsocket.create_connection(('127.0.0.1', 9), timeout=1)", {"blocked"}),
    "network to an address": ("import socket\ns = socket.socket()\ns.connect(('1.1.1.1', 80))", {"blocked"}),
    "name lookup": ("import socket\nsocket.getaddrinfo('example.com', 80)", {"blocked"}),
    "ctypes escape": ("import ctypes\nctypes.CDLL(None).system(b'id')", {"blocked"}),
    "ctypes smuggled in": ("import sys\ndel sys.modules['ctypes']\nimport ctypes", {"blocked"}),
    "caught violation": ("try:\n    open('/tmp/x_llm_marl_caught', 'w')\nexcept BaseException:\n    print('escaped')", {"blocked"}),
    "kill the server": ("import os\nos.kill(os.getppid(), 9)", {"blocked"}),
    "kill everything": ("import os\nos.kill(-1, 9)", {"blocked"}),
    "raise a limit": ("import resource\nresource.setrlimit(resource.RLIMIT_AS, (-1, -1))", {"error"}),
    "reach the guard": ("import gc\nprint([f for f in gc.get_objects() if getattr(f, '__name__', '') == 'hook'])", {"blocked"}),
    "trace the guard": ("import sys\nsys.settrace(lambda *a: None)", {"blocked"}),
    # The guard binds what it uses when installed: replacing builtins or os.path changes nothing.
    "patched builtins": ("import builtins, os.path\nbuiltins.any = lambda x: True\nos.path.realpath = lambda p: '/usr'\n"
                         "print(open('/etc/passwd').read())", {"blocked"}),
    "server globals": ("import sys\ng = sys._getframe().f_back.f_globals\ng.clear()\nprint(open('/etc/passwd').read())", {"blocked"}),
    "environment": (f"import os\nprint(os.environ.get({SECRET_ENV!r}, 'clean'))\nprint(open('/proc/self/environ').read())", {"blocked"}),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_programs_are_stopped_and_reported(sandbox, name, monkeypatch):
    monkeypatch.setenv(SECRET_ENV, "hunter2")
    code, statuses = HOSTILE[name]
    result = sandbox.run(code)
    assert result.status in statuses, result
    assert "escaped" not in result.stdout and "hunter2" not in result.stdout + result.stderr
    assert "root:" not in result.stdout
    assert len(result.stdout) + len(result.stderr) <= LIMITS.output_bytes + 200
    assert_nothing_left(sandbox)
    assert sandbox.run("print('still works')").stdout == "still works\n"


def test_output_over_the_cap_is_cut(sandbox):
    result = sandbox.run("print('x' * 100_000_000)")
    assert result.status == "output_limit" and result.exit_code is None
    assert result.stdout == "x" * LIMITS.output_bytes


def test_output_under_a_large_cap_arrives_whole(sandbox):
    """Output of many pipefuls on both streams, under the cap, reaches the caller byte for byte."""
    code = ("import sys\nfor i in range(3000):\n    print(f'{i:05d}' + 'o' * 95)\n"
            "    print(f'{i:05d}' + 'e' * 45, file=sys.stderr)")
    result = sandbox.run(code, limits=replace(LIMITS, output_bytes=1_000_000))
    assert result.status == "ok", result.stderr[-300:]
    assert result.stdout == "".join(f"{i:05d}" + "o" * 95 + "\n" for i in range(3000))
    assert result.stderr == "".join(f"{i:05d}" + "e" * 45 + "\n" for i in range(3000))


def test_writing_outside_its_directory_is_blocked(sandbox, tmp_path):
    target = tmp_path / "escape.txt"
    for code in (
        f"open({str(target)!r}, 'w').write('x')",
        "open('/tmp/escape_test_xyz', 'w').write('x')",
        f"import os\nos.remove({str(tmp_path)!r})",
        "open('../escape.txt', 'w').write('x')",
        "import os\nos.mkdir('/tmp/llm_marl_escape_dir')",
        "import os\nos.symlink('/tmp', 'out')\nopen('out/escape_test_xyz', 'w').write('x')",
        "import os\nos.makedirs('a/b')\nos.chdir('a/b')\nos.symlink('../../..', '../../up')",
    ):
        result = sandbox.run(code)
        assert result.status == "blocked", (code, result)
    assert not target.exists()
    assert not os.path.exists("/tmp/escape_test_xyz") and not os.path.exists("/tmp/llm_marl_escape_dir")


def test_reading_outside_its_directory_is_blocked(sandbox, tmp_path):
    secret = tmp_path / "hidden_tests.json"
    secret.write_text('{"answer": 42}')
    secret.chmod(0o644)
    for path in (str(secret), "/etc/passwd", __file__, "/tmp"):
        result = sandbox.run(f"import os\nprint(open({path!r}).read() if os.path.isfile({path!r}) else os.listdir({path!r}))")
        assert result.status == "blocked", (path, result)
        assert "42" not in result.stdout and "root:" not in result.stdout


def test_a_program_cannot_set_the_attributes_of_its_directory(sandbox):
    """Flags set on the run directory itself (FS_IOC_SETFLAGS and its kin) would outlive its
    emptying and reach the next run: the hook blocks those ioctls (the seccomp filter refuses them
    too: see the kernel-layer test); other ioctls pass."""
    assert sandbox.run(SET_DIRECTORY_FLAGS).status == "blocked"
    waiting = "import array, fcntl, termios\nn = array.array('i', [0])\nfcntl.ioctl(0, termios.FIONREAD, n, True)\nprint(n[0])"
    assert sandbox.run(waiting, "abc").stdout == "3\n"


def test_each_run_gets_a_fresh_directory(sandbox):
    sandbox.run("open('left_behind.txt', 'w').write('x')")
    result = sandbox.run("import os\nprint(os.listdir('.'))")
    assert result.stdout == "[]\n"


def test_an_answer_is_taken_whole_however_the_pipe_splits_it():
    """The owner reads a server's answers (`_protocol`): a job's result is complete only with all
    of the output that follows its line, however the pipe splits what the server wrote."""
    out, err = "héllo\n".encode(), f"warning\n{_protocol.MARK}network\n".encode()
    end = {"status": None, "exit_code": _protocol.BLOCKED_EXIT, "note": "", "output": [len(out), len(err)]}
    written = b'{"started": true}\n' + json.dumps(end).encode() + b"\n" + out + err + b'{"started": true}\n'
    buffer, messages = b"", []
    for byte in written:
        buffer += bytes([byte])
        while (taken := _protocol.split_answer(buffer))[0]:
            messages.append(taken[1])
            buffer = taken[2]
    assert messages == [{"started": True}, {"stdout": "héllo\n", "stderr": f"warning\n{_protocol.MARK}network\n",
                                            "exit_code": _protocol.BLOCKED_EXIT, "status": "blocked"}, {"started": True}]
    assert buffer == b""
    for broken in (b"not json\n", b'{"output": [1]}\n', b'{"output": null}\n'):
        assert _protocol.split_answer(broken + b"next")[:2] == (True, None)  # the owner drops that server


@pytest.mark.parametrize("spares", [True, False], ids=["spares", "forked for each job"])
def test_a_run_finds_nothing_of_an_earlier_run_in_its_memory(one_worker, monkeypatch, spares):
    """A program's memory is a copy of its fork server's: the server must hold nothing of an
    earlier job there, neither its code nor its stdin nor what it wrote (a program could read a
    test's hidden cases or expected output), nor the names of the files, directories and extended
    attributes it left (read when the run directory is emptied: a channel from run to run). A
    program that scans its own memory finds its own marker (the scan works) and none of the
    earlier run's, whether its process was forked ahead of its job while the earlier one ran (a
    spare) or when its job came (no core free for a spare)."""
    if not spares:
        monkeypatch.setattr(pool, "_CORES", 1)
    layers = one_worker.isolation()
    if not (layers["landlock_fs"] and layers["seccomp"]):
        pytest.skip(f"without Landlock and seccomp the audit hook refuses numpy's array interface: {layers}")
    token = os.urandom(6).hex()
    leave = ("import os, sys\ndata = sys.stdin.read()\n"  # the names are made at run time, in no code nor stdin
             "for i in range(30):\n    open(data.replace('stdin-', f'file{i}-'), 'w').close()\n"
             "os.mkdir(data.replace('stdin-', 'directory-'))\n"
             "try:\n    os.setxattr('.', 'user.' + data.replace('stdin-', 'xattr-'), b'')\n"
             "except PermissionError:\n    pass\n"  # refused by the seccomp filter
             f"print(data.replace('stdin-', 'stdout-'))\n# @@earlier-run:code-{token}")
    earlier = one_worker.run(leave, f"@@earlier-run:stdin-{token}")
    assert earlier.stdout == f"@@earlier-run:stdout-{token}\n", earlier.stderr
    for _ in range(2):  # a job of the same server, then (spare or not) one forked after it
        scan = one_worker.run(MEMORY_SCAN, f"{token}-now")
        assert scan.status == "ok", scan.stderr
        assert f"self-{token}-now" in scan.stdout  # the scan finds what this run made
        for what in ("code", "stdin", "stdout", "file0", "file29", "directory", "xattr"):
            assert f"{what}-{token}" not in scan.stdout, f"an earlier run's {what} is in a later run's memory"


def test_a_run_that_takes_the_permissions_of_its_directory_does_not_spoil_the_next(one_worker):
    """A program may take every permission from its own directory (and leave a file there): the
    next run still starts, on the same worker, in an empty directory with its usual mode. The
    next run's child is forked while the program runs (a spare): one that entered the directory
    before its job raced the program, and lost it in some of these fifty runs (a setup failure)."""
    for leave in 25 * ("import os\nos.chmod('.', 0)", "import os\nopen('left', 'w').close()\nos.chmod('.', 0)"):
        assert one_worker.run(leave).ok
        workers = one_worker._worker_pids()
        result = one_worker.run("import os\nprint(os.listdir('.'), oct(os.stat('.').st_mode & 0o777))")
        assert (result.status, result.stdout) == ("ok", "[] 0o700\n"), result
        assert one_worker._worker_pids() == workers


@pytest.mark.parametrize("when", ["idle", "waited for"])
def test_a_worker_whose_janitor_is_gone_is_replaced(when):
    """Where a program can read its memory, the run directory is emptied by the fork server's
    janitor (`_server._start_janitor`), so that what a program left there is never read into the
    server. Without it the server takes no job after the one it runs: gone while idle, the server
    finds out when it has a directory to empty, after answering; gone while the server waits for
    it, the server empties the directory itself, this once (the job's child is forked already).
    Every run finds its directory empty, and the job after goes to a new worker."""
    with Sandbox(LIMITS, workers=1) as sb:
        layers = sb.isolation()
        if not (layers["landlock_fs"] and layers["seccomp"]):
            pytest.skip(f"the server has a janitor only where Landlock and seccomp are both on: {layers}")
        leave = "import os\nprint(os.listdir('.'))\nopen('left', 'w').close()"
        assert sb.run("print(0)").ok  # it left nothing
        supervisor = sb._worker_pids()[0]
        helper = janitor(sandboxed(supervisor)[0])
        assert helper is not None, f"no janitor below the fork server: {descendants(supervisor)}"
        if not layers["scratch_tmpfs"]:  # there the server cannot tell that a run left nothing: it orders anyway
            wait_for_a_byte(helper, os.O_WRONLY, "the janitor did not answer")  # (read at the next job)
        if when == "idle":
            os.kill(helper, signal.SIGKILL)
            wait_until_dead(helper)  # its pipes closed: until then it still takes orders
            assert sb.run(leave).stdout == "[]\n"  # its directory then needs emptying: the server goes
        else:
            os.kill(helper, signal.SIGSTOP)
            try:
                assert sb.run(leave).stdout == "[]\n"  # the stopped janitor gets the order, after the answer
                wait_for_a_byte(helper, os.O_RDONLY, "the fork server sent its janitor no order")
            finally:  # (also when they fail: a stopped janitor outside a PID namespace would stay)
                os.kill(helper, signal.SIGKILL)  # gone with the order pending: the next job waits for it
            wait_until_dead(helper)
            # this job leaves nothing, so that only the server's own account of the janitor stops it
            assert sb.run("import os\nprint(os.listdir('.'))").stdout == "[]\n"
            assert sb._worker_pids() == [supervisor]  # that job ran on the same worker
        assert sb.run(leave).stdout == "[]\n"
        assert sb._worker_pids() != [supervisor], "a worker without a janitor took another job"
        assert janitor(sandboxed(sb._worker_pids()[0])[0]) is not None


def test_the_fork_server_does_not_grow_with_the_jobs_it_runs(one_worker):
    """A child starts as a copy of its server: the Python objects a program finds allocated at its
    start are the server's, and must not pile up job after job (each one more to copy into the
    children, page by page, and to tear down at their exit)."""
    probe, job = "import sys\nprint(sys.getallocatedblocks())", ("import sys\nprint(sys.stdin.read())", "some input")
    one_worker.run_many([job] * 300)  # the server's first jobs fill its caches and free lists (a few dozen blocks)
    before = int(one_worker.run(probe).stdout)
    one_worker.run_many([job] * 300)
    after = int(one_worker.run(probe).stdout)
    assert after - before < 30, f"{after - before} more blocks allocated in the server after 300 jobs"


def test_what_the_server_prepares_once_is_fresh_in_every_run(one_worker):
    """The environment, the standard streams, tempfile's directory and the audit hook are made
    once in the fork server: what a run does to them is gone in the next run on the same worker."""
    spoil = ("import os, sys, tempfile\nos.environ['LEAK'] = '1'\nos.environ.pop('PATH', None)\n"
             "sys.stdout.leak = 1\nsys.stdin.leak = 1\ntempfile.tempdir = '/nowhere'\nprint('spoilt')")
    look = ("import os, sys, tempfile\nprint(os.environ.get('LEAK'), 'PATH' in os.environ, hasattr(sys.stdout, 'leak'),"
            " hasattr(sys.stdin, 'leak'), tempfile.gettempdir() == os.getcwd())")
    assert one_worker.run(spoil).stdout == "spoilt\n"
    assert one_worker.run(look).stdout == "None True False False True\n"
    assert one_worker.run("import os\nos.kill(os.getppid(), 9)").status == "blocked"  # the hook asks for its own pid
    assert one_worker.run("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)").status == "crash"


def test_a_program_sees_only_the_environment_the_server_gives_it(sandbox):
    """Nothing of the owner's environment nor of the server's own (LD_BIND_NOW, set for the server
    only) reaches a program: its environment is the documented few variables and its directory."""
    result = sandbox.run("import os\nprint(sorted(os.environ))\nprint(os.environ['HOME'] == os.getcwd())")
    assert result.status == "ok", result.stderr
    names, home_is_cwd = result.stdout.splitlines()
    assert names == str(sorted(["PATH", "LANG", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                                "HOME", "TMPDIR"]))
    assert home_is_cwd == "True"


def test_kernel_layers_hold_without_the_audit_hook(sandbox):
    """Defence in depth: with the audit hook switched off (a private protocol flag that only our
    process can set), the kernel itself still refuses. Each program prints "denied" when it is."""
    layers = sandbox.isolation()
    programs = {
        "landlock_fs": ["open('/etc/passwd').read()", "open('/tmp/llm_marl_kernel_probe', 'w')"],
        "seccomp": ["import os\nos.fork()", "import os\nos.execv('/bin/true', ['true'])",
                    "import socket\nsocket.socket()", "import os\nos.kill(os.getppid(), 0)",
                    "import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect('/dev/log')",
                    "import os\nos.setxattr('.', 'user.x', b'1')",
                    SET_DIRECTORY_FLAGS],
    }
    checked = 0
    for layer, codes in programs.items():
        if not layers.get(layer):
            continue
        for code in codes:
            wrapped = "try:\n" + "".join(f"    {line}\n" for line in code.splitlines()) + "except PermissionError:\n    print('denied')"
            job = {"code": wrapped, "stdin": "", "limits": asdict(LIMITS), "guard": False}
            result = sandbox._submit(job, LIMITS)
            assert (result.status, result.stdout) == ("ok", "denied\n"), (layer, code, result)
            checked += 1
    assert not os.path.exists("/tmp/llm_marl_kernel_probe")
    if not checked:
        pytest.skip(f"no kernel layer on this machine: {layers}")


def test_the_guard_cannot_be_steered_through_globals():
    """Every name the hook uses is a closure cell: no global or builtin lookup at call time."""
    sys.path.insert(0, str(Path(__file__).parents[1] / "llm_marl_envs" / "sandbox"))
    try:
        import _guard
    finally:
        sys.path.pop(0)
    hook = next(c for c in _guard.make_hook.__code__.co_consts if isinstance(c, types.CodeType) and c.co_name == "hook")
    lookups = [i.argval for i in dis.get_instructions(hook) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")]
    assert lookups == []
    assert not [c for c in hook.co_consts if isinstance(c, types.CodeType)], "the hook must not call Python helpers"


def test_run_many_drives_its_batch_from_the_calling_thread(sandbox, monkeypatch):
    """A batch keeps a job on every worker at once from the caller's thread alone (the second job is
    sent before any answer is read, and no thread is started), with the next small job already
    waiting in each worker's input."""
    sends, send, send_queued = [], pool._Worker.send, pool._Worker.send_queued

    def recording_send(worker, job, deadline):
        sends.append(("run", sandbox._in_flight))
        return send(worker, job, deadline)

    def recording_send_queued(worker, job):
        queued = send_queued(worker, job)
        sends.append(("queued" if queued else "not queued", sandbox._in_flight))
        return queued

    monkeypatch.setattr(pool._Worker, "send", recording_send)
    monkeypatch.setattr(pool._Worker, "send_queued", recording_send_queued)
    threads = threading.active_count()
    results = sandbox.run_many([(f"print({i})", "") for i in range(5)])
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(5)]
    hows = [how for how, _ in sends]
    assert sends[:2] == [("run", 1), ("run", 2)] and "queued" in hows, sends
    assert hows.count("run") + hows.count("queued") == 5 and all(n == 2 for _, n in sends[1:]), sends
    assert threading.active_count() == threads and sandbox._in_flight == 0


def test_a_job_too_large_to_wait_in_a_pipe_runs_when_its_worker_is_free(sandbox):
    """Only a job that a pipe takes whole at once waits behind another; a larger one is sent to the
    first worker that answers, and every result comes back in order."""
    big = "x" * (pool._QUEUED_BYTES + 1)
    jobs = [("import sys\nprint(len(sys.stdin.read()))", big)] * 3 + [("print(7)", "")] * 3
    assert [r.stdout for r in sandbox.run_many(jobs)] == [f"{len(big)}\n"] * 3 + ["7\n"] * 3


def test_a_worker_that_dies_during_a_batch_fails_only_its_job():
    """The job whose server dies gets a crash result (it is not run again: it had started), the one
    that waited behind it runs on another worker, the others run, and the next batch gets a fresh
    worker in its place."""
    with Sandbox(replace(LIMITS, wall_time_s=60.0), workers=2) as sb:  # the sleeper outlasts its finding
        sb.run_many([("print(0)", "")] * 2)
        results: list = []
        jobs = [("import time\ntime.sleep(30)", ""), ("import time\ntime.sleep(0.5)\nprint(1)", ""), ("print(2)", ""),
                ("print(3)", "")]  # print(2) waits behind the sleeper, print(3) behind the short sleep
        batch = threading.Thread(target=lambda: results.extend(sb.run_many(jobs)))
        batch.start()
        time.sleep(1.5)  # the short sleep and print(3) are done: only the sleeper runs
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(left_behind(pid, wait=0.2) for pid in sb._worker_pids()):
            time.sleep(0.02)
        sleeper = next(pid for pid in sb._worker_pids() if left_behind(pid, wait=0.2))
        os.killpg(sleeper, signal.SIGKILL)
        batch.join(timeout=30)
        assert [r.status for r in results] == ["crash", "ok", "ok", "ok"]
        assert [r.stdout for r in results[1:]] == ["1\n", "2\n", "3\n"]
        assert sleeper not in sb._worker_pids() and sb._in_flight == 0
        assert [r.stdout for r in sb.run_many([("print(3)", "")] * 2)] == ["3\n"] * 2


@pytest.mark.parametrize("batch", [False, True], ids=["run", "run_many"])
def test_a_worker_that_cannot_start_raises_and_frees_its_slot(monkeypatch, tmp_path, batch):
    """A fork server that never says it started is a WorkerError, and the slot it held is free for
    the next call, which starts a worker again."""
    with Sandbox(LIMITS, workers=2) as sb:
        broken = tmp_path / "broken.py"
        broken.write_text("import sys\nsys.exit(3)\n")
        monkeypatch.setattr(pool, "_SUPERVISOR", str(broken))
        with pytest.raises(pool.WorkerError, match="did not start"):
            sb.run_many([("print(1)", "")] * 3) if batch else sb.run("print(1)")
        assert sb._idle.qsize() == 2 and sb._in_flight == 0
        monkeypatch.undo()
        assert [r.stdout for r in sb.run_many([("print(1)", "")] * 3)] == ["1\n"] * 3


def test_run_many_keeps_order(sandbox):
    jobs = [(f"print({i} * {i})", "") for i in range(8)]
    assert [r.stdout for r in sandbox.run_many(jobs)] == [f"{i * i}\n" for i in range(8)]


def test_dead_worker_is_replaced(sandbox):
    for pid in sandbox._worker_pids():
        os.killpg(pid, signal.SIGKILL)
    assert sandbox.run("print(7)").stdout == "7\n"
    assert sandbox.run_many([("print(8)", ""), ("print(9)", "")])[1].stdout == "9\n"


def test_a_spare_waits_for_the_next_job_and_one_that_died_is_replaced(one_worker, monkeypatch):
    """With a core free, the fork server forks the next job's child ahead (it prepares, then waits
    for its job); a spare that died meanwhile is replaced, and the job runs as if nothing happened.
    With no core free for it (every call in flight takes one for its program and one for a spare),
    no spare is forked."""
    monkeypatch.setattr(pool, "_CORES", 1)  # this call alone keeps every core busy
    assert one_worker.run("print(0)").ok
    supervisor = one_worker._worker_pids()[0]
    assert len(sandboxed(supervisor)) == 1, "a spare was forked with no core free"
    assert all(r.ok for r in one_worker.run_many([("print(0)", "")] * 3))
    assert len(sandboxed(supervisor)) == 1, "a batch forked a spare with no core free"
    monkeypatch.setattr(pool, "_CORES", 2)  # one worker's batch runs one program at a time: a core is free
    assert all(r.ok for r in one_worker.run_many([("print(0)", "")] * 3))
    assert len(sandboxed(supervisor)) == 2, "a batch on one worker forked no spare with a core free"
    assert one_worker.run("print(1)").ok
    server, *below = sandboxed(supervisor)
    assert len(below) == 1 and not left_behind(supervisor), f"expected one spare below the server, got {below}"
    os.kill(below[0], signal.SIGKILL)
    wait_until_dead(below[0])  # dead before the job comes (not while it is sent)
    assert one_worker.run("print(2)").stdout == "2\n"
    assert one_worker._worker_pids() == [supervisor] and sandboxed(supervisor)[0] == server  # same server


@pytest.mark.parametrize("cores, spares", [(3, False), (4, True)])
def test_a_batch_counts_its_width_when_it_decides_on_spares(monkeypatch, cores, spares):
    """A batch over 2 workers has 2 programs in flight from its start: the servers fork spares only
    where 4 cores are there for those programs and their spares."""
    monkeypatch.setattr(pool, "_CORES", cores)
    with Sandbox(LIMITS, workers=2) as two:
        assert all(r.ok for r in two.run_many([("print(0)", "")] * 6))
        supervisors = two._worker_pids()
        # A server forks a spare at its start; the batch's first job on it takes that one.
        below = [len(sandboxed(pid)) - 1 for pid in supervisors]
        assert below == [1 if spares else 0] * len(supervisors), below


def test_a_malformed_job_is_answered_and_its_child_discarded(one_worker):
    """A job the server cannot read (here: limits without their fields) gets a crash answer; its
    child (the spare that waited for it) is not left waiting, and the next job runs."""
    bad = one_worker._submit({"code": "print(1)", "stdin": "", "limits": {}}, LIMITS)
    assert bad.status == "crash" and "internal error" in bad.stderr
    assert one_worker.run("print(2)").stdout == "2\n"
    assert_nothing_left(one_worker)


def test_a_job_larger_than_a_pipe_reaches_its_child_whole(one_worker):
    """The job (an 8-byte length and its JSON) and the program's stdin share the child's stdin:
    the program reads exactly its own stdin after a job of any size."""
    code = "import sys\npad = '" + "x" * 150_000 + "'\ndata = sys.stdin.read()\nprint(len(pad), len(data), data[:3], data[-3:])"
    stdin = "abc" + "y" * 200_000 + "xyz"
    assert one_worker.run(code, stdin).stdout == f"150000 {len(stdin)} abc xyz\n"
    assert one_worker.run("import sys\nprint(repr(sys.stdin.read()))").stdout == "''\n"


def test_fresh_interpreter_mode_leaves_nothing_behind():
    before = servers_under_this_process()
    with Sandbox(LIMITS, warm=False) as cold:
        assert cold.run("print(input())", "cold\n") == ExecResult("cold\n", "", 0, "ok")
        assert cold.run("while True: pass").status == "timeout"
        assert cold.run("import os\nos.fork()").status == "blocked"
    assert servers_under_this_process() <= before


def test_close_kills_workers_and_is_idempotent():
    sb = Sandbox(LIMITS, workers=1)
    sb.run("print(1)")
    pids, bases = sb._worker_pids(), [w.base for w in sb._live]
    sb.close()
    sb.close()
    assert not any(map(is_server, pids)) and not any(map(os.path.exists, bases))
    with pytest.raises(RuntimeError, match="closed"):
        sb.run("print(1)")


def test_close_during_a_run_kills_it_and_cleans_up():
    sb = Sandbox(LIMITS, workers=1)
    sb.run("print(1)")
    bases = [w.base for w in sb._live]
    pids = sb._worker_pids()
    results = []
    thread = threading.Thread(target=lambda: results.append(sb.run("import time\ntime.sleep(30)")))
    thread.start()
    deadline = time.monotonic() + 30
    while not left_behind(pids[0], wait=0.5) and time.monotonic() < deadline:  # wait for the program to start
        time.sleep(0.02)
    sb.close()
    thread.join(timeout=30)
    assert results and results[0].status in ("crash", "timeout")
    assert not any(os.path.exists(b) for b in bases)
    assert all(descendants(pid) == [] for pid in pids)


def test_close_during_a_batch_kills_it_and_cleans_up():
    """Closing the sandbox while a batch runs (two programs running, two jobs waiting behind them)
    ends the batch with an error, kills its programs and leaves no worker or directory behind."""
    sb = Sandbox(replace(LIMITS, wall_time_s=60.0), workers=2)
    sb.run_many([("print(1)", "")] * 2)
    bases, pids = [w.base for w in sb._live], sb._worker_pids()
    outcome: list = []

    def batch():
        try:
            outcome.append(sb.run_many([("import time\ntime.sleep(30)", "")] * 4))
        except RuntimeError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=batch)
    thread.start()
    deadline = time.monotonic() + 30
    while not all(left_behind(pid, wait=0.2) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    sb.close()
    thread.join(timeout=30)
    assert not thread.is_alive() and len(outcome) == 1
    assert isinstance(outcome[0], RuntimeError) and "closed" in str(outcome[0])
    assert not any(os.path.exists(b) for b in bases) and all(descendants(pid) == [] for pid in pids)
    assert sb._in_flight == 0 and not sb._live


def test_a_forked_process_gets_its_own_workers(sandbox):
    sandbox.run_many([("print(1)", ""), ("print(2)", "")])  # the parent's workers are started: not the child's
    parent_pids = sandbox._worker_pids()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (child)
        try:
            batch = sandbox.run_many([("print('child')", ""), ("print('batch')", "")])
            os.write(write_end, (sandbox.run("print('child')").stdout + batch[1].stdout).encode())
            sandbox.close()
        finally:
            os._exit(0)
    os.close(write_end)
    assert os.read(read_end, 100) == b"child\nbatch\n"
    os.close(read_end)
    os.waitpid(pid, 0)
    assert sandbox._worker_pids() == parent_pids
    assert sandbox.run("print('parent')").stdout == "parent\n"


def test_seccomp_decisions_name_only_the_caller():
    """The supervisor's answers to the filter: a program may signal, limit or renice only itself
    (or its own group), never fork or execute; the fork server may fork and signal its programs."""
    sys.path.insert(0, str(Path(__file__).parents[1] / "llm_marl_envs" / "sandbox"))
    try:
        import _seccomp
    finally:
        sys.path.pop(0)
    nr, me = _seccomp.NR, (42, 43)
    minus = lambda pid: pid & 0xFFFFFFFFFFFFFFFF  # noqa: E731 (a negative pid as the register holds it)
    assert _seccomp.program_may(nr["kill"], (42, 9), me) and _seccomp.program_may(nr["kill"], (minus(-42), 9), me)
    assert not _seccomp.program_may(nr["kill"], (1, 9), me) and not _seccomp.program_may(nr["kill"], (minus(-1), 9), me)
    assert _seccomp.program_may(nr["tgkill"], (42, 43, 9), me) and not _seccomp.program_may(nr["prlimit64"], (7, 0), me)
    assert _seccomp.program_may(nr["setpriority"], (0, 43, 5), me) and not _seccomp.program_may(nr["setpriority"], (2, 0, 5), me)
    for call in ("clone", "execve", "execveat"):
        assert not _seccomp.program_may(nr[call], (0,) * 6, me)
    assert _seccomp.server_may(nr["clone"], (0x01200011,), init=False)  # glibc's fork
    assert not _seccomp.server_may(nr["clone"], (0x20000000,), init=False)  # into a new PID namespace
    assert not _seccomp.server_may(nr["execve"], (0,), init=True)
    assert _seccomp.server_may(nr["kill"], (minus(-1), 9), init=True) and not _seccomp.server_may(nr["kill"], (minus(-1), 9), init=False)
    assert len(_seccomp.build()) % 8 == 0


def test_shared_default_and_no_copy():
    assert default_sandbox() is default_sandbox()
    sb = default_sandbox()
    assert copy.deepcopy(sb) is sb and copy.copy(sb) is sb
    assert copy.deepcopy({"env": sb})["env"] is sb


def test_bad_limits_name_the_fix():
    with pytest.raises(ValueError, match="wall_time_s"):
        SandboxLimits(wall_time_s=0)
    with pytest.raises(ValueError, match="memory_mb"):
        SandboxLimits(memory_mb=8)
    with pytest.raises(ValueError, match="status"):
        ExecResult("", "", 0, "fine")
    with pytest.raises(ValueError, match="workers"):
        Sandbox(workers=0)


# ---------------------------------------------------------------------------------------------
# Issue 11, findings 10-12: what one run leaves, what a run can reach, what outlives the owner.

DIR_FD_WRITE = ("import os\nos.makedirs('a/b')\nfd = os.open('.', os.O_RDONLY)\nos.chdir('a/b')\n"
                "out = os.open('../persisted', os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd)\n"
                "os.write(out, b'left by an earlier run')\n")
DIR_FD_READ = ("import os\nos.makedirs('a/b')\nfd = os.open('.', os.O_RDONLY)\nos.chdir('a/b')\n"
               "print(os.read(os.open('../persisted', os.O_RDONLY, dir_fd=fd), 100))\n")


@pytest.fixture()
def one_worker():
    with Sandbox(LIMITS, workers=1) as sb:
        yield sb


def _kernel_only(sandbox: Sandbox, code: str) -> ExecResult:
    """Run with the audit hook off (private protocol flag): what the kernel layers alone allow."""
    return sandbox._submit({"code": code, "stdin": "", "limits": asdict(LIMITS), "guard": False}, LIMITS)


def test_nothing_of_an_earlier_run_is_reachable_through_a_directory_fd(one_worker):
    """Finding 10: a write relative to a directory descriptor once landed next to the run's own
    directory, where the next run on the same worker could read it."""
    one_worker.run(DIR_FD_WRITE)
    result = one_worker.run(DIR_FD_READ)
    assert "left by an earlier run" not in result.stdout, result


def test_the_kernel_lets_a_run_write_only_its_own_directory(one_worker):
    """Finding 10, kernel layer alone: Landlock granted writes to the whole scratch folder."""
    if not one_worker.isolation().get("landlock_fs"):
        pytest.skip("no Landlock on this machine")
    _kernel_only(one_worker, "open('../persisted', 'w').write('left by an earlier run')")
    result = _kernel_only(one_worker, "print(open('../persisted').read())")
    assert "left by an earlier run" not in result.stdout, result


@pytest.mark.parametrize("probe", ["sys._getframe and f_back", "subclass walk for the sandbox's classes",
                                   "func.__globals__ of every reachable function", "sys.modules",
                                   "ctypes types found by a subclass walk"])
def test_nothing_of_the_sandbox_is_reachable_from_the_program(sandbox, probe):
    """Finding 11: the child's globals (reachable through sys._getframe) held ctypes and the guard's
    module, and subclass walks reached ctypes' types: a program could write any memory. Each probe
    prints ESCAPED when it finds a handle (tests/support/sandbox_corpus.py)."""
    result = sandbox.run(with_sandbox_dir(attempt(probe).code))
    assert "ESCAPED" not in result.stdout and result.status == "ok", result


HOOK_ALONE_CASES = {
    "mkfifo": "import os\nos.mkfifo('/tmp/llm_marl_fifo_escape')",
    "mknod": "import os, stat\nos.mknod('/tmp/llm_marl_node_escape', stat.S_IFREG | 0o644)",
    "os.open with dir_fd": DIR_FD_WRITE,
    "sqlite ATTACH": "import sqlite3\nsqlite3.connect(':memory:').execute(\"ATTACH '/tmp/llm_marl_attach_escape.db' AS x\")",
    "sqlite VACUUM INTO": "import sqlite3\nsqlite3.connect(':memory:').execute(\"VACUUM INTO '/tmp/llm_marl_vacuum_escape.db'\")",
}


@pytest.fixture(scope="module")
def hook_alone():
    """Workers without namespaces, Landlock and seccomp (a private, test-only argument)."""
    with Sandbox(LIMITS, workers=1, _kernel_layers=False) as sb:
        yield sb


def _escaped_to_tmp() -> list[str]:
    return [p for p in os.listdir("/tmp") if p.startswith("llm_marl_") and "_escape" in p]


@pytest.mark.parametrize("name", ["mkfifo", "mknod", "os.open with dir_fd"])
def test_the_hook_itself_stops_what_only_the_kernel_stopped(sandbox, name):
    """Finding 11: these passed the audit hook and were refused by Landlock alone (status "error")."""
    result = sandbox.run(HOOK_ALONE_CASES[name])
    assert result.status == "blocked", result
    assert not _escaped_to_tmp()


@pytest.mark.parametrize("name", sorted(HOOK_ALONE_CASES))
def test_the_hook_alone_stops_them(hook_alone, name):
    """Finding 11, without the kernel layers: the hook alone refuses them all (SQLite altogether:
    it opens files in C, where no audit event shows the path)."""
    result = hook_alone.run(HOOK_ALONE_CASES[name])
    assert result.status == "blocked", result
    assert not _escaped_to_tmp()


NEWER_PYTHON_CASES = {  # what newer Pythons added that acts outside the program
    "sys.activate_stack_trampoline": "import sys\nsys.activate_stack_trampoline('perf')\ndef f(): pass\nf()",  # 3.12
    "os.posix_openpt": "import os\nos.posix_openpt(os.O_RDWR | os.O_NOCTTY)",  # 3.13
    "sys.remote_exec": "import os, sys\nopen('s.py', 'w').write('pass')\nsys.remote_exec(os.getppid(), 's.py')",  # 3.14
}


@pytest.mark.parametrize("kernel_layers", [True, False], ids=["kernel layers on", "audit hook alone"])
@pytest.mark.parametrize("name", sorted(NEWER_PYTHON_CASES))
def test_what_newer_pythons_added_is_blocked(sandbox, hook_alone, kernel_layers, name):
    """Run with the audit hook alone, activate_stack_trampoline made the interpreter write
    /tmp/perf-PID.map (with the program's function names), which outlived the run, and
    posix_openpt opened /dev/ptmx: `_child` stubs both, whose events the hook refuses.
    sys.remote_exec (3.14, not run here yet) has an event of its own, which the hook refuses."""
    module, _, function = name.partition(".")
    if not hasattr(sys.modules[module], function):
        pytest.skip(f"{name} is not in Python {sys.version_info[0]}.{sys.version_info[1]}")
    perf_maps = {p for p in os.listdir("/tmp") if p.startswith("perf-")}
    result = (sandbox if kernel_layers else hook_alone).run(NEWER_PYTHON_CASES[name])
    assert result.status == "blocked" and result.stderr.endswith(f"blocked: {name}\n"), result
    assert {p for p in os.listdir("/tmp") if p.startswith("perf-")} <= perf_maps


def test_sqlite_cannot_write_outside(sandbox):
    """With Landlock, SQLite in memory still works and the kernel refuses ATTACH/VACUUM INTO outside."""
    assert sandbox.run("import sqlite3\nprint(sqlite3.connect(':memory:').execute('SELECT 1').fetchone())").stdout == "(1,)\n"
    for name in ("sqlite ATTACH", "sqlite VACUUM INTO"):
        assert sandbox.run(HOOK_ALONE_CASES[name]).status != "ok"
    assert not _escaped_to_tmp()


def test_nothing_outlives_a_killed_owner():
    """Finding 12: a SIGKILLed owner's servers and running programs lived on until their wall
    limit (here 60 s); they must go within a couple of seconds, and remove their directories."""
    script = (
        "import json, os, signal, sys, threading, time\n"
        "from tests.support.sandbox_corpus import descendants\n"
        "from llm_marl_envs.sandbox import Sandbox, SandboxLimits\n"
        "sb = Sandbox(SandboxLimits(wall_time_s=60, cpu_time_s=60), workers=2)\n"
        "sb.run_many([('print(1)', '')] * 2)\n"
        "for _ in range(2):\n"
        "    threading.Thread(target=sb.run, args=('import time\\ntime.sleep(60)',), daemon=True).start()\n"
        "time.sleep(1.0)\n"
        "print(json.dumps([descendants(os.getpid()), [w.base for w in sb._live]]), flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).parents[1])
    tree, bases = json.loads(out.stdout.splitlines()[0])
    assert len(tree) >= 4, f"expected 2 workers, each running a program: {tree}"
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline and (any(map(running, tree)) or any(map(os.path.exists, bases))):
        time.sleep(0.05)
    assert not [p for p in tree if running(p)], "processes outlived their owner"
    assert not any(map(os.path.exists, bases))


def test_prefetched_results_are_taken_once_each_and_dropped_after_the_block():
    from llm_marl_envs.sandbox import Sandbox

    with Sandbox(workers=2) as sandbox:
        counter = "import time\nprint(time.time_ns())"
        with sandbox.prefetched([(counter, ""), (counter, ""), ("print(input())", "x")]):
            first, second = sandbox.run(counter), sandbox.run(counter)
            assert sandbox.run("print(input())", "x").stdout == "x\n"
            third = sandbox.run(counter)  # none left: a run of its own
        assert len({first.stdout, second.stdout, third.stdout}) == 3
        with sandbox.prefetched([("print(1)", ""), ("print(2)", "")]):
            pass
        assert not sandbox._prefetched
        assert sandbox.run("print(2)").stdout == "2\n"


def test_scratch_directories_of_dead_owners_are_swept(tmp_path):
    """A supervisor killed with its owner (SIGKILL of a process tree, as Ray ends its workers) cannot remove its
    directory; the next Sandbox of this user removes those whose owner is dead, and nothing else."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"llm_marl_sbx_{dead.pid}_abc"
    (stale / "run").mkdir(parents=True)
    alive = tmp_path / f"llm_marl_sbx_{os.getppid()}_abc"
    mine = tmp_path / f"llm_marl_sbx_{os.getpid()}_abc"
    unnamed = tmp_path / "llm_marl_sbx_abcdef"
    other = tmp_path / f"other_{dead.pid}_abc"
    for folder in (alive, mine, unnamed, other):
        folder.mkdir()
    assert pool.sweep_stale_bases(str(tmp_path)) == [str(stale)]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in (alive, mine, unnamed, other))


def test_a_worker_names_its_scratch_directory_after_its_owner():
    import tempfile

    ours = lambda: {p.name for p in Path(tempfile.gettempdir()).glob(f"llm_marl_sbx_{os.getpid()}_*")}  # noqa: E731
    before = ours()
    with Sandbox(workers=1) as box:
        assert box.run("print(1)").stdout.strip() == "1"
        assert len(ours() - before) == 1
    assert ours() == before
