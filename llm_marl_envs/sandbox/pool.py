"""The Sandbox: a pool of warm fork servers, shared by every environment (and its forks)."""

from __future__ import annotations

import atexit
import json
import os
import queue
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

from ..core.cpus import available_cpus
from .limits import ExecResult, SandboxLimits

_SUPERVISOR = str(Path(__file__).with_name("_supervisor.py"))
_SERVER_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
"""The fork server's whole environment: programs must not see ours (API keys, tokens)."""
_CORES = available_cpus()
_CLOSED = "this Sandbox is closed; create a new one (or use default_sandbox())"
_STARTUP_TIMEOUT_S = 60.0
_ANSWER_GRACE_S = 10.0
"""Beyond the job's own wall-clock limit (which the server enforces), how long to wait for an
answer before declaring the server hung."""


class WorkerError(RuntimeError):
    """A fork server could not be started, or stopped answering."""


class _Worker:
    """One fork server and its supervisor: `python -I -S _supervisor.py BASE PREFIX` in its own
    session, BASE its scratch directory. The supervisor starts the fork server, which speaks on the
    same pipes."""

    def __init__(self, kernel_layers: bool = True) -> None:
        self.base = tempfile.mkdtemp(prefix="llm_marl_sbx_")
        os.chmod(self.base, 0o711)  # a server running as `nobody` must reach its run directory in it
        self._buffer = b""
        flags = [] if kernel_layers else ["--no-kernel-layers"]
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", _SUPERVISOR, self.base, sys.prefix, *flags], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, start_new_session=True, cwd="/", env=_SERVER_ENV, bufsize=0,
            )
        except OSError:
            shutil.rmtree(self.base, ignore_errors=True)
            raise
        hello = self._read_line(time.monotonic() + _STARTUP_TIMEOUT_S)
        if hello is None or "layers" not in hello:
            self.stop()
            detail = hello.get("error") if hello else "no answer"
            raise WorkerError(f"the sandbox fork server did not start ({detail}); check that {sys.executable} runs")
        self.layers: dict = hello["layers"]

    def request(self, job: dict, timeout: float) -> tuple[bool, dict | None]:
        """Send one job. Returns (started, answer): started False if the server never took the
        job (it was dead: safe to retry), answer None if it died or hung."""
        deadline = time.monotonic() + timeout
        if not self._write((json.dumps(job) + "\n").encode(), deadline):
            return False, None
        ack = self._read_line(time.monotonic() + _STARTUP_TIMEOUT_S)
        if ack is None or not ack.get("started"):
            return False, None
        return True, self._read_line(deadline)

    def _write(self, data: bytes, deadline: float) -> bool:
        try:
            fd = self.proc.stdin.fileno()
            view = memoryview(data)
            while view:
                if not select.select([], [fd], [], max(0.0, deadline - time.monotonic()))[1]:
                    return False
                view = view[os.write(fd, view[:1 << 16]):]
        except (OSError, ValueError):
            return False
        return True

    def _read_line(self, deadline: float) -> dict | None:
        try:
            fd = self.proc.stdout.fileno()
            while b"\n" not in self._buffer:
                if not select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
                    return None
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    return None
                self._buffer += chunk
        except (OSError, ValueError):
            return None
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            return json.loads(line)
        except ValueError:
            return None

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """Kill the supervisor now and remove its directory. Touches no pipe, so it is safe while
        another thread waits on one; the fork server dies with the supervisor (parent-death
        signal) and the running program with the fork server (see `_child`)."""
        self.proc.kill()  # a no-op once reaped: never signals a recycled pid
        self.proc.wait()
        self._remove_base()

    def stop(self) -> None:
        """End the server (gently if it is idle), reap it and remove its directory. Only for the
        thread that holds this worker."""
        try:
            self.proc.stdin.close()  # an idle server exits at end of input
            self.proc.wait(timeout=1.0)
        except (OSError, subprocess.TimeoutExpired):
            self.kill()
        try:
            self.proc.stdout.close()
        except OSError:
            pass
        self._remove_base()

    def _remove_base(self) -> None:
        for _ in range(20):  # a child killed by the server's death may still be exiting
            shutil.rmtree(self.base, ignore_errors=True)
            if not os.path.exists(self.base):
                break
            time.sleep(0.05)


