"""Running programs on stdin/stdout tests in the sandbox, and judging their output.

Two ways to run, for two kinds of program:

- `run_program`: an agent's (untrusted) program. One sandbox process per input, run concurrently
  on the sandbox's warm workers (`Sandbox.run_many`). Nothing is shared between runs.
- `run_batch`: trusted programs (a reference solution and its mutants) on many inputs inside ONE
  sandbox process: a harness execs each program with its own stdin, a capped stdout and a per-run
  timer. It turns the hundreds of runs of a mutation analysis into one process start. The harness
  still runs inside the sandbox (the programs are derived from data that may come from a dataset
  file); if it dies, the caller falls back to smaller batches.

A test passes when the program exits normally and its output equals the expected output token by
token (whitespace-normalised: `output.split() == expected.split()`), where a token of the expected
output written as a real number (`0.5`, `1e-3`) takes any number within 1e-6 of it, absolute or
relative, as Codeforces' checkers for real answers do, or within the tolerance the problem's statement
states (`outputs_match`, `Problem.judging`).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
import sys
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from ..core.clock import tool_wait
from ..sandbox import ExecResult, Sandbox, SandboxLimits

MARK = "@@llm_marl_harness@@"


REAL_TOLERANCE = 1e-6
"""The absolute or relative error a real-number answer may have (testlib's doubleCompare with Codeforces' usual 1e-6)."""
_REAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def outputs_match(actual: str, expected: str, any_case: bool = False, tolerance: float | None = None,
                  absolute: bool = False) -> bool:
    """Whitespace-normalised token comparison, real numbers within `tolerance` (REAL_TOLERANCE when None; see
    `_reals_close`), and with `any_case` letters in either case (a statement's "print YES or NO in any case").
    A problem's own judgment: `outputs_match(actual, expected, **problem.judging)`."""
    got, want = actual.split(), expected.split()
    if got == want:
        return True
    if any_case:
        got, want = [a.lower() for a in got], [b.lower() for b in want]
    return len(got) == len(want) and all(a == b or _reals_close(a, b, tolerance, absolute) for a, b in zip(got, want))


def _reals_close(actual: str, expected: str, tolerance: float | None = None, absolute: bool = False) -> bool:
    """Whether `expected` is a real number (a decimal point or an exponent: an integer answer stays exact) and
    `actual` a number within `tolerance` (REAL_TOLERANCE when None) of it, absolute or relative, or absolute
    only with `absolute`: a dataset's real answers are judged by a checker, and a correct program may print
    0.5 for 0.500000 or differ in the last digits."""
    if not ("." in expected or "e" in expected or "E" in expected) or not (_REAL.fullmatch(expected) and _REAL.fullmatch(actual)):
        return False
    want = float(expected)
    tolerance = REAL_TOLERANCE if tolerance is None else tolerance
    return abs(float(actual) - want) <= tolerance * (1.0 if absolute else max(1.0, abs(want)))


def passes(result: ExecResult, expected: str, **judging: Any) -> bool:
    """Whether the run exited normally and printed `expected` (`outputs_match` with `judging`, e.g. a problem's)."""
    return result.ok and outputs_match(result.stdout, expected, **judging)


def output_room(cap: int, expected: Iterable[str]) -> int:
    """`cap`, or twice the longest of the `expected` outputs a program is judged on (in bytes) when that is more:
    a dataset's expected output can be longer than the sandbox's cap, and a correct program (or the reference the
    mutation analysis runs) must not be killed for printing it."""
    longest = max((len(text.encode("utf-8", "surrogatepass")) for text in expected), default=0)
    return max(cap, 2 * longest)


def program_limits(sandbox: Sandbox, time_limit_s: float, output_bytes: int = 0,
                   memory_mb: int | None = None) -> SandboxLimits:
    """The sandbox's limits with a per-test time limit and memory limit (never looser than the sandbox's own).

    The limit is on CPU time (the sandbox rounds it up to whole seconds); the wall clock gets
    2 * time_limit_s + 1 s, so a busy machine does not fail a correct program while a sleeping
    one is still stopped. `memory_mb` is the address space (the sandbox's when None). The output
    cap is the sandbox's, or `output_bytes` (`output_room`) when that is more.
    """
    base = sandbox.limits
    return replace(base, wall_time_s=min(base.wall_time_s, 2 * time_limit_s + 1.0), cpu_time_s=min(base.cpu_time_s, time_limit_s),
                   memory_mb=min(base.memory_mb, memory_mb or base.memory_mb), output_bytes=max(base.output_bytes, output_bytes))


class RunCache:
    """LRU cache of untrusted runs keyed by (program, stdin, limits), at most `max_entries` results holding at
    most `max_bytes` of output in all (a program may print megabytes: `output_room`); a result larger than that
    is not kept. A result evicted is only saved work: the run is made again.

    Shared by forks (it is a tool runtime): K tree-sampling branches that write the same program,
    or a coder that keeps its program across turns, do not pay twice.
    """

    def __init__(self, max_entries: int = 4096, max_bytes: int = 64 * 2**20):
        self.max_entries = int(max_entries)
        self.max_bytes = int(max_bytes)
        self.nbytes = 0
        """The output held, bytes (of the stdout and stderr strings)."""
        self._data: OrderedDict[tuple[str, str, tuple], ExecResult] = OrderedDict()
        self._lock = threading.Lock()  # the env checks a test and runs the suite concurrently
        self.hits = 0
        self.misses = 0

    def __deepcopy__(self, memo: dict) -> RunCache:
        return self

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # A pickled environment starts with an empty cache (its lock cannot be pickled; results are only saved work).
        return RunCache, (self.max_entries, self.max_bytes)

    @staticmethod
    def _size(result: ExecResult) -> int:
        return sys.getsizeof(result.stdout) + sys.getsizeof(result.stderr)

    @staticmethod
    def key(code: str, stdin: str, limits: SandboxLimits) -> tuple[str, str, tuple]:
        h = lambda s: hashlib.sha256(s.encode("utf-8", "surrogatepass")).hexdigest()  # noqa: E731
        return h(code), h(stdin), (limits.wall_time_s, limits.cpu_time_s, limits.memory_mb, limits.output_bytes)

    def __contains__(self, key: tuple) -> bool:
        """Whether `key` has a result (counts no hit and keeps the LRU order)."""
        with self._lock:
            return key in self._data

    def get(self, key: tuple) -> ExecResult | None:
        with self._lock:
            result = self._data.get(key)
            if result is not None:
                self._data.move_to_end(key)
                self.hits += 1
            return result

    def put(self, key: tuple, result: ExecResult) -> None:
        size = self._size(result)
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self.nbytes -= self._size(old)
            if size > self.max_bytes:
                return
            self._data[key] = result
            self.nbytes += size
            while len(self._data) > self.max_entries or self.nbytes > self.max_bytes:
                self.nbytes -= self._size(self._data.popitem(last=False)[1])


def program_jobs(code: str, inputs: list[str], limits: SandboxLimits, cache: RunCache | None = None) -> list[tuple[str, str]]:
    """The sandbox runs (code, stdin) that `run_program` would make now under `limits`: one per
    distinct input that `cache` has no result for, in the order it makes them."""
    stdins = dict.fromkeys(inputs)
    return [(code, s) for s in stdins if cache is None or RunCache.key(code, s, limits) not in cache]


def run_program(sandbox: Sandbox, code: str, inputs: list[str], limits: SandboxLimits,
                cache: RunCache | None = None) -> list[ExecResult]:
    """Run an untrusted program once per input (separate processes, concurrently); order kept."""
    results: list[ExecResult | None] = [None] * len(inputs)
    todo: dict[str, list[int]] = {}
    for i, stdin in enumerate(inputs):
        cached = cache.get(RunCache.key(code, stdin, limits)) if cache is not None else None
        if cached is not None:
            results[i] = cached
        else:
            todo.setdefault(stdin, []).append(i)
    if todo:
        stdins = list(todo)
        if cache is not None:
            with cache._lock:
                cache.misses += len(stdins)
        with tool_wait():
            fresh = sandbox.run_many([(code, s) for s in stdins], limits)
        for stdin, result in zip(stdins, fresh):
            if cache is not None:
                cache.put(RunCache.key(code, stdin, limits), result)
            for i in todo[stdin]:
                results[i] = result
    return results  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------------
# the trusted batch harness

# The harness judges a mutant's output against the reference's with the same comparison as a program's; the
# problem's judgment (its tolerance, any_case) comes as data in the job, never as code.
_JUDGE = (f"import re\nREAL_TOLERANCE = {REAL_TOLERANCE!r}\n_REAL = re.compile({_REAL.pattern!r})\n"
          + inspect.getsource(outputs_match) + inspect.getsource(_reals_close))

HARNESS = _JUDGE + r'''
import gc, io, json, signal, sys, time

MARK = "@@llm_marl_harness@@"


class _Timeout(BaseException):
    pass


class _OutputLimit(BaseException):
    pass


class _Capped(io.BytesIO):
    def __init__(self, cap):
        super().__init__()
        self.cap = cap

    def write(self, data):
        if self.tell() + len(data) > self.cap:
            raise _OutputLimit()
        return super().write(data)


def _alarm(signum, frame):
    raise _Timeout()


# CPU-time timers (user + system of this process): verdicts do not depend on the machine's load.
signal.signal(signal.SIGPROF, _alarm)
job = json.loads(sys.stdin.read())
real_stdin, real_stdout, real_stderr = sys.stdin, sys.stdout, sys.stderr
recursion = sys.getrecursionlimit()


def run(code, data, timeout, cap):
    raw = _Capped(cap)
    out = io.TextIOWrapper(raw, encoding="utf-8", errors="replace")
    sys.stdin = io.TextIOWrapper(io.BytesIO(data.encode("utf-8")), encoding="utf-8")
    sys.stdout = out
    sys.stderr = io.TextIOWrapper(_Capped(cap), encoding="utf-8", errors="replace")
    status = "ok"
    start = time.process_time()
    try:
        signal.setitimer(signal.ITIMER_PROF, timeout)
        try:
            exec(code, {"__name__": "__main__", "__builtins__": __builtins__})
            out.flush()
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
    except _Timeout:
        status = "timeout"
    except _OutputLimit:
        status = "output_limit"
    except SystemExit as exc:
        status = "ok" if exc.code in (None, 0) else "error"
        try:
            out.flush()
        except BaseException:
            status = "output_limit"
    except MemoryError:
        status = "memory"
    except BaseException:
        status = "error"
    elapsed = time.process_time() - start
    sys.stdin, sys.stdout, sys.stderr = real_stdin, real_stdout, real_stderr
    sys.setrecursionlimit(recursion)
    text = raw.getvalue().decode("utf-8", "replace")
    gc.collect()
    return status, text, elapsed


def compiled(source):
    try:
        return compile(source, "main.py", "exec")
    except BaseException:
        return None


inputs = job["inputs"]
programs = [compiled(p) for p in job["programs"]]
cap = job["output_cap"]
ref = programs[0]
ref_runs = []
for data in inputs:
    ref_runs.append(run(ref, data, job["reference_timeout"], cap) if ref is not None else ("error", "", 0.0))
killed = []
for code in programs[1:]:
    row = []
    for (ref_status, ref_out, ref_time), data in zip(ref_runs, inputs):
        if ref_status != "ok":
            row.append(None)
            continue
        if code is None:
            row.append(1)
        else:
            timeout = min(job["max_timeout"], max(job["min_timeout"], job["timeout_factor"] * ref_time))
            status, text, _ = run(code, data, timeout, cap)
            row.append(int(status != "ok" or not outputs_match(text, ref_out, **job["judging"])))
        if row[-1] and job["stop_at_first_kill"]:
            break
    killed.append(row)
real_stdout.write(MARK + json.dumps({"reference": [[s, o] for s, o, _ in ref_runs], "killed": killed}))
real_stdout.flush()
'''


@dataclass(frozen=True)
class BatchResult:
    reference: list[tuple[str, str]]
    """(status, stdout) of program 0 on each input."""
    killed: list[list[int | None]]
    """killed[m][i]: 1 if program m+1 differs from program 0 on input i (crash, timeout or other
    output), 0 if it agrees, None if program 0 itself failed there. With `stop_at_first_kill`
    a row stops at its first 1."""


def run_batch(sandbox: Sandbox, programs: list[str], inputs: list[str], *, reference_timeout: float,
              timeout_factor: float = 10.0, min_timeout: float = 0.02, max_timeout: float = 1.0,
              stop_at_first_kill: bool = False, output_cap: int = 1 << 20,
              judging: dict[str, Any] | None = None) -> BatchResult | None:
    """Run trusted `programs` (program 0 = the reference) on `inputs` in one sandbox process.

    Each run of a mutant gets `timeout_factor` times the reference's CPU time on that input
    (clamped to [min_timeout, max_timeout] seconds of CPU time, so a busy machine does not turn
    slow mutants into killed ones); its output is compared with the reference's by `outputs_match`
    with `judging` (a problem's `Problem.judging`). Returns None if the harness process failed (the
    caller splits the batch).
    """
    code, stdin, limits = batch_job(sandbox, programs, inputs, reference_timeout=reference_timeout, timeout_factor=timeout_factor,
                                    min_timeout=min_timeout, max_timeout=max_timeout, stop_at_first_kill=stop_at_first_kill,
                                    output_cap=output_cap, judging=judging)
    with tool_wait():
        result = sandbox.run(code, stdin, limits)
    return parse_batch(result)


def batch_job(sandbox: Sandbox, programs: list[str], inputs: list[str], *, reference_timeout: float,
              timeout_factor: float = 10.0, min_timeout: float = 0.02, max_timeout: float = 1.0,
              stop_at_first_kill: bool = False, output_cap: int = 1 << 20,
              judging: dict[str, Any] | None = None) -> tuple[str, str, SandboxLimits]:
    """The sandbox run (code, stdin, limits) of `run_batch` with these arguments: the harness, its job, and
    limits that cover every run of the batch."""
    job: dict[str, Any] = {
        "programs": programs, "inputs": inputs, "reference_timeout": reference_timeout,
        "timeout_factor": timeout_factor, "min_timeout": min_timeout, "max_timeout": max_timeout,
        "stop_at_first_kill": stop_at_first_kill, "output_cap": output_cap, "judging": dict(judging or {}),
    }
    runs = len(inputs) * (reference_timeout + max(0, len(programs) - 1) * max_timeout)
    base = sandbox.limits
    limits = SandboxLimits(
        wall_time_s=min(120.0, 5.0 + runs), cpu_time_s=min(120.0, 5.0 + runs),
        memory_mb=max(base.memory_mb, 512), output_bytes=max(base.output_bytes, 2 * output_cap * max(1, len(inputs)) + 65_536),
        file_bytes=base.file_bytes,
    )
    return HARNESS, json.dumps(job), limits


def parse_batch(result: ExecResult) -> BatchResult | None:
    if not result.ok or MARK not in result.stdout:
        return None
    try:
        data = json.loads(result.stdout.rsplit(MARK, 1)[1])
    except json.JSONDecodeError:
        return None
    return BatchResult([(s, o) for s, o in data["reference"]], data["killed"])


def run_trusted(sandbox: Sandbox, program: str, inputs: list[str], time_limit_s: float) -> list[tuple[str, str]]:
    """(status, stdout) of a trusted program on each input: one harness process, or one process
    per input if the harness fails."""
    batch = run_batch(sandbox, [program], inputs, reference_timeout=time_limit_s) if inputs else BatchResult([], [])
    if batch is not None:
        return batch.reference
    limits = program_limits(sandbox, time_limit_s)
    with tool_wait():
        results = sandbox.run_many([(program, s) for s in inputs], limits)
    return [(r.status, r.stdout) for r in results]
