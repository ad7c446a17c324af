"""The forked child: confine this process and leave nothing of the sandbox reachable (fork server
side, standard library only).

What is the same for every run is done once, in the fork server before its first fork
(`prepare_server`): the program's environment, the sandbox's modules forgotten, the standard
streams built, the audit hook made. A child inherits all of it, so what it still does itself is
only what differs per run or per process.

The fork server forks a child when its job comes, or ahead of it (a spare), and returns from
every one of its functions in it (see `_server`), so `enter` runs with nothing below it but the
server's module frame. It makes the process die with the server, gives the program its own
`__main__` and clears the server's globals; then it reads its job, which the server writes at the
start of its stdin (`receive_job`): the server's memory, which the child's is a copy of, never
holds a job (see `_protocol`). Last come the job's limits and the audit hook; `_run.run` then
executes the program with only that (now empty) module frame below it. A spare's CPU-time limit
counts its preparation too (a few milliseconds). What stays in memory but unreachable
(the hook's closure, this module, the server's globals and streams that it keeps) could be found
only through gc.get_objects, gc.get_referrers and the like, which the hook refuses; the sandbox
defines no class in the fork server, so subclass walks find nothing of it either.
"""

from __future__ import annotations

import binascii
import builtins
import fcntl
import io
import linecache
import marshal
import math
import os
import resource
import signal
import sys
import types

import _signal

import _guard
from _protocol import SETUP_FAILED_EXIT, SETUP_MARK

LIFELINE_FD = 3
_F_SETSIG = 10  # Linux
_PRIVATE_MODULES = ("_guard", "_child", "_run", "_paths", "_protocol")
_IMPORT_SYSTEM_ONLY = ("create_builtin", "exec_builtin", "init_frozen")
"""`_imp` functions that would create a built-in module afresh, without an audit event and with
the functions replaced by stubs below back in place; the fork server imports every built-in module
beforehand, so the import system never needs them again."""
_STUBS = {"os": ("mknod", "mkfifo", "sched_setaffinity", "sched_setscheduler", "sched_setparam", "setpriority",
                 "posix_openpt"),
          "posix": ("mknod", "mkfifo", "sched_setaffinity", "sched_setscheduler", "sched_setparam", "setpriority",
                    "posix_openpt"),
          "signal": ("pidfd_send_signal",), "_signal": ("pidfd_send_signal",),
          "sys": ("activate_stack_trampoline",)}
_SHIMS = {"_posixsubprocess": ("fork_exec",)}
"""Blocked modules that standard modules import at their top (subprocess, hence asyncio): a shim
stands in, whose functions are stubs."""
_KEPT: list = []
"""What a child must not free: the server's globals and streams (see `prepare_server`) and what the
server's frames held when it forked the child (the header of the job it came for, or for a spare
forked while a job ran, that job's state), which the child would free on its way out of them.
Freeing an object writes to its memory and to all it holds, each page written a copy of the
server's; held here, they are only counted down. Nothing held here is more than the child's copy
of the server's memory holds anyway (the server's buffers of job bytes are not in it: see
`_server._private`, whose objects must not be freed in a child either). This module's namespace
outlives the child's clearing of the server's, as its functions hold it."""
_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
"""The program's whole environment: nothing of the server's (API keys, tokens) is passed on."""


