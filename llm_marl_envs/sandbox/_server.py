"""Fork server for sandboxed executions. Runs as `python -I _server.py` (standard library only).

Protocol: one JSON job per line on stdin ({"code", "stdin", "limits"}), one JSON result per line
on stdout. For every job the server forks a child that isolates itself (own session, resource
limits, unprivileged user, empty network namespace, audit hook, throwaway directory) and runs the
code; the server enforces the wall clock and the output cap and kills the child's whole process
group. Forking from this warm interpreter costs ~1 ms instead of an interpreter start-up.
"""

import collections  # noqa: F401  (pre-imported so user programs start warm)
import fractions  # noqa: F401
import functools  # noqa: F401
import heapq  # noqa: F401
import io
import itertools  # noqa: F401
import json
import linecache
import math  # noqa: F401
import os
import re  # noqa: F401
import resource
import select
import shutil
import signal
import string  # noqa: F401
import sys
import sysconfig
import tempfile
import time
import traceback

BLOCKED_EXIT = 97
BLOCK_MARK = "[sandbox] blocked: "
NOBODY = 65534
CLONE_NEWNET = 0x40000000
_BLOCKED_EVENTS = (
    "socket.", "os.fork", "os.forkpty", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
    "subprocess.Popen", "os.kill", "os.killpg", "pty.spawn", "ctypes.", "os.setuid", "os.setgid",
)
_PATH_EVENTS = {
    "os.remove", "os.rename", "os.mkdir", "os.rmdir", "os.chmod", "os.chown", "os.symlink", "os.link",
    "os.truncate", "os.utime", "shutil.rmtree", "shutil.copyfile", "shutil.move", "os.chflags", "os.mkfifo", "os.mknod",
}
_BLOCKED_MODULES = {"ctypes", "_ctypes", "_posixsubprocess", "cffi"}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC


def _read_roots():
    paths = sysconfig.get_paths()
    roots = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    roots |= {sys.base_prefix + "/lib", sys.prefix + "/lib"}
    return tuple(os.path.realpath(r) for r in roots)


READ_ROOTS = _read_roots()


def _world_readable(path):
    """Whether an unprivileged user can reach `path` (every parent directory world-executable)."""
    import stat

    path = os.path.realpath(path)
    while True:
        try:
            mode = os.stat(path).st_mode
        except OSError:
            return False
        if not mode & stat.S_IXOTH:
            return False
        parent = os.path.dirname(path)
        if parent == path:
            return True
        path = parent


# Dropping to an unprivileged user only works when it can still import the standard library
# (an interpreter under /root/.pyenv is not reachable by `nobody`).
CAN_DROP_PRIVILEGES = os.geteuid() == 0 and all(_world_readable(r) for r in READ_ROOTS if os.path.exists(r))
READ_FILES = ("/dev/null", "/dev/urandom", "/dev/random", "/dev/zero")


def _install_guard(workdir):
    """Audit hook: the program may read the Python installation and its own directory, write only
    inside its directory, and never open sockets, start processes or load ctypes. A violation ends
    the program at once (it cannot be caught) with BLOCKED_EXIT and a marker on stderr."""
    workdir = os.path.realpath(workdir)

    def inside(path, roots):
        try:
            real = os.path.realpath(os.fsdecode(path))
        except (TypeError, ValueError):
            return False
        if "llm_marl" in real:  # never the project's own files (hidden tests, answers)
            return real == workdir or real.startswith(workdir + os.sep)
        return any(real == r or real.startswith(r + os.sep) for r in roots)

    def block(what):
        try:
            sys.stdout.flush()
        except Exception:
            pass
        os.write(2, (BLOCK_MARK + what + "\n").encode())
        os._exit(BLOCKED_EXIT)

    def hook(event, args):
        if event == "open":
            path, mode, flags = args
            if isinstance(path, int):
                return
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (isinstance(flags, int) and flags & _WRITE_FLAGS)
            if writing:
                if not inside(path, (workdir,)):
                    block(f"write outside the working directory: {path!r}")
            elif not (inside(path, (workdir,) + READ_ROOTS) or os.fsdecode(path) in READ_FILES):
                block(f"read outside the working directory: {path!r}")
        elif event in _PATH_EVENTS:
            for p in args:
                if isinstance(p, (str, bytes, os.PathLike)) and not inside(p, (workdir,)):
                    block(f"{event} outside the working directory: {p!r}")
        elif event == "import":
            if args[0].split(".")[0] in _BLOCKED_MODULES:
                block(f"import {args[0]}")
        elif event.startswith(_BLOCKED_EVENTS):
            block(event)

    sys.addaudithook(hook)


