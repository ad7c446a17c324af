"""Ctrl-C and SIGTERM: a command that is stopped says so in one line and exits with 128 + the signal.

SIGTERM is what a batch scheduler sends at a preemption or a time limit (and what `kill` sends). Its
default action ends the process at once, skipping every `finally`; inside `sigterm_interrupts` it is
raised in the main thread as `Terminated`, a KeyboardInterrupt, so it unwinds exactly as Ctrl-C does.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread by `sigterm_interrupts`."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated()


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """While inside, SIGTERM raises `Terminated`. Signals reach the main thread only, so elsewhere this
    does nothing. Entering again (after a library installed its own handler) takes SIGTERM back."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def stopped_by(exc: KeyboardInterrupt) -> tuple[str, int]:
    """(what stopped the command, in words; the exit status a shell expects: 128 + the signal)."""
    if isinstance(exc, Terminated):
        return "terminated (SIGTERM)", 128 + signal.SIGTERM
    return "interrupted", 128 + signal.SIGINT