def enter(forked: tuple | None) -> tuple:
    """Prepare this child, wait for its job and confine it; return the arguments of `_run.run`.
    At the server's end of input (`forked` is None), exit."""
    if forked is None:
        raise SystemExit(0)
    policy, prepared, stdin_fd, stdout_fd, stderr_fd, lifeline_fd = forked
    _KEPT.append(forked)  # see _KEPT
    try:
        os.setsid()
        for fd, target in ((stdin_fd, 0), (stdout_fd, 1), (stderr_fd, 2), (lifeline_fd, LIFELINE_FD)):
            os.dup2(fd, target)
        _die_with_server(LIFELINE_FD)
        os.closerange(LIFELINE_FD + 1, 1 << 16)
        namespace = _prepare_interpreter(prepared["streams"])
        job = receive_job(0)
        # Only now: a spare is forked while the run before runs, which may take the search
        # permission from its directory; the server resets it before it hands out the next job.
        os.chdir(policy["run_dir"])
        program = _program(job)
        _set_limits(job["limits"], no_processes=policy["no_processes"])
        # Tracebacks read the program's source through linecache: serve it from memory.
        linecache.cache["main.py"] = (len(job["code"]), None, job["code"].splitlines(True), "main.py")
        if job.get("guard", True):  # off only for tests of the kernel layers alone
            sys.addaudithook(prepared["hook"])
    except BaseException as exc:  # report, never run the program half-confined
        os.write(2, f"{SETUP_MARK}{exc!r}\n".encode())
        os._exit(SETUP_FAILED_EXIT)
    return (program, namespace, *prepared["streams"][1:], policy["blocked_modules"], _guard.MARK,
            _guard.BLOCKED_EXIT)


def receive_job(fd: int) -> dict:
    """The job at the start of `fd` (the child's stdin): an 8-byte length, then that many bytes of
    marshal data {"code", "compiled", "limits", "guard"} (the owner's, before the audit hook, which
    refuses marshal data). Reads exactly that much: the program's stdin follows."""
    return marshal.loads(_read_exactly(fd, int.from_bytes(_read_exactly(fd, 8), "little")))


def _program(job: dict) -> str | types.CodeType:
    """What `_run.run` executes: the code object the owner compiled from the program (unmarshalled
    here, before the audit hook, which refuses marshal data), or the program's source, which
    `_run.run` compiles."""
    if "compiled" not in job:
        return job["code"]
    program = marshal.loads(binascii.a2b_base64(job["compiled"]))
    if type(program) is not types.CodeType:
        raise TypeError("the owner's compiled program is not a code object")
    return program


def _read_exactly(fd: int, size: int) -> bytes:
    chunks = []
    while size:
        chunk = os.read(fd, size)
        if not chunk:
            raise EOFError("the fork server closed this child's input before its job")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _die_with_server(fd: int) -> None:
    """The kernel SIGKILLs this process when the server's end of the lifeline pipe closes (the
    server died), like a parent-death signal, which would need a system call Python lacks.
    Where the fork server is the init of its own PID namespace, its death kills everything anyway."""
    fcntl.fcntl(fd, _F_SETSIG, signal.SIGKILL)
    fcntl.fcntl(fd, fcntl.F_SETOWN, os.getpid())
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_ASYNC)


def _set_limits(limits: dict, *, no_processes: bool) -> None:
    """CPU seconds (SIGXCPU at the soft limit), address space, largest file, no core dumps, and
    with `no_processes` no new process or thread for an unprivileged user."""
    cpu = max(1, math.ceil(limits["cpu_time_s"]))
    memory = int(limits["memory_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(limits["file_bytes"]), int(limits["file_bytes"])))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    if no_processes:
        resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))


