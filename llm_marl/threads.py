"""CPU threads for sampling and updates.

On a small CPU, torch's OpenMP threads are the difference between a usable and an unusable run. By
default libgomp lets idle threads spin; when anything else uses a core, each parallel region then
waits for a thread that is not running, and a spinning thread takes its core's time slice from the
thread that has work (measured side by side, quiet and loaded: `benchmarks/speed.py`, "Threads" in
`benchmarks.md`).

So the CLI makes idle OpenMP threads sleep (`OMP_WAIT_POLICY=PASSIVE`, unless the user set it) before
torch loads, and `--threads` (default: one per CPU this process may use, `available_cpus()`: its
affinity mask, at most its cgroup's CPU quota) sets torch's thread count.
"""

from __future__ import annotations

import os

from llm_marl_envs.core.cpus import available_cpus

WAIT_POLICY = "OMP_WAIT_POLICY"


def prepare_openmp() -> None:
    """Idle OpenMP threads sleep instead of spinning. libgomp reads this once, when torch loads, so
    call it before the first `import torch` (the CLI does); a value the user set is kept."""
    os.environ.setdefault(WAIT_POLICY, "PASSIVE")


def set_threads(threads: int = 0) -> int:
    """torch's intra-op threads: `threads` if > 0, else one per available CPU. Returns the count."""
    import torch

    if threads < 0:
        raise ValueError(f"--threads must be >= 0 (0 = one per available CPU), got {threads}")
    count = threads or available_cpus()
    torch.set_num_threads(count)
    return count
