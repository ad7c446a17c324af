"""benchmarks/sandbox_speed.py: its table, and that a round times the Sandbox of the tree it is
given (the timings themselves are the benchmark's, not a test's)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import sandbox_speed  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _round(scale: float) -> dict:
    return {name: {"sequential": 0.004 * scale, "two": 0.002 * scale} for name in sandbox_speed.PROGRAMS}


def test_the_table_gives_each_runner_and_the_ratios_of_the_medians():
    runs = {"ours": [_round(1.0), _round(1.0), _round(3.0)], "base": [_round(1.5)] * 3,
            "reference": [_round(10.0)] * 3, "bare": [_round(5.0)] * 3}
    lines = sandbox_speed.table(runs, "abc1234").splitlines()
    assert lines[0] == ("| program | calls in flight | ours: min / median | base abc1234: min / median | PettingLLMs runner: "
                        "min / median | bare `python -I -S -c`: min / median | reference / ours | bare / ours | base / ours |")
    trivial_one = next(line for line in lines if line.startswith("| trivial") and "| 1 |" in line)
    assert trivial_one == ("| trivial (`print(1)`) | 1 | 4.00 ms / 4.00 ms | 6.00 ms / 6.00 ms | 40.00 ms / 40.00 ms "
                           "| 20.00 ms / 20.00 ms | **10.0x** | 5.0x | 1.5x |")
    without = sandbox_speed.table({**runs, "base": [], "reference": []}).splitlines()
    assert without[0].endswith("| reference / ours | bare / ours |") and "base" not in without[0]
    assert all(line.endswith("| - | 5.0x |") for line in without[2:])


def test_a_round_on_a_tree_times_that_trees_sandbox(tmp_path):
    out = sandbox_speed.on_tree(ROOT, calls=2)
    assert set(out) == {"layers", *sandbox_speed.PROGRAMS}
    assert all(v["sequential"] > 0 and v["two"] > 0 for k, v in out.items() if k != "layers")
    with pytest.raises(RuntimeError, match="did not import that tree's sandbox"):
        sandbox_speed.on_tree(tmp_path, calls=2)  # no package there: the installed one would be timed


def test_a_section_names_uncommitted_changes(tmp_path, monkeypatch):
    """A benchmark section's Commit line says when the code that ran differs from HEAD (benchmarks.md,
    which the benchmark itself writes, does not count)."""
    from benchmarks._report import git_rev

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "code.py").write_text("x = 1\n")
    (tmp_path / "benchmarks.md").write_text("# Benchmarks\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    monkeypatch.chdir(tmp_path)
    rev = git_rev()
    assert rev and " " not in rev
    (tmp_path / "benchmarks.md").write_text("# Benchmarks\n\nnew section\n")
    assert git_rev() == rev
    (tmp_path / "code.py").write_text("x = 2\n")
    assert git_rev() == f"{rev} with uncommitted changes"
