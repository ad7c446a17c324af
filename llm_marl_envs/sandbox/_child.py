"""The forked child: confine this process, then run the program as `__main__` (never returns).

Order matters: limits and privileges first (they need root), then no_new_privs, Landlock and
seccomp (they forbid what the earlier steps use), then the Python-level setup that the program
can see, and the audit hook last, right before the program's first instruction.
"""

from __future__ import annotations

import atexit
import builtins
import gc
import io
import linecache
import os
import signal
import sys
import tempfile
import traceback
import types
from dataclasses import dataclass

import _guard
import _kernel
import _landlock
import _seccomp

SETUP_FAILED_EXIT = 96
SETUP_MARK = "[sandbox] setup failed: "
_PRIVATE_MODULES = ("_guard", "_kernel", "_landlock", "_seccomp", "_paths", "_child", "ctypes", "_ctypes")
_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
"""The program's whole environment: nothing of the server's (API keys, tokens) is passed on."""


@dataclass(frozen=True)
class Policy:
    """What every child of one fork server gets (prepared once by the server)."""

    read_roots: list[str]
    deny_roots: list[str]
    read_files: list[str]
    write_files: list[str]
    landlock_fd: int | None
    to_nobody: bool
    seccomp: _seccomp.Filter | None


def run(job: dict, policy: Policy, workdir: str, stdin_fd: int, stdout_fd: int, stderr_fd: int) -> None:
    server_pid = os.getppid()
    try:
        os.setsid()
        for fd, target in ((stdin_fd, 0), (stdout_fd, 1), (stderr_fd, 2)):
            os.dup2(fd, target)
        _confine(job, policy, workdir, server_pid)
    except BaseException as exc:  # report, never run the program half-confined
        os.write(2, f"{SETUP_MARK}{exc!r}\n".encode())
        os._exit(SETUP_FAILED_EXIT)
    _execute(job["code"], workdir, policy, job.get("guard", True))


def _confine(job: dict, policy: Policy, workdir: str, server_pid: int) -> None:
    limits = job["limits"]
    _kernel.set_limits(limits["cpu_time_s"], limits["memory_mb"], limits["file_bytes"],
                       no_processes=policy.to_nobody and policy.seccomp is None)
    _kernel.drop_privileges(workdir, policy.to_nobody)
    _kernel.die_with_parent(server_pid)  # after the change of user, which clears it
    _kernel.no_new_privs()
    if policy.landlock_fd is not None:
        _landlock.restrict_self(policy.landlock_fd)
    os.chdir(workdir)
    os.closerange(3, 1 << 16)
    if policy.seccomp is not None:
        policy.seccomp.apply(os.getpid())


def _execute(source: str, workdir: str, policy: Policy, guard: bool) -> None:
    sys.dont_write_bytecode = True  # no .pyc writes into the (read-only) installation
    os.environ.clear()
    os.environ.update(_ENV, HOME=workdir, TMPDIR=workdir)
    tempfile.tempdir = workdir
    for name in [n for n in sys.modules if n.split(".")[0] in _PRIVATE_MODULES]:
        del sys.modules[name]
    blocked = _guard.BLOCKED_MODULES + (() if policy.seccomp is not None else ("_posixsubprocess",))
    for name in blocked:
        # `import ctypes` raises ImportError (numpy copes); deleting the entry to import it for
        # real is an import event, which the guard blocks.
        sys.modules[name] = None
    signal.signal(signal.SIGINT, signal.default_int_handler)  # the server ignores it
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    sys.argv = ["main.py"]
    sys.path[:] = [p for p in sys.path if p and os.path.isabs(p) and os.path.dirname(__file__) != p]
    stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="replace",
                              line_buffering=True)  # a killed program keeps its complete lines
    stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace",
                              write_through=True)
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8", errors="replace")
    sys.stdout = sys.__stdout__ = stdout
    sys.stderr = sys.__stderr__ = stderr
    # Tracebacks read the program's source through linecache: serve it from memory.
    linecache.cache["main.py"] = (len(source), None, source.splitlines(True), "main.py")
    code = 0
    try:
        compiled = compile(source, "main.py", "exec", dont_inherit=True)
        if guard:
            _guard.install(workdir, policy.read_roots, policy.deny_roots, policy.read_files, policy.write_files,
                           kernel_enforces_files=policy.landlock_fd is not None, blocked_modules=blocked)
        exec(compiled, main.__dict__)
    except SystemExit as exc:
        code = _exit_code(exc, stderr)
    except BaseException as exc:
        code = 1
        _print_exception(exc)
        name = getattr(exc, "name", None) if isinstance(exc, ImportError) else None
        if isinstance(name, str) and name.partition(".")[0] in blocked:
            code = _guard.BLOCKED_EXIT  # a module the sandbox withholds (see BLOCKED_MODULES)
            os.write(2, f"{_guard.MARK}import {name}\n".encode())
    try:  # what the interpreter does at exit: join threads, atexit, free the module's objects
        if "threading" in sys.modules:
            sys.modules["threading"]._shutdown()
        atexit._run_exitfuncs()
        main.__dict__.clear()  # e.g. flushes a file the program left open
        gc.collect()
    except BaseException:
        pass
    for stream in (stdout, stderr):
        try:
            stream.flush()
        except BaseException:
            code = code or 1
    os._exit(code & 0xFF)


def _exit_code(exc: SystemExit, stderr: io.TextIOWrapper) -> int:
    """What the interpreter would exit with for `sys.exit(exc.code)`."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    try:
        print(exc.code, file=stderr)
    except BaseException:
        pass
    return 1


def _print_exception(exc: BaseException) -> None:
    # The first frame is this module's exec(): the program sees only its own frames.
    tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
    try:
        text = "".join(traceback.format_exception(type(exc), exc, tb))
    except BaseException:  # e.g. MemoryError again while formatting
        text = f"{type(exc).__name__}: {exc}\n"
    try:
        os.write(2, text.encode("utf-8", "backslashreplace"))
    except BaseException:
        pass
