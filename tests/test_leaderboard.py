"""`llm-marl leaderboard`: the README command runs every row (train, then eval of the trained adapters)
and writes the table; `--dry-run` lists the rows of every environment that has them."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from baselines import SEARCH_ENVS, SINGLE_AGENT_VARIANT, rows
from llm_marl.cli import main

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_readme_leaderboard_command(tmp_path, capsys):
    [line] = re.findall(r"^llm-marl leaderboard .*$", README, re.M)
    argv = shlex.split(line)[1:] + ["--max-new-tokens", "8", "--out-dir", str(tmp_path)]
    assert main(argv) == 0
    results = json.loads((tmp_path / "mass" / "leaderboard.json").read_text())
    assert [r["row"] for r in results] == [name for name, _ in rows("mass")]
    assert all(r["episodes"] == 4 and len(r["seeds"]) == 1 and r["success_rate"]["std"] == 0.0 for r in results)
    trained = [r for r in results if r["command"].startswith("llm-marl train")]
    assert len(trained) == 3 and all((tmp_path / "mass" / "seed0" / name / "adapters").is_dir()
                                     for name in ("mas-mhgpo-is", "mas-mhgpo-fof", "mas-mhgpo-rr"))
    table = (tmp_path / "mass" / "leaderboard.md").read_text()
    assert table.count("\n") == 2 + len(results) and "| MAS + MHGPO-RR |" in table
    assert (tmp_path / "mass" / "leaderboard.png").stat().st_size > 0


def test_seeds_and_a_shared_warm_start_per_variant(tmp_path):
    """Two seeds, each row warm-started by SFT on its variant's demonstrations (one SFT per variant and
    seed), trained rows starting from it; the table is mean ± std over the seeds."""
    argv = ["leaderboard", "--env", "plan_path", "--model", "tiny-random", "--steps", "1", "--n", "2", "--seeds", "0,1",
            "--warm-start-demos", "2", "--sft-arg=--epochs=1", "--sft-arg=--heldout-demos=0", "--train-arg=--lr=1e-3",
            "--max-new-tokens", "8", "--out-dir", str(tmp_path)]
    assert main(argv) == 0
    folder = tmp_path / "plan_path"
    for seed in (0, 1):
        assert sorted(p.name for p in (folder / f"seed{seed}").glob("sft-*")) == ["sft-planner", "sft-workflow"]
        config = json.loads((folder / f"seed{seed}" / "mas-at-grpo-per-role-policies" / "config.json").read_text())
        assert config["model"]["init_adapters"].endswith(f"seed{seed}/sft-workflow") and config["run"]["seed"] == seed
    results = json.loads((folder / "leaderboard.json").read_text())
    assert [len(r["seeds"]) for r in results] == [2] * 5
    assert "± " in (folder / "leaderboard.md").read_text()


@pytest.mark.parametrize("env", [*SINGLE_AGENT_VARIANT, *SEARCH_ENVS])
def test_dry_run_lists_the_rows(env, capsys):
    assert main(["leaderboard", "--env", env, "--dry-run"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == len(rows(env))


def test_unknown_env_is_a_clear_error(capsys):
    assert main(["leaderboard", "--env", "chess", "--dry-run"]) == 2
    assert "available" in capsys.readouterr().err
