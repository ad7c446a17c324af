"""Waiting for a killed process to be gone, as tests that kill servers and programs need."""

from __future__ import annotations

import time
from pathlib import Path


def running(pid: int) -> bool:
    """Alive and not a zombie waiting to be reaped."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_until_dead(pid: int, within: float = 5.0) -> None:
    """After a SIGKILL (sent by the test or by the code it tests): the process dies when it next runs,
    which under load can take a while."""
    deadline = time.monotonic() + within
    while running(pid):
        if time.monotonic() > deadline:
            raise AssertionError(f"process {pid} still runs {within} s after it was killed")
        time.sleep(0.01)