def _unshare_network():
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.unshare(CLONE_NEWNET)  # fails without privileges; the audit hook still blocks sockets
    except Exception:
        pass


def _child(job, workdir, out_w, err_w):
    limits = job["limits"]
    os.setsid()
    _unshare_network()
    for name in list(sys.modules):
        if name.split(".")[0] in _BLOCKED_MODULES or name in ("subprocess", "multiprocessing"):
            del sys.modules[name]
    stdin_path = os.path.join(workdir, ".stdin")
    with open(stdin_path, "w") as f:
        f.write(job.get("stdin", ""))
    fd_in = os.open(stdin_path, os.O_RDONLY)
    os.dup2(fd_in, 0)
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)
    os.closerange(3, 1 << 16)
    mem = int(limits["memory_mb"]) * 1024 * 1024
    cpu = max(1, math.ceil(float(limits["cpu_time_s"])))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(limits["file_bytes"]), int(limits["file_bytes"])))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    if CAN_DROP_PRIVILEGES:
        os.chown(workdir, NOBODY, NOBODY)
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
    os.chdir(workdir)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r"), encoding="utf-8", errors="replace")
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w"), encoding="utf-8", errors="replace", line_buffering=False)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w"), encoding="utf-8", errors="replace", write_through=True)
    sys.argv = ["main.py"]
    sys.path = [p for p in sys.path if p and "llm_marl" not in p]
    code = 0
    # Tracebacks read source through linecache; serve main.py from memory (no file access).
    linecache.cache["main.py"] = (len(job["code"]), None, job["code"].splitlines(True), "main.py")
    try:
        compiled = compile(job["code"], "main.py", "exec")
        _install_guard(workdir)
        exec(compiled, {"__name__": "__main__", "__builtins__": __builtins__})
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, int) and exc.code is not None:
            print(exc.code, file=sys.stderr)
    except MemoryError:
        sys.stderr.write("MemoryError\n")
        code = 1
    except BaseException as exc:
        # Skip this server's own frame: the program sees only its own (and library) frames.
        tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
        sys.stderr.write("".join(traceback.format_exception(type(exc), exc, tb)))
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        code = code or 1
    os._exit(code & 0xFF)


def _run(job):
    limits = job["limits"]
    workdir = tempfile.mkdtemp(prefix="llm_marl_sbx_")
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(out_r)
            os.close(err_r)
            _child(job, workdir, out_w, err_w)
        finally:
            os._exit(70)
    os.close(out_w)
    os.close(err_w)
    cap = int(limits["output_bytes"])
    chunks = {out_r: [], err_r: []}
    total = 0
    status = None
    deadline = time.monotonic() + float(limits["wall_time_s"])
    open_fds = [out_r, err_r]
    while open_fds:
        left = deadline - time.monotonic()
        if left <= 0:
            status = "timeout"
            break
        ready, _, _ = select.select(open_fds, [], [], left)
        for fd in ready:
            data = os.read(fd, 65536)
            if not data:
                open_fds.remove(fd)
                continue
            room = cap - total
            chunks[fd].append(data[:max(room, 0)])
            total += len(data)
            if total > cap:
                status = "output_limit"
        if status:
            break
    # Kill the whole process group: the program and anything it managed to start.
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    _, wait_status = os.waitpid(pid, 0)
    for fd in (out_r, err_r):
        os.close(fd)
    shutil.rmtree(workdir, ignore_errors=True)
    stdout = b"".join(chunks[out_r]).decode("utf-8", "replace")
    stderr = b"".join(chunks[err_r]).decode("utf-8", "replace")
    exit_code = None
    if status is None:
        if os.WIFEXITED(wait_status):
            exit_code = os.WEXITSTATUS(wait_status)
            if exit_code == 0:
                status = "ok"
            elif exit_code == BLOCKED_EXIT and BLOCK_MARK in stderr:
                status = "blocked"
            elif "MemoryError" in stderr:
                status = "memory"
            else:
                status = "error"
        else:
            sig = os.WTERMSIG(wait_status)
            status = "timeout" if sig in (signal.SIGXCPU, signal.SIGKILL) else "memory" if sig == signal.SIGSEGV else "crash"
            stderr += f"\n[sandbox] killed by signal {signal.Signals(sig).name}"
    return {"stdout": stdout, "stderr": stderr, "exit_code": exit_code, "status": status}


def main():
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out = sys.stdout
    for line in sys.stdin:
        try:
            result = _run(json.loads(line))
        except Exception as exc:  # the server must answer every job
            result = {"stdout": "", "stderr": f"[sandbox] internal error: {exc!r}", "exit_code": None, "status": "crash"}
        out.write(json.dumps(result) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
