"""The Sandbox: a pool of warm fork servers, shared by every environment (and its forks)."""

from __future__ import annotations

import array
import atexit
import fcntl
import math
import os
import queue
import select
import shutil
import subprocess
import sys
import tempfile
import termios
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..core.cpus import available_cpus
from . import _protocol
from ._precompile import owner_compiled
from .limits import ExecResult, SandboxLimits

_SUPERVISOR = str(Path(__file__).with_name("_supervisor.py"))
_SERVER_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LD_BIND_NOW": "1",
               "PYTHON_DISABLE_REMOTE_DEBUG": "1"}
"""The fork server's whole environment: programs must not see ours (API keys, tokens). LD_BIND_NOW:
the dynamic linker resolves every C function once, when the server starts, instead of in every
forked child at its first call (each a symbol lookup and a write to a page of the server's memory).
PYTHON_DISABLE_REMOTE_DEBUG: from Python 3.14 on, no other process can have the server or a
program run code through `sys.remote_exec` (earlier versions ignore it). A program's own
environment is set by the server (`_child`)."""
_CORES = available_cpus()
_CLOSED = "this Sandbox is closed; create a new one (or use default_sandbox())"
_STARTUP_TIMEOUT_S = 60.0
_ANSWER_GRACE_S = 10.0
"""Beyond the job's own wall-clock limit (which the server enforces), how long to wait for an
answer before declaring the server hung."""
_QUEUED_BYTES = 32_768
"""The longest job written behind a running job: half a pipe's default size (see `send_queued`)."""


class WorkerError(RuntimeError):
    """A fork server could not be started, or stopped answering."""


_BASE_PREFIX = "llm_marl_sbx_"
_swept = False


def sweep_stale_bases(folder: str | None = None) -> list[str]:
    """Remove the scratch directories (`llm_marl_sbx_<pid>_*`) this user's dead processes left behind, and return
    them. A worker's supervisor removes its own when it ends, but not when it is killed with its owner (SIGKILL of
    a whole process tree: Ray ends its workers and their children so), which left one empty folder a worker."""
    folder = folder or tempfile.gettempdir()
    removed = []
    for entry in os.scandir(folder):
        pid = entry.name[len(_BASE_PREFIX):].split("_", 1)[0] if entry.name.startswith(_BASE_PREFIX) else ""
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            if entry.stat(follow_symlinks=False).st_uid != os.geteuid() or not entry.is_dir(follow_symlinks=False):
                continue
            os.kill(int(pid), 0)  # its owner is alive (or the pid was taken again): keep it
        except ProcessLookupError:
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.path)
        except OSError:
            continue  # PermissionError: another user's process holds that pid
    return removed


