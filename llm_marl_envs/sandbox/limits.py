"""Limits of one sandboxed execution, and its result."""

from __future__ import annotations

from dataclasses import dataclass

STATUSES = ("ok", "error", "timeout", "memory", "output_limit", "blocked", "crash")
MIN_MEMORY_MB = 64
"""The least address-space limit, MiB: the interpreter alone maps about 20-40 MiB."""


@dataclass(frozen=True)
class SandboxLimits:
    wall_time_s: float = 5.0
    """Wall-clock limit per execution, seconds (enforced by the supervising fork server)."""
    cpu_time_s: float = 5.0
    """CPU-time limit per execution, seconds (RLIMIT_CPU, rounded up to whole seconds)."""
    memory_mb: int = 512
    """Address-space limit, MiB (RLIMIT_AS): a program that needs more gets MemoryError."""
    output_bytes: int = 65_536
    """stdout + stderr cap, bytes; a program that prints more is killed and its output cut there."""
    file_bytes: int = 8 * 1024 * 1024
    """Largest file the program may write in its working directory, bytes (RLIMIT_FSIZE)."""

    def __post_init__(self) -> None:
        for name in ("wall_time_s", "cpu_time_s", "memory_mb", "output_bytes", "file_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"SandboxLimits.{name} must be a positive number, got {value!r}")
        if self.memory_mb < MIN_MEMORY_MB:
            raise ValueError(f"SandboxLimits.memory_mb must be >= {MIN_MEMORY_MB} (the interpreter alone maps about "
                             f"40 MiB), got {self.memory_mb}")


@dataclass(frozen=True)
class ExecResult:
    """What a program did. Deterministic for a deterministic program (no timings): two identical
    environments produce identical infos."""

    stdout: str
    stderr: str
    exit_code: int | None
    """The program's exit status; None when it was killed (time, output cap, signal)."""
    status: str
    """One of STATUSES: "ok" (exit 0), "error" (non-zero exit: exception, syntax error,
    sys.exit(n)), "timeout" (wall-clock or CPU limit), "memory" (MemoryError at the address-space
    limit), "output_limit", "blocked" (a forbidden operation: network, process creation, file
    access outside its directory...), "crash" (killed by a signal, or the sandbox failed).
    Judge success by this, not by stderr: a warning on stderr is not a failure."""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"ExecResult.status must be one of {STATUSES}, got {self.status!r}")

    @property
    def ok(self) -> bool:
        return self.status == "ok"
