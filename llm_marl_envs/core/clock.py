"""Wall time spent waiting on tool runtimes (sandboxed programs, searches), for the trainer's
step-time breakdown (`perf/tool_s`).

Environments wrap each call into a runtime in `tool_wait()`; the rollout driver reads
`tool_seconds()` before and after a stretch of environment work and counts the difference as tool
time, the rest as environment time. Waits that overlap (an environment that runs its test suite in
one thread while it checks a test in another, nested calls) count once: the clock measures the
time during which at least one wait is in progress. One clock per process.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_active = 0
_since = 0.0
_total = 0.0


@contextmanager
def tool_wait() -> Iterator[None]:
    """Count the time inside this block as time spent waiting on a tool runtime."""
    global _active, _since, _total
    with _lock:
        if _active == 0:
            _since = time.perf_counter()
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0:
                _total += time.perf_counter() - _since


def tool_seconds() -> float:
    """Seconds spent in `tool_wait()` blocks by this process so far (a wait in progress included)."""
    with _lock:
        return _total + (time.perf_counter() - _since if _active else 0.0)