class _Worker:
    """One fork server and its supervisor: `python -I -S _supervisor.py BASE PREFIX` in its own
    session, BASE its scratch directory. The supervisor starts the fork server, which speaks on the
    same pipes."""

    def __init__(self, kernel_layers: bool = True) -> None:
        global _swept
        if not _swept:  # once a process
            _swept = True
            sweep_stale_bases()
        self.base = tempfile.mkdtemp(prefix=f"{_BASE_PREFIX}{os.getpid()}_")
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
        os.set_blocking(self.proc.stdin.fileno(), False)  # see `send_queued`
        self._layers: dict | None = None

    @property
    def layers(self) -> dict:
        """The isolation layers of the fork server: its first line, which says that it started
        (waited for here, so that workers can start side by side)."""
        if self._layers is None:
            hello = self._read_message(time.monotonic() + _STARTUP_TIMEOUT_S)
            if not isinstance(hello, dict) or "layers" not in hello:
                self.stop()
                detail = hello.get("error") if isinstance(hello, dict) else "no answer"
                raise WorkerError(f"the sandbox fork server did not start ({detail}); check that {sys.executable} runs")
            self._layers = hello["layers"]
        return self._layers

    @property
    def started(self) -> bool:
        """Whether the fork server has said that it started (`layers` waits for that)."""
        return self._layers is not None

    def request(self, job: dict, timeout: float) -> tuple[bool, dict | None]:
        """Send one job. Returns (started, answer): started False if the server never took the
        job (it was dead: safe to retry), answer None if it died or hung."""
        deadline = time.monotonic() + timeout
        if not self.send(job, deadline):
            return False, None
        if not _acknowledges(self._read_message(time.monotonic() + _STARTUP_TIMEOUT_S)):
            return False, None
        return True, self._read_message(deadline)

    def send(self, job: dict, deadline: float) -> bool:
        """Write one job; False if the server is gone or has not read it by `deadline`. Raises
        WorkerError if it never started."""
        self.layers  # noqa: B018 (its start-up first)
        return self._write(_protocol.job_bytes(job), deadline)

    def _write(self, data: bytes, deadline: float) -> bool:
        try:
            fd = self.proc.stdin.fileno()
            view = memoryview(data)
            while view:
                if not _ready(fd, select.POLLOUT, deadline):
                    return False
                try:
                    view = view[os.write(fd, view[:1 << 16]):]
                except BlockingIOError:
                    pass
        except (OSError, ValueError):
            return False
        return True

    def takes_queued(self) -> bool:
        """Whether a job may be written behind the one the server runs: it has read that one (the
        pipe is empty), so that a job of at most `_QUEUED_BYTES` goes in whole at once."""
        return self.started and _unread(self.proc.stdin.fileno()) == 0

    def send_queued(self, job: dict) -> bool:
        """Write a job behind the one the server runs, which it reads once it has answered (call
        when `takes_queued`). Returns False, having written nothing, for a job longer than
        `_QUEUED_BYTES` or a server that is gone."""
        data = _protocol.job_bytes(job)
        fd = self.proc.stdin.fileno()
        if len(data) > _QUEUED_BYTES:
            return False
        try:
            written = os.write(fd, data)
        except (OSError, ValueError):  # the server is gone (the running job's answer will say)
            return False
        if written < len(data):  # not expected of an empty pipe: the rest follows, waiting if need be
            self._write(data[written:], time.monotonic() + _STARTUP_TIMEOUT_S)
        return True

    def output(self) -> int:
        """The descriptor the server answers on (for a caller that waits on several workers)."""
        return self.proc.stdout.fileno()

    def receive(self) -> list[dict | None] | None:
        """Read what the server has written (once `output()` is readable: this does not block).
        Returns the messages it finished (None for one that is not a message: `_protocol`), or
        None at the end of its output (the server is gone)."""
        try:
            chunk = os.read(self.output(), 1 << 16)
        except (OSError, ValueError):
            return None
        if not chunk:
            return None
        self._buffer += chunk
        messages = []
        while True:
            complete, message, self._buffer = _protocol.split_answer(self._buffer)
            if not complete:
                return messages
            messages.append(message)

    def _read_message(self, deadline: float) -> dict | None:
        try:
            fd = self.output()
            while True:
                complete, message, rest = _protocol.split_answer(self._buffer)
                if complete:
                    self._buffer = rest
                    return message
                if not _ready(fd, select.POLLIN, deadline):
                    return None
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    return None
                self._buffer += chunk
        except (OSError, ValueError):
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


def _job(code: str, stdin: str, limits: dict) -> dict:
    """A job for a fork server: the program (compiled here if it ran before, where that gives what
    the child's compile would: `_precompile`), its stdin and its limits."""
    job = {"code": code, "stdin": stdin, "limits": limits}
    compiled = owner_compiled(code)
    if compiled is not None:
        job["compiled"] = compiled
    return job


def _ready(fd: int, event: int, deadline: float) -> bool:
    """Wait until `fd` is ready for `event` (or has hung up) or `deadline` passes; poll, unlike
    select, takes descriptors of any number."""
    poller = select.poll()
    poller.register(fd, event)
    return bool(poller.poll(max(0.0, deadline - time.monotonic()) * 1000))


def _unread(fd: int) -> int:
    """Bytes written to the pipe `fd` and not read yet (-1 where it cannot say)."""
    count = array.array("i", [0])
    try:
        fcntl.ioctl(fd, termios.FIONREAD, count, True)
    except OSError:
        return -1
    return count[0]


def _acknowledges(message: dict | None) -> bool:
    """Whether a server's first message about a job says that it took the job."""
    return isinstance(message, dict) and bool(message.get("started"))


@dataclass
class _Call:
    """A job of a batch (`Sandbox.run_many`) on the worker that runs it."""
    index: int
    job: dict
    deadline: float = math.inf  # for the server's acknowledgement, then for its answer (once it runs)
    started: bool = False
    retried: bool = False
    queueable: bool = True  # False once its job proved too long to wait behind a running one


