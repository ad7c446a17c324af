"""Sandboxed execution of untrusted Python (tool agents' programs, coder submissions).

    from llm_marl_envs.sandbox import Sandbox, SandboxLimits, default_sandbox
    result = default_sandbox().run("print(sum(range(10)))")   # ExecResult(stdout="45\\n", status="ok", ...)

Each execution runs in a separate process with wall and CPU time limits, an address-space limit,
an output cap, no network, no process creation, reads limited to the Python installation and a
throwaway working directory, writes limited to that directory, and is killed with its whole
process group. Layers (each catches what the others might miss): resource limits, an unprivileged
user when started as root, an empty network namespace where permitted, and an audit hook
(`_server.py`). Warm workers fork each execution from a ready interpreter, so a run costs
milliseconds; `warm=False` starts a fresh interpreter per run (for comparison).

Success is judged by exit status, not by stderr (pitfalls #7).
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import select
import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

_SERVER = str(Path(__file__).with_name("_server.py"))
STATUSES = ("ok", "error", "timeout", "memory", "output_limit", "blocked", "crash")


@dataclass(frozen=True)
class SandboxLimits:
    wall_time_s: float = 5.0
    """Wall-clock limit per execution, seconds."""
    cpu_time_s: float = 5.0
    """CPU-time limit per execution, seconds (rounded up to whole seconds)."""
    memory_mb: int = 512
    """Address-space limit, MiB."""
    output_bytes: int = 65_536
    """stdout + stderr cap; a program that prints more is killed."""
    file_bytes: int = 8 * 1024 * 1024
    """Largest file the program may write in its working directory."""

    def __post_init__(self) -> None:
        for name in ("wall_time_s", "cpu_time_s", "memory_mb", "output_bytes", "file_bytes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"SandboxLimits.{name} must be > 0, got {getattr(self, name)}")
        if self.memory_mb < 64:
            raise ValueError(f"SandboxLimits.memory_mb must be >= 64 (the interpreter itself needs it), got {self.memory_mb}")


@dataclass(frozen=True)
class ExecResult:
    stdout: str
    stderr: str
    exit_code: int | None
    status: str
    """One of STATUSES: ok (exit 0), error (non-zero exit), timeout, memory, output_limit,
    blocked (forbidden operation: network, process creation, file access outside its directory),
    crash (killed by a signal or the sandbox failed)."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class _Worker:
    """One fork-server process (its own session, so it can be killed with everything under it)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-I", _SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, start_new_session=True, cwd="/",
        )

    def request(self, job: dict, timeout: float) -> dict | None:
        """Send one job; None if the server died or did not answer in time."""
        try:
            self.proc.stdin.write((json.dumps(job) + "\n").encode())
            self.proc.stdin.flush()
            ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
            if not ready:
                return None
            line = self.proc.stdout.readline()
        except (BrokenPipeError, OSError, ValueError):
            return None
        return json.loads(line) if line else None

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass


class Sandbox:
    """A pool of warm sandbox workers. Thread-safe; shared (never copied) by environment forks."""

    def __init__(self, limits: SandboxLimits = SandboxLimits(), workers: int = 2, warm: bool = True):
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.limits = limits
        self.warm = warm
        self.n_workers = workers
        self._idle: queue.Queue[_Worker | None] = queue.Queue()
        self._all: list[_Worker] = []
        self._lock = threading.Lock()
        self._closed = False
        for _ in range(workers if warm else 0):
            self._idle.put(None)  # started lazily on first use

    # A fork of an environment shares its sandbox.
    def __deepcopy__(self, memo: dict) -> Sandbox:
        return self

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, code: str, stdin: str = "", limits: SandboxLimits | None = None) -> ExecResult:
        if self._closed:
            raise RuntimeError("this Sandbox is closed")
        limits = limits or self.limits
        job = {"code": code, "stdin": stdin, "limits": asdict(limits)}
        # The server enforces the wall clock itself; this outer deadline only catches a hung server.
        timeout = limits.wall_time_s + 10.0
        if not self.warm:
            worker = _Worker()
            try:
                return self._result(worker.request(job, timeout))
            finally:
                worker.kill()
        worker = self._idle.get()
        try:
            if worker is None or not worker.alive():
                worker = self._start_worker(worker)
            answer = worker.request(job, timeout)
            if answer is None:
                self._retire(worker)
                worker = None
            return self._result(answer)
        finally:
            self._idle.put(worker)

    def run_many(self, jobs: list[tuple[str, str]], limits: SandboxLimits | None = None) -> list[ExecResult]:
        with ThreadPoolExecutor(max_workers=self.n_workers) as pool:
            return list(pool.map(lambda job: self.run(job[0], job[1], limits), jobs))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            workers, self._all = self._all, []
        for worker in workers:
            worker.kill()

    # ------------------------------------------------------------------ internals
    def _start_worker(self, old: _Worker | None) -> _Worker:
        if old is not None:
            self._retire(old)
        worker = _Worker()
        with self._lock:
            self._all.append(worker)
        return worker

    def _retire(self, worker: _Worker) -> None:
        worker.kill()
        with self._lock:
            if worker in self._all:
                self._all.remove(worker)

    @staticmethod
    def _result(answer: dict | None) -> ExecResult:
        if answer is None:
            return ExecResult("", "[sandbox] worker died or stopped answering", None, "crash")
        return ExecResult(answer["stdout"], answer["stderr"], answer["exit_code"], answer["status"])


_default: Sandbox | None = None
_default_lock = threading.Lock()


def default_sandbox() -> Sandbox:
    """The process-wide sandbox (created on first use, closed at exit)."""
    global _default
    with _default_lock:
        if _default is None or _default._closed:
            _default = Sandbox()
            atexit.register(_default.close)
        return _default


__all__ = ["STATUSES", "ExecResult", "Sandbox", "SandboxLimits", "default_sandbox"]