class Sandbox:
    """Runs untrusted Python programs on a pool of warm workers.

    Thread-safe: concurrent `run` calls each take one of `workers` slots (waiting when all are
    busy). Shared by reference between an environment and its forks (`copy.deepcopy` returns the
    same object). A worker that died is replaced on the next run. In a process forked from the
    owner, the pool starts its own workers (pipes to the parent's workers are never shared).

    `warm=False` starts a fresh interpreter for every run (same isolation, limits and number of
    concurrent runs): slower, for comparison (benchmarks/throughput.py).

    `_kernel_layers=False` is for tests and benchmarks only: the workers start without
    namespaces, Landlock and seccomp, so that the audit hook is shown to contain programs alone.
    """

    def __init__(self, limits: SandboxLimits = SandboxLimits(), workers: int = 2, warm: bool = True, *,
                 _kernel_layers: bool = True):
        if not isinstance(limits, SandboxLimits):
            raise TypeError(f"limits must be a SandboxLimits, got {type(limits).__name__}")
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers must be an int >= 1, got {workers!r}")
        self.limits = limits
        self.n_workers = workers
        self.warm = warm
        self._kernel_layers = _kernel_layers
        self._lock = threading.Lock()
        self._closed = False
        self._prefetched: dict[tuple[str, str, SandboxLimits], list[ExecResult]] = {}
        self._reset_pool()

    def _reset_pool(self) -> None:
        self._pid = os.getpid()
        self._in_flight = 0
        self._batch_width = 0  # calls that the run_many calls under way keep in flight
        self._executor: ThreadPoolExecutor | None = None  # run_many's threads, made once (not per batch)
        self._idle: queue.Queue[_Worker | None] = queue.Queue()
        self._live: set[_Worker] = set()
        for _ in range(self.n_workers):
            self._idle.put(None)  # a slot; its worker starts on first use

    # A fork of an environment shares its sandbox; so does a deep copy, by design.
    def __deepcopy__(self, memo: dict) -> Sandbox:
        return self

    def __copy__(self) -> Sandbox:
        return self

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, code: str, stdin: str = "", limits: SandboxLimits | None = None) -> ExecResult:
        """Run `code` as `__main__` with `stdin`; never raises for anything the program does."""
        if not isinstance(code, str) or not isinstance(stdin, str):
            raise TypeError("code and stdin must be str")
        limits = self.limits if limits is None else limits
        if not isinstance(limits, SandboxLimits):
            raise TypeError(f"limits must be a SandboxLimits, got {type(limits).__name__}")
        if self._prefetched:
            with self._lock:
                ready = self._prefetched.get((code, stdin, limits))
                if ready:
                    return ready.pop(0)
        return self._submit({"code": code, "stdin": stdin, "limits": asdict(limits)}, limits)

    @contextmanager
    def prefetched(self, jobs: list[tuple[str, str]], limits: SandboxLimits | None = None) -> Iterator[None]:
        """Run `jobs` ((code, stdin) pairs) now, concurrently (`run_many`), and let the `run` calls
        made inside the block with the same (code, stdin, limits) take their results, once each and
        in order, instead of running again. What is not taken is dropped when the block ends.

        A rollout driver uses it to run the programs of every branch of a wave at once while it
        still steps the branches one after the other: each step gets the result its own run would
        have given (programs see nothing of each other; only their timing differs).
        """
        limits = self.limits if limits is None else limits
        jobs = list(jobs)
        results = self.run_many(jobs, limits) if jobs else []
        with self._lock:
            for (code, stdin), result in zip(jobs, results):
                self._prefetched.setdefault((code, stdin, limits), []).append(result)
        try:
            yield
        finally:
            with self._lock:
                for (code, stdin), result in zip(jobs, results):
                    key = (code, stdin, limits)
                    left = [r for r in self._prefetched.get(key, []) if r is not result]
                    if left:
                        self._prefetched[key] = left
                    else:
                        self._prefetched.pop(key, None)

    def run_many(self, jobs: list[tuple[str, str]], limits: SandboxLimits | None = None) -> list[ExecResult]:
        """Run (code, stdin) jobs concurrently over the workers; results in the order of `jobs`."""
        jobs = list(jobs)
        if len(jobs) <= 1:
            return [self.run(code, stdin, limits) for code, stdin in jobs]
        if os.getpid() != self._pid:  # a forked copy: the parent's threads are not here
            self._reset_pool()
        with self._lock:
            if self._closed:
                raise RuntimeError(_CLOSED)
            width = min(len(jobs), self.n_workers)
            self._batch_width += width
            if self._executor is None:  # started once: new threads per batch cost ~0.3 ms here
                self._executor = ThreadPoolExecutor(max_workers=self.n_workers, thread_name_prefix="sandbox")
            executor = self._executor
        try:
            return list(executor.map(lambda job: self.run(job[0], job[1], limits), jobs))
        finally:
            with self._lock:
                self._batch_width -= width

    def isolation(self) -> dict:
        """The isolation layers a worker has on this machine ({"landlock_fs": True, ...})."""
        worker = self._checkout()
        try:
            return dict(worker.layers)
        finally:
            self._checkin(worker)

    def close(self) -> None:
        """Stop every worker (idempotent); running programs are killed."""
        if os.getpid() != self._pid:  # a forked copy: the workers belong to the parent
            self._reset_pool()
        with self._lock:
            self._closed = True
            busy = set(self._live)
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False)  # its threads end once their runs (killed below) return
        while True:  # idle workers: stopped here
            try:
                worker = self._idle.get_nowait()
            except queue.Empty:
                break
            if worker is not None:
                busy.discard(worker)
                self._forget(worker)
        for worker in busy:  # running a job: killed here, cleaned up by the thread running it
            worker.kill()

    # ------------------------------------------------------------------ internals
    def _submit(self, job: dict, limits: SandboxLimits) -> ExecResult:
        timeout = limits.wall_time_s + _ANSWER_GRACE_S
        worker: _Worker | None = self._checkout()
        with self._lock:
            self._in_flight += 1
            # The server forks the next run's child while this one runs when a core is free for it
            # (off the next call's path): every call in flight, a batch's (`run_many`) counted at
            # its width from the start, takes a core for its program and one for such a spare.
            # With fewer cores the spare would only compete with the programs, so the next child
            # is forked when its job comes.
            busy = max(self._in_flight, min(self._batch_width, self.n_workers))
            job = {**job, "ahead": self.warm and 2 * busy <= _CORES}
        try:
            started, answer = worker.request(job, timeout)
            if not started:  # it died between runs: the job never reached it
                self._forget(worker)
                worker = None
                worker = self._start()
                started, answer = worker.request(job, timeout)
            if answer is None:
                self._forget(worker)
                worker = None
            return self._result(answer)
        finally:
            with self._lock:
                self._in_flight -= 1
            self._checkin(worker)

    def _checkin(self, worker: _Worker | None) -> None:
        # A fresh-interpreter worker serves one run; a closed sandbox's worker is cleaned up by
        # the thread that held it.
        if worker is not None and (self._closed or not self.warm):
            self._forget(worker)
            worker = None
        self._idle.put(worker)

    def _checkout(self) -> _Worker:
        if os.getpid() != self._pid:
            self._reset_pool()
        if self._closed:
            raise RuntimeError(_CLOSED)
        worker = self._idle.get()
        try:
            if self._closed:
                if worker is not None:
                    self._forget(worker)
                raise RuntimeError(_CLOSED)
            if worker is None or not worker.alive():
                if worker is not None:
                    self._forget(worker)
                worker = self._start()
        except BaseException:
            self._idle.put(None)
            raise
        return worker

    def _start(self) -> _Worker:
        worker = _Worker(self._kernel_layers)
        with self._lock:
            if self._closed:
                worker.stop()
                raise RuntimeError("this Sandbox is closed")
            self._live.add(worker)
        return worker

    def _forget(self, worker: _Worker) -> None:
        with self._lock:
            self._live.discard(worker)
        worker.stop()

    def _worker_pids(self) -> list[int]:
        """Process ids of the live fork servers (tests check that nothing outlives a run)."""
        with self._lock:
            return [w.proc.pid for w in self._live]

    @staticmethod
    def _result(answer: dict | None) -> ExecResult:
        if answer is None:
            return ExecResult("", "[sandbox] the worker died or stopped answering\n", None, "crash")
        return ExecResult(answer["stdout"], answer["stderr"], answer["exit_code"], answer["status"])


_default: Sandbox | None = None
_default_lock = threading.Lock()


def default_sandbox() -> Sandbox:
    """The process-wide shared Sandbox (default limits, 2 workers): created on first use, closed
    at exit."""
    global _default
    with _default_lock:
        if _default is None or _default._closed:
            _default = Sandbox()
            atexit.register(_default.close)
        return _default
