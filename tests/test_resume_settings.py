"""Flags given with `--resume` change the run's settings from the step it resumes at: config.json holds them from then
on (a later plain `--resume`, e.g. the one an interrupted run prints, keeps them), and its `resumes` the earlier ones."""

from __future__ import annotations

import json

from llm_marl.cli import main
from tests.test_sft import TINY_ARGS

ARGS = ["--env", "plan_path", *TINY_ARGS, "--model", "tiny-random", "--lora-r", "4", "--lora-alpha", "8", "--max-new-tokens", "4",
        "--no-progress"]


def test_a_resume_with_other_settings_writes_them_and_keeps_the_earlier_ones(tmp_path, capsys):
    run = tmp_path / "r"
    assert main(["train", "--algo", "at-grpo", *ARGS, "--steps", "1", "--out-dir", str(tmp_path), "--run-name", "r"]) == 0
    assert "resumes" not in json.loads((run / "config.json").read_text())
    assert main(["train", "--resume", str(run), "--steps", "2", "--gradient-checkpointing", "--lr", "0.001", "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert ("resumed with other settings than " + str(run) + " had: optim.lr 0.0001 -> 0.001; optim.gradient_checkpointing false "
            "-> true; run.steps 1 -> 2") in err
    config = json.loads((run / "config.json").read_text())
    assert (config["run"]["steps"], config["optim"]["gradient_checkpointing"], config["optim"]["lr"]) == (2, True, 0.001)
    assert config["resumes"] == [{"step": 2, "changed": {"optim.lr": [0.0001, 0.001], "optim.gradient_checkpointing": [False, True],
                                                         "run.steps": [1, 2]}}]

    # A plain --resume goes on with them, and changes nothing; the file still starts a new run as --config.
    assert main(["train", "--resume", str(run), "--steps", "2", "--no-progress"]) == 0
    assert "resumed with other settings" not in capsys.readouterr().err
    assert json.loads((run / "config.json").read_text()) == config
    assert main(["train", "--config", str(run / "config.json"), "--steps", "1", "--out-dir", str(tmp_path), "--run-name", "again",
                 "--no-progress"]) == 0
    again = json.loads((tmp_path / "again" / "config.json").read_text())
    assert "resumes" not in again and again["optim"]["gradient_checkpointing"] is True and again["optim"]["lr"] == 0.001
