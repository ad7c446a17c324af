"""benchmarks/main_job.py's bookkeeping, with a stand-in for the `llm-marl` commands (no model runs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import main_job

EVAL = {"success_rate": 0.5, "mean_reward": {"planner": 0.5, "tool": 0.4}, "seconds": 60.0}


@pytest.fixture
def fake_cli(monkeypatch):
    calls = []

    def cli(*args: str) -> dict:
        calls.append(args[0])
        out = Path(args[args.index("--out-dir") + 1]) / args[args.index("--run-name") + 1]
        out.mkdir(parents=True)
        summary = {"train_s": 90.0} if args[0] == "sft" else {
            "train_s": 300.0, "eval_before": EVAL, "eval_after": {**EVAL, "success_rate": 0.75},
            "steps_without_signal": 0, "steps": 8}
        (out / "summary.json").write_text(json.dumps(summary))
        return summary

    monkeypatch.setattr(main_job, "cli", cli)
    return calls


def test_a_seed_timed_in_one_piece_keeps_its_wall_time_when_the_table_is_rewritten(fake_cli, tmp_path):
    first = main_job.run_seed(0, tmp_path)
    assert fake_cli == ["sft", "train"] and first["total_s"] is not None
    again = main_job.run_seed(0, tmp_path)  # reuses both runs: nothing is run, the wall time is the first one's
    assert fake_cli == ["sft", "train"] and again["total_s"] == pytest.approx(first["total_s"])
    assert "| 0 | 0.500 → 0.750 |" in main_job.report([again])


def test_a_seed_found_part_done_is_reported_as_resumed(fake_cli, tmp_path):
    (tmp_path / "sft1").mkdir()
    (tmp_path / "sft1" / "summary.json").write_text(json.dumps({"train_s": 90.0}))
    row = main_job.run_seed(1, tmp_path)
    assert fake_cli == ["train"] and row["total_s"] is None
    assert main_job.report([row]).splitlines()[2].endswith("| resumed |")
