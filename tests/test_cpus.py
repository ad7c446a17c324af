"""CPUs a process may use: the affinity mask, at most the cgroup's CPU quota."""

from __future__ import annotations

import os

import pytest

from llm_marl_envs.core import cpus


def _write(root, name, text):
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.mark.parametrize("files, limit", [
    ({"cpu.max": "max 100000\n"}, None),
    ({"cpu.max": "200000 100000\n"}, 2),
    ({"cpu.max": "150000 100000\n"}, 2),  # 1.5 CPUs of quota: two run at once
    ({"cpu.max": "50000 100000\n"}, 1),
    ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
    ({"cpu/cpu.cfs_quota_us": "400000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 4),
    ({}, None),
])
def test_the_cgroup_quota_is_read_in_either_cgroup_version(tmp_path, files, limit):
    for name, text in files.items():
        _write(tmp_path, name, text)
    assert cpus.cgroup_cpu_limit(tmp_path) == limit


def test_available_cpus_is_the_affinity_mask_at_most_the_quota(tmp_path, monkeypatch):
    mask = len(os.sched_getaffinity(0))
    monkeypatch.setattr(cpus, "CGROUP_ROOT", tmp_path)
    assert cpus.available_cpus() == mask  # no quota
    _write(tmp_path, "cpu.max", f"{100000 * (mask + 3)} 100000\n")
    assert cpus.available_cpus() == mask  # a quota above the mask changes nothing
    _write(tmp_path, "cpu.max", "100000 100000\n")
    assert cpus.available_cpus() == 1
