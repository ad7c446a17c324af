"""How many CPUs this process can use: its affinity mask, narrowed by a cgroup CPU quota.

A container started with `--cpus 2` (a CFS quota) on a 64-core host still sees 64 CPUs in its
affinity mask; sizing thread pools or sandbox spares by that mask oversubscribes the two CPUs it may
actually use. Both cgroup versions are read where they are mounted inside the container.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


def cgroup_cpu_limit(root: Path | None = None) -> int | None:
    """CPUs allowed by the CPU quota of the cgroup mounted at `root` (default `CGROUP_ROOT`; quota /
    period, rounded up); None without a quota (or without a readable cgroup file)."""
    root = CGROUP_ROOT if root is None else root
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]  # cgroup v2: "max 100000" or "200000 100000"
    except (OSError, ValueError):
        try:  # cgroup v1: a quota of -1 means none
            quota = (root / "cpu" / "cpu.cfs_quota_us").read_text().strip()
            period = (root / "cpu" / "cpu.cfs_period_us").read_text().strip()
        except OSError:
            return None
    try:
        quota_us, period_us = int(quota), int(period)
    except ValueError:  # "max": no quota
        return None
    if quota_us <= 0 or period_us <= 0:
        return None
    return max(1, math.ceil(quota_us / period_us))


def available_cpus() -> int:
    """CPUs this process may run on: its affinity mask (which containers and `taskset` narrow),
    at most its cgroup's CPU quota."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    limit = cgroup_cpu_limit()
    return max(1, min(cpus, limit) if limit is not None else cpus)
