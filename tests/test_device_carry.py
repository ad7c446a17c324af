"""benchmarks/device_carry.py: the command it prints runs the two benchmarks with flags they take, and
the carry holds what that command reads (building the wheels needs the package index: not tested)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import device_carry  # noqa: E402


def test_the_remote_command_passes_each_benchmark_only_flags_it_takes():
    command = device_carry.remote_command(".devcarry")
    runs = re.findall(r"\$P (benchmarks/\w+\.py) ([^;]*)", command)
    assert [script for script, _ in runs] == ["benchmarks/env_speed.py", "benchmarks/sandbox_speed.py"]
    for script, args in runs:
        usage = subprocess.run([sys.executable, str(ROOT / script), "--help"], capture_output=True, text=True, check=True).stdout
        for flag in re.findall(r"--[a-z][a-z-]*", args):
            assert re.search(rf"{flag}\b", usage), f"{script} takes no {flag}"
        assert "--write $OUT/" in args and "--pettingllms $PWD/.devcarry/peers" in args  # the workers' cwd is not the checkout
    installed = re.search(r"--find-links \.devcarry/whl ([^|]*)\|\|", command).group(1).split()
    assert installed == [p.split("==")[0] for p in device_carry.PACKAGES]


def test_the_peers_are_the_files_the_benchmarks_import(tmp_path):
    src = tmp_path / "src"
    for name in device_carry.PETTINGLLMS_FILES:
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(f"# {name}\n")
    device_carry.copy_peers(src, tmp_path / "peers")
    assert sorted(str(p.relative_to(tmp_path / "peers")) for p in (tmp_path / "peers").rglob("*.py")) == sorted(device_carry.PETTINGLLMS_FILES)
    imported = set(re.findall(r"from (pettingllms[\w.]+) import", (ROOT / "benchmarks/env_speed.py").read_text()
                              + (ROOT / "benchmarks/sandbox_speed.py").read_text()))
    assert {m.replace(".", "/") + ".py" for m in imported} <= set(device_carry.PETTINGLLMS_FILES)
    (src / device_carry.PETTINGLLMS_FILES[-1]).unlink()
    with pytest.raises(SystemExit, match="not a PettingLLMs checkout: it lacks pettingllms/multi_agent_env/math/math_worker.py"):
        device_carry.copy_peers(src, tmp_path / "again")


@pytest.mark.parametrize("wheel,name", [("farama_notifications-0.0.6-py3-none-any.whl", "farama-notifications"),
                                        ("reasoning_gym-0.1.25-py3-none-any.whl", "reasoning-gym"),
                                        ("PyYAML-6.0.2-cp312-cp312-manylinux_2_17_x86_64.whl", "pyyaml")])
def test_wheel_project_names_are_normalised_as_present_lists_them(wheel, name):
    assert device_carry.project(Path(wheel)) == name
