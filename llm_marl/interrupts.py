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


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Ctrl-C and SIGTERM that arrive inside the block are raised when it ends (by their own handlers, which
    the block restores): for steps that must not be cut in two, such as making a run directory and its
    config.json. Signals reach the main thread only, so elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    # A handler installed from C (getsignal None) could not be put back, so that signal is left alone.
    previous = {s: signal.signal(s, lambda signum, frame: caught.append(signum))
                for s in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(s) is not None}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if caught:
            signal.raise_signal(caught[0])


def stopped_by(exc: KeyboardInterrupt) -> tuple[str, int]:
    """(what stopped the command, in words; the exit status a shell expects: 128 + the signal)."""
    if isinstance(exc, Terminated):
        return "terminated (SIGTERM)", 128 + signal.SIGTERM
    return "interrupted", 128 + signal.SIGINT