@dataclass
class _Held:
    """A worker that a batch holds: the job it runs, and the next one waiting in its input."""
    worker: _Worker
    calls: deque = field(default_factory=deque)


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
        self._idle: queue.Queue[_Worker | None] = queue.Queue()
        self._live: set[_Worker] = set()
        for _ in range(self.n_workers):
            self._idle.put(None)  # a slot; its worker starts on first use

    # A fork of an environment shares its sandbox; so does a deep copy, by design.
    def __deepcopy__(self, memo: dict) -> Sandbox:
        return self

    def __copy__(self) -> Sandbox:
        return self

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # A pickled environment (sent to another process, saved mid-episode) carries its sandbox as its
        # settings: the shared default one is the unpickling process's default sandbox, another one that
        # process's sandbox of the same settings (worker processes and pipes cannot travel).
        return _unpickled_sandbox, (self.limits, self.n_workers, self.warm, self._kernel_layers, self is _default)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, code: str, stdin: str = "", limits: SandboxLimits | None = None) -> ExecResult:
        """Run `code` as `__main__` with `stdin`; never raises for anything the program does."""
        limits = self._checked([(code, stdin)], limits)
        ready = self._take_prefetched(code, stdin, limits)
        if ready is not None:
            return ready
        return self._submit(_job(code, stdin, asdict(limits)), limits)

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
        """Run (code, stdin) jobs concurrently over the workers; results in the order of `jobs`.

        The calling thread drives the batch (`_Batch`): every worker it holds runs a job, with the
        next one waiting in its input, and all the answers are waited for at once (a thread per
        worker cost this process about twice the CPU time per short run)."""
        jobs = list(jobs)
        if len(jobs) <= 1:
            return [self.run(code, stdin, limits) for code, stdin in jobs]
        limits = self._checked(jobs, limits)
        if os.getpid() != self._pid:  # a forked copy: the parent's workers are not ours
            self._reset_pool()
        with self._lock:
            if self._closed:
                raise RuntimeError(_CLOSED)
            width = min(len(jobs), self.n_workers)
            self._batch_width += width
        try:
            return _Batch(self, jobs, limits, width).run()
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
    def _checked(self, jobs: list[tuple[str, str]], limits: SandboxLimits | None) -> SandboxLimits:
        """The limits to run `jobs` under, once the jobs and the limits are checked."""
        for code, stdin in jobs:
            if not isinstance(code, str) or not isinstance(stdin, str):
                raise TypeError("code and stdin must be str")
        limits = self.limits if limits is None else limits
        if not isinstance(limits, SandboxLimits):
            raise TypeError(f"limits must be a SandboxLimits, got {type(limits).__name__}")
        return limits

    def _take_prefetched(self, code: str, stdin: str, limits: SandboxLimits) -> ExecResult | None:
        """The next result that a `prefetched` block holds for this run, if any (taken)."""
        if not self._prefetched:
            return None
        with self._lock:
            ready = self._prefetched.get((code, stdin, limits))
            return ready.pop(0) if ready else None

    def _begin_call(self) -> bool:
        """Count a call in flight; returns whether its server may fork the next child ahead."""
        with self._lock:
            self._in_flight += 1
        return self._ahead()

    def _ahead(self) -> bool:
        """Whether a server may fork the next child ahead while its job runs."""
        with self._lock:
            # The server forks the next run's child while this one runs when a core is free for it
            # (off the next call's path): every call in flight, a batch's (`run_many`) counted at
            # its width from the start, takes a core for its program and one for such a spare.
            # With fewer cores the spare would only compete with the programs, so the next child
            # is forked when its job comes.
            busy = max(self._in_flight, min(self._batch_width, self.n_workers))
            return self.warm and 2 * busy <= _CORES

    def _end_call(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _submit(self, job: dict, limits: SandboxLimits) -> ExecResult:
        timeout = limits.wall_time_s + _ANSWER_GRACE_S
        worker: _Worker | None = self._checkout()
        job = {**job, "ahead": self._begin_call()}
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
            self._end_call()
            self._checkin(worker)

    def _checkout_up_to(self, n: int, block: bool) -> list[_Worker]:
        """Up to `n` workers, not waited for (see `_checkout`): with `block`, at least one."""
        workers: list[_Worker] = []
        try:
            while len(workers) < n:
                worker = self._checkout(block=block and not workers, wait=False)
                if worker is None:
                    break
                workers.append(worker)
        except BaseException:
            for worker in workers:
                self._give_back(worker)
            raise
        return workers

    def _give_back(self, worker: _Worker) -> None:
        """Return a worker that got no job: to its slot if it said it started, else it goes."""
        if worker.started:
            self._checkin(worker)
        else:
            self._forget(worker)
            self._checkin(None)

    def _checkin(self, worker: _Worker | None) -> None:
        # A fresh-interpreter worker serves one run; a closed sandbox's worker is cleaned up by
        # the thread that held it.
        if worker is not None and (self._closed or not self.warm):
            self._forget(worker)
            worker = None
        self._idle.put(worker)

    def _checkout(self, block: bool = True, wait: bool = True) -> _Worker | None:
        """A worker for one call (started if its slot has none or it died, and with `wait`
        False not waited for: `_Worker.send` does); with `block` False, None when every slot is
        taken."""
        if os.getpid() != self._pid:
            self._reset_pool()
        if self._closed:
            raise RuntimeError(_CLOSED)
        try:
            worker = self._idle.get(block)
        except queue.Empty:
            return None
        try:
            if self._closed:
                if worker is not None:
                    self._forget(worker)
                raise RuntimeError(_CLOSED)
            if worker is None or not worker.alive():
                if worker is not None:
                    self._forget(worker)
                worker = self._start(wait)
        except BaseException:
            self._idle.put(None)
            raise
        return worker

    def _start(self, wait: bool = True) -> _Worker:
        worker = _Worker(self._kernel_layers)
        if wait:
            worker.layers  # noqa: B018 (raises WorkerError if it did not start)
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


class _Batch:
    """One `Sandbox.run_many` call, driven from the calling thread. Every worker it holds runs a
    job and, when the next one is small enough to be written without waiting, has it in its input
    already: its server reads it once it has answered, without waiting for this thread. Each call
    goes as in `Sandbox._submit`: a job that never reached a live server is sent again to a fresh
    one, once (one that waited behind a job goes back to the batch's list); a server that dies or
    hangs during a job is replaced and the job gets a crash result."""

    def __init__(self, sandbox: Sandbox, jobs: list[tuple[str, str]], limits: SandboxLimits, width: int):
        self.sandbox, self.jobs, self.limits, self.width = sandbox, jobs, limits, width
        self.results = [sandbox._take_prefetched(code, stdin, limits) for code, stdin in jobs]
        self.todo = deque(i for i, result in enumerate(self.results) if result is None)
        self.fields = asdict(limits)
        self.held: dict[int, _Held] = {}  # by the descriptor its worker answers on
        self.returned: dict[int, _Call] = {}  # calls made and back in the list (never sent, or never started)

    def run(self) -> list[ExecResult]:
        try:
            while self.todo or self.held:
                self._take_workers()
                self._queue_next()
                self._collect()
        finally:  # interrupted: nobody will read these servers' answers, so they go
            for held in self.held.values():
                self._drop(held.worker)
        return self.results

    def _call(self) -> _Call:
        """The next job's call, made once (its program counts as seen once: `_job`)."""
        index = self.todo.popleft()
        if index in self.returned:
            return self.returned.pop(index)
        code, stdin = self.jobs[index]
        return _Call(index, _job(code, stdin, self.fields))

    def _put_back(self, calls: list[_Call]) -> None:
        """Return calls that never started to the front of the list, in order."""
        for call in reversed(calls):
            call.started, call.deadline = False, math.inf
            self.returned[call.index] = call
            self.todo.appendleft(call.index)

    def _take_workers(self) -> None:
        """A job for every worker that can be taken (all taken first: those that must start, start
        side by side; another thread may hold some of them)."""
        workers = self.sandbox._checkout_up_to(min(len(self.todo), self.width - len(self.held)), block=not self.held)
        try:
            while workers:
                call = self._call()
                call.job["ahead"] = self.sandbox._begin_call()
                self._send(workers.pop(), call)
        finally:
            for worker in workers:  # interrupted before their jobs
                self.sandbox._give_back(worker)

    def _send(self, worker: _Worker, call: _Call) -> None:
        """Make `call` the job that `worker` runs (it counts as a call in flight)."""
        try:
            sent = worker.send(call.job, time.monotonic() + self.limits.wall_time_s + _ANSWER_GRACE_S)
        except WorkerError:  # it never started: its slot is free again
            self._drop(worker)
            raise
        held = _Held(worker, deque([call]))
        call.deadline = time.monotonic() + _STARTUP_TIMEOUT_S
        if sent:
            self.held[worker.output()] = held
        else:
            self._lost(held)

    def _queue_next(self) -> None:
        for held in self.held.values():
            head = self.returned.get(self.todo[0]) if self.todo else None
            if not self.todo or (head is not None and not head.queueable):
                return
            if len(held.calls) == 1 and held.worker.takes_queued():
                call = self._call()
                call.job["ahead"] = self.sandbox._ahead()
                if held.worker.send_queued(call.job):
                    held.calls.append(call)
                else:  # too long (or the server is gone): it goes to the next worker that answers
                    call.queueable = False
                    self._put_back([call])
                    return

    def _collect(self) -> None:
        """Wait until a worker has written or a deadline has passed, and handle what came."""
        poller = select.poll()
        for fd in self.held:
            poller.register(fd, select.POLLIN)
        wait = min(held.calls[0].deadline for held in self.held.values()) - time.monotonic()
        ready = {fd for fd, _ in poller.poll(max(0.0, wait) * 1000)}
        now = time.monotonic()
        for fd, held in list(self.held.items()):
            if fd in ready:
                messages = held.worker.receive()
            elif now >= held.calls[0].deadline:
                messages = None
            else:
                continue
            for message in [None] if messages is None else messages:  # None: the server is gone or hung
                call = held.calls[0]
                if message is None or not (call.started or _acknowledges(message)):
                    del self.held[fd]
                    self._lost(held)
                    break
                if not call.started:
                    call.started, call.deadline = True, now + self.limits.wall_time_s + _ANSWER_GRACE_S
                    continue
                held.calls.popleft()
                self.results[call.index] = Sandbox._result(message)
                if held.calls:  # the job that waited behind it: the server reads it now
                    held.calls[0].deadline = now + _STARTUP_TIMEOUT_S
                    continue
                del self.held[fd]
                if self.todo:
                    call = self._call()
                    call.job["ahead"] = self.sandbox._ahead()
                    self._send(held.worker, call)
                else:
                    self._release(held.worker)
                break

    def _lost(self, held: _Held) -> None:
        """`held`'s server died, hung or never took its job. The job it ran (if it had started)
        gets a crash result; one that never reached it is sent to a fresh worker, once; the job
        waiting behind goes back to the list."""
        call, *waiting = held.calls
        self._put_back(waiting)
        if call.started or call.retried:
            self.results[call.index] = Sandbox._result(None)
            self._drop(held.worker)
            return
        self.sandbox._forget(held.worker)
        try:
            worker = self.sandbox._start()
        except BaseException:
            self._release(None)
            raise
        call.retried = True
        self._send(worker, call)

    def _drop(self, worker: _Worker) -> None:
        """A held worker that goes (dead, hung, or nobody will read it): its slot is free again."""
        self.sandbox._forget(worker)
        self._release(None)

    def _release(self, worker: _Worker | None) -> None:
        """End a held worker's call in flight and give its slot back, with `worker` in it (None:
        the slot's worker went)."""
        self.sandbox._end_call()
        self.sandbox._checkin(worker)


_default: Sandbox | None = None
_default_lock = threading.Lock()


_unpickled: dict[tuple[Any, ...], Sandbox] = {}


def _unpickled_sandbox(limits: SandboxLimits, workers: int, warm: bool, kernel_layers: bool, default: bool) -> Sandbox:
    """What a pickled Sandbox loads as (`Sandbox.__reduce__`): the default sandbox, or one sandbox per process
    and settings, closed at exit (envs pickled one by one and loaded together share it, not one pool each)."""
    if default:
        return default_sandbox()
    key = (limits, workers, warm, kernel_layers)
    with _default_lock:
        sandbox = _unpickled.get(key)
        if sandbox is None or sandbox._closed:
            sandbox = _unpickled[key] = Sandbox(limits, workers, warm, _kernel_layers=kernel_layers)
            atexit.register(sandbox.close)
        return sandbox


def default_sandbox() -> Sandbox:
    """The process-wide shared Sandbox (default limits, 2 workers): created on first use, closed
    at exit."""
    global _default
    with _default_lock:
        if _default is None or _default._closed:
            _default = Sandbox()
            atexit.register(_default.close)
        return _default