def prepare_server(policy: dict) -> dict:
    """In the fork server, once, before its first fork: the part of a program's interpreter that
    is the same in every run, which each child then inherits instead of building it again.
    Returns {"streams": (stdin, stdout, stderr), "hook": the audit hook, not installed}."""
    sys.dont_write_bytecode = True  # no .pyc writes into the (read-only) installation
    run_dir = policy["run_dir"]
    os.environ.clear()
    os.environ.update(_ENV, HOME=run_dir, TMPDIR=run_dir)
    import tempfile  # noqa: PLC0415 (imported by the server long before; here so that this module does not)

    tempfile.tempdir = run_dir
    _forget_the_sandbox(policy)
    sys.path[:] = [p for p in sys.path if p and os.path.isabs(p)]
    # Standard streams on descriptors 0-2, which a child points at its own pipes before it uses
    # them (built here, they hold no data: the server speaks through sys.stdin/sys.stdout).
    stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="replace",
                              line_buffering=True)  # a killed program keeps its complete lines
    stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace",
                              write_through=True)
    stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8", errors="replace")
    # A child drops the server's module globals and standard streams (`_prepare_interpreter`). Held
    # here too, they outlive that: the child only counts each one down instead of freeing it with
    # all it holds, which would write to (and so copy, page by page) much more of the server's memory.
    _KEPT.extend([*sys.modules["__main__"].__dict__.values(), sys.stdin, sys.stdout, sys.stderr,
                  sys.__stdin__, sys.__stdout__, sys.__stderr__, sys.argv, sys.orig_argv, policy])
    return {"streams": (stdin, stdout, stderr), "hook": _guard.make_hook(run_dir, policy)}


def _prepare_interpreter(streams: tuple) -> dict:
    """The interpreter as the program sees it (what `prepare_server` left to do per run);
    returns the program's namespace."""
    server_globals = sys.modules["__main__"].__dict__
    # The server ignores SIGINT. (`_signal`: `signal.signal` without its enum conversions, which
    # write to, and so copy, pages of the server's memory.)
    _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    sys.argv = sys.orig_argv = ["main.py"]
    sys.stdin = sys.__stdin__ = streams[0]
    sys.stdout = sys.__stdout__ = streams[1]
    sys.stderr = sys.__stderr__ = streams[2]
    linecache.cache.clear()
    server_globals.clear()  # the frame below the program's is the server's module: nothing left there
    return main.__dict__


def _forget_the_sandbox(policy: dict) -> None:
    """Remove every way back to the sandbox's code from what a program can reach (the server
    keeps its modules in its own globals, which every child clears)."""
    sandbox_dir = policy["sandbox_dir"]
    for name in [n for n in sys.modules if n in _PRIVATE_MODULES]:
        del sys.modules[name]
    for path in [p for p in sys.path_importer_cache if p.startswith(sandbox_dir)]:
        del sys.path_importer_cache[path]


def withhold_modules(blocked: tuple[str, ...]) -> None:
    """In the fork server, before it imports anything else: the blocked modules can never be
    imported (None in sys.modules: `import ctypes` raises ImportError, and numpy copes; deleting
    the entry to import one for real is an import event, which the guard blocks), and shims stand
    in for those that standard modules import at their top."""
    stub = _stub_factory()
    for name in blocked:
        sys.modules[name] = _shim(name, stub) if name in _SHIMS else None


def seal_interpreter() -> None:
    """In the fork server, once it has imported everything: replace the functions that act
    without an audit event by stubs that raise one, and take from `_imp` what could re-create a
    built-in module with its original functions."""
    stub = _stub_factory()
    for module, names in _STUBS.items():
        namespace = sys.modules[module].__dict__
        for name in names:
            if name in namespace:
                namespace[name] = stub(module.lstrip("_").replace("posix", "os") + "." + name)
    imp = sys.modules["_imp"].__dict__
    for name in _IMPORT_SYSTEM_ONLY:
        imp.pop(name, None)


def _stub_factory():
    """stub(event) -> a function that raises the audit event `event` (which the guard blocks),
    made in a namespace that holds nothing but sys.audit."""
    namespace = {"audit": sys.audit}
    exec("def stub(event):\n"
         "    def blocked(*args, **kwargs):\n"
         "        audit(event)\n"
         "        raise PermissionError(event + ' is not available in the sandbox')\n"
         "    return blocked\n", namespace)
    return namespace["stub"]


def _shim(name: str, stub) -> types.ModuleType:
    shim = types.ModuleType(name, "Stands in for a module the sandbox withholds.")
    for function in _SHIMS[name]:
        setattr(shim, function, stub(f"{name}.{function}"))
    return shim
