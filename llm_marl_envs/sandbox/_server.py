"""Fork server: `python -I _server.py BASE_DIR` (standard library only).

Protocol on stdin/stdout, one JSON object per line. The server first says {"layers": {...}}
(the isolation layers this machine gives it), or {"error": "..."} and exits. Then for each job
{"code", "stdin", "limits"} it answers {"started": true} at once and {"stdout", "stderr",
"exit_code", "status"} when the job is done.

Each job runs in a child forked from this warm interpreter (a few milliseconds instead of an
interpreter start-up), in a fresh directory under BASE_DIR. This process supervises it: it feeds
stdin, enforces the wall clock and the output cap, kills the child's process group, and removes
the directory. The namespaces, the Landlock ruleset and the seccomp filter are prepared once here.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _child  # noqa: E402
import _kernel  # noqa: E402
import _landlock  # noqa: E402
import _paths  # noqa: E402
import _seccomp  # noqa: E402
from _guard import BLOCKED_EXIT, MARK  # noqa: E402

sys.path.pop(0)

# Pre-imported so that programs start warm (a fork shares them for free).
import bisect  # noqa: E402,F401
import collections  # noqa: E402,F401
import dataclasses  # noqa: E402,F401
import decimal  # noqa: E402,F401
import fractions  # noqa: E402,F401
import functools  # noqa: E402,F401
import gc  # noqa: E402
import heapq  # noqa: E402,F401
import itertools  # noqa: E402,F401
import json  # noqa: E402
import math  # noqa: E402,F401
import random  # noqa: E402,F401
import re  # noqa: E402,F401
import select  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import statistics  # noqa: E402,F401
import string  # noqa: E402,F401
import tempfile  # noqa: E402
import threading  # noqa: E402,F401
import time  # noqa: E402
import typing  # noqa: E402,F401

_READ_CHUNK = 65536
SCRATCH_MB = 256
"""Size of the in-memory file system that holds the working directories (where permitted)."""


def prepare(base: str) -> tuple[_child.Policy, dict]:
    """Namespaces and the Landlock ruleset, once per server; returns the policy and its layers."""
    layers: dict = dict(_kernel.unshare_namespaces(base, SCRATCH_MB))  # before the ruleset names `base`
    layers["capability_bounding_set"] = _kernel.drop_bounding_set()
    read_roots = _paths.read_roots()
    deny_roots = _paths.deny_roots(os.path.dirname(os.path.abspath(__file__)))
    read_files = [f for f in _paths.READ_FILES if os.path.exists(f)]
    write_files = [f for f in _paths.WRITE_FILES if os.path.exists(f)]
    ruleset = _landlock.build_ruleset(_paths.expand(read_roots, deny_roots), [base], read_files, write_files)
    layers.update(ruleset[1] if ruleset else {"landlock_fs": False, "landlock_tcp": False, "landlock_scope": False})
    seccomp = _seccomp.Filter() if _seccomp.supported() else None
    layers["seccomp"] = seccomp is not None
    to_nobody = os.geteuid() == 0 and all(_paths.reachable_by_others(r) for r in _paths.python_roots())
    layers["user"] = "nobody" if to_nobody else "root without capabilities" if os.geteuid() == 0 else "unprivileged user"
    layers["audit_hook"] = True
    policy = _child.Policy(read_roots, deny_roots, read_files, write_files, ruleset[0] if ruleset else None,
                           to_nobody, seccomp)
    return policy, layers


def supervise(job: dict, policy: _child.Policy, base: str) -> dict:
    """Run one job in a forked child and return its result."""
    limits = job["limits"]
    workdir = tempfile.mkdtemp(dir=base)
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        for fd in (in_r, in_w, out_r, out_w, err_r, err_w):
            os.close(fd)
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    if pid == 0:
        try:
            for fd in (in_w, out_r, err_r):
                os.close(fd)
            _child.run(job, policy, workdir, in_r, out_w, err_w)
        finally:
            os._exit(_child.SETUP_FAILED_EXIT)
    for fd in (in_r, out_w, err_w):
        os.close(fd)
    watch = _Watch(pid, job["stdin"].encode("utf-8", "replace"), in_w, out_r, err_r, limits)
    try:
        watch.run()
    finally:
        watch.finish()
        shutil.rmtree(workdir, ignore_errors=True)
    return _result(watch, limits)


class _Watch:
    """Feeds a child's stdin and collects its output until it has exited and closed its output,
    or a limit is hit; `finish` then kills its whole process group, reaps it and closes the pipes."""

    def __init__(self, pid: int, data: bytes, in_w: int, out_r: int, err_r: int, limits: dict):
        self.pid, self.data, self.sent = pid, data, 0
        self.in_w: int | None = in_w
        self.chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
        self.open_fds = [out_r, err_r]
        self.out_r, self.err_r = out_r, err_r
        self.cap, self.total = int(limits["output_bytes"]), 0
        self.deadline = time.monotonic() + float(limits["wall_time_s"])
        self.status: str | None = None
        self.wait_status: int | None = None
        self.cpu_s = 0.0
        try:
            self.exit_fd: int | None = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self.exit_fd = None  # old kernel: poll for the exit instead
        if data:
            os.set_blocking(in_w, False)
        else:
            self._close_stdin()

    def run(self) -> None:
        while self.open_fds or self.wait_status is None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                self.status = "timeout"
                return
            polling = self.exit_fd is None and self.wait_status is None
            readers = self.open_fds + ([self.exit_fd] if self.exit_fd is not None and self.wait_status is None else [])
            ready, writable, _ = select.select(readers, [self.in_w] if self.in_w is not None else [], [],
                                               min(left, 0.005) if polling else left)
            if self.wait_status is None and (polling or self.exit_fd in ready):
                self._reap(os.WNOHANG)
            for fd in ready:
                if fd != self.exit_fd:
                    self._read(fd)
            if self.total > self.cap:
                self.status = "output_limit"
                return
            if writable:
                self._feed()

    def _read(self, fd: int) -> None:
        chunk = os.read(fd, _READ_CHUNK)
        if not chunk:
            self.open_fds.remove(fd)
            return
        self.chunks[fd].append(chunk[:max(0, self.cap - self.total)])
        self.total += len(chunk)

    def _feed(self) -> None:
        try:
            self.sent += os.write(self.in_w, self.data[self.sent:self.sent + _READ_CHUNK])
        except BlockingIOError:
            return
        except BrokenPipeError:
            self.sent = len(self.data)  # the program closed its stdin: the rest is not wanted
        if self.sent >= len(self.data):
            self._close_stdin()

    def _close_stdin(self) -> None:
        if self.in_w is not None:
            os.close(self.in_w)
            self.in_w = None

    def _reap(self, flags: int) -> None:
        pid, wait_status, usage = os.wait4(self.pid, flags)
        if pid == self.pid:
            self.wait_status = wait_status
            self.cpu_s = usage.ru_utime + usage.ru_stime

    def finish(self) -> None:
        # Everything the program may have left behind is in its process group (its own session).
        for kill in (os.killpg, os.kill):
            try:
                kill(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self.wait_status is None:
            self._reap(0)
        self._close_stdin()
        for fd in [self.out_r, self.err_r] + ([self.exit_fd] if self.exit_fd is not None else []):
            os.close(fd)

    def output(self, fd: int) -> str:
        return b"".join(self.chunks[fd]).decode("utf-8", "replace")


def _result(watch: _Watch, limits: dict) -> dict:
    stdout, stderr, status, exit_code = watch.output(watch.out_r), watch.output(watch.err_r), watch.status, None
    wait_status = watch.wait_status
    if status == "timeout":
        stderr += f"\n[sandbox] killed: wall-clock limit of {limits['wall_time_s']} s\n"
    elif status == "output_limit":
        stderr += f"\n[sandbox] killed: more than {limits['output_bytes']} bytes of output\n"
    elif os.WIFEXITED(wait_status):
        exit_code = os.WEXITSTATUS(wait_status)
        last_line = stderr.rstrip("\n").rpartition("\n")[2]
        if exit_code == 0:
            status = "ok"
        elif exit_code == BLOCKED_EXIT and last_line.startswith(MARK):
            status = "blocked"
        elif exit_code == _child.SETUP_FAILED_EXIT and _child.SETUP_MARK in stderr:
            status = "crash"
        elif exit_code == 1 and last_line.startswith("MemoryError"):
            status = "memory"
        else:
            status = "error"
    else:
        sig = os.WTERMSIG(wait_status)
        # SIGXCPU at the soft CPU limit; SIGKILL at the hard one (soft + 1 s) if SIGXCPU was ignored.
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and watch.cpu_s >= float(limits["cpu_time_s"])):
            status = "timeout"
            stderr += f"\n[sandbox] killed: CPU-time limit of {limits['cpu_time_s']} s\n"
        else:
            status = "crash"
            stderr += f"\n[sandbox] killed by signal {signal.Signals(sig).name}\n"
    return {"stdout": stdout, "stderr": stderr, "exit_code": exit_code, "status": status}


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in a terminal reaches the whole group
    base = sys.argv[1]
    try:
        serve(base)
    except (BrokenPipeError, KeyboardInterrupt):
        pass  # our process is gone: nobody to answer
    finally:  # leave nothing behind
        shutil.rmtree(base, ignore_errors=True)
        _kernel.release_scratch(base)


def serve(base: str) -> None:
    out = sys.stdout
    try:
        policy, layers = prepare(base)
    except Exception as exc:  # pragma: no cover (depends on the machine)
        out.write(json.dumps({"error": repr(exc)}) + "\n")
        out.flush()
        return
    out.write(json.dumps({"layers": layers}) + "\n")
    out.flush()
    # Nothing allocated so far needs collecting: keep the collector from touching (and so
    # copying, page by page) the server's objects in every child.
    gc.collect()
    gc.freeze()
    for line in sys.stdin:
        out.write('{"started": true}\n')  # the job reached a live server (safe to retry if not)
        out.flush()
        try:
            result = supervise(json.loads(line), policy, base)
        except Exception as exc:  # the server must answer every job
            result = {"stdout": "", "stderr": f"[sandbox] internal error: {exc!r}", "exit_code": None, "status": "crash"}
        out.write(json.dumps(result) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
