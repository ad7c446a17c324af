"""Flags given with `--resume` change the run's settings from the step it resumes at: config.json holds them from then
on (a later plain `--resume`, e.g. the one an interrupted run prints, keeps them), and its `resumes` the earlier ones."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

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


def test_eval_episodes_given_with_resume_does_not_call_trained_adapters_the_start(tmp_path, capsys):
    """The held-out evaluation before training is of the adapters the run starts from; a run resumed after step 1 with
    --eval-episodes has trained ones (they were once evaluated and written as eval_before.json)."""
    run = tmp_path / "r"
    assert main(["train", "--algo", "at-grpo", *ARGS, "--steps", "1", "--out-dir", str(tmp_path), "--run-name", "r"]) == 0
    assert main(["train", "--resume", str(run), "--steps", "2", "--eval-episodes", "1", "--no-progress"]) == 0
    assert "no held-out eval before training: the run resumed after step 1" in capsys.readouterr().err
    assert not (run / "eval_before.json").exists() and (run / "eval_after.json").is_file()
    assert "eval_before" not in json.loads((run / "summary.json").read_text())


def test_a_resume_with_fewer_steps_than_trained_is_refused_and_keeps_the_config(tmp_path, capsys):
    """Once accepted: nothing trained, and config.json said `steps: 1` of a run whose checkpoints and metrics hold 2."""
    run = tmp_path / "r"
    assert main(["train", "--algo", "at-grpo", *ARGS, "--steps", "2", "--out-dir", str(tmp_path), "--run-name", "r"]) == 0
    config = (run / "config.json").read_text()
    capsys.readouterr()
    assert main(["train", "--resume", str(run), "--steps", "1", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"llm-marl: error: --steps 1: {run} has trained 2 steps already (its checkpoint step_000002); pass --steps 2 or more" in err
    assert (run / "config.json").read_text() == config


def test_lr_and_weight_decay_given_with_resume_train_the_resumed_steps(tmp_path):
    """The checkpoint's optimizer and scheduler states held the run's old --lr and --weight-decay, and loading them undid
    the flags: config.json and the log said lr 0.005, the resumed steps trained with 0.0001."""
    import torch

    run = tmp_path / "r"
    assert main(["train", "--algo", "at-grpo", *ARGS, "--steps", "1", "--out-dir", str(tmp_path), "--run-name", "r"]) == 0
    assert main(["train", "--resume", str(run), "--steps", "2", "--lr", "0.005", "--weight-decay", "0.5", "--no-progress"]) == 0
    assert [json.loads(line)["optim/lr"] for line in (run / "metrics.jsonl").read_text().splitlines()] == [1e-4, 0.005]
    state = torch.load(run / "checkpoints" / "step_000002" / "trainer_state.pt", weights_only=True)
    [group] = state["optimizers"]["shared"]["param_groups"]
    assert (group["lr"], group["weight_decay"], state["schedulers"]["shared"]["base_lrs"]) == (0.005, 0.5, [0.005])



@pytest.fixture(scope="module")
def evaluated_run(tmp_path_factory):
    """A run of 1 step with eval_before.json and eval_after.json of 1 episode each."""
    root = tmp_path_factory.mktemp("evaluated")
    assert main(["train", "--algo", "at-grpo", *ARGS, "--steps", "1", "--eval-episodes", "1", "--out-dir", str(root),
                 "--run-name", "r"]) == 0
    return root / "r"


def test_a_resume_with_other_held_out_episodes_is_refused(evaluated_run, tmp_path, capsys):
    """It once compared eval_before.json of 1 episode with an eval_after.json of 2 in summary.json and the printed line."""
    run = Path(shutil.copytree(evaluated_run, tmp_path / "r"))
    config = (run / "config.json").read_text()
    capsys.readouterr()
    assert main(["train", "--resume", str(run), "--steps", "2", "--eval-episodes", "2", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"llm-marl: error: --eval-episodes 2: {run} was evaluated on 1 held-out episodes before training "
                   "(eval_before.json), and the evaluation after training plays the same ones to compare: pass --eval-episodes 1 "
                   f"(or 0: none after training); llm-marl eval --adapters {run} scores the trained adapters on any number of episodes")
    assert (run / "config.json").read_text() == config


def test_a_resume_without_held_out_episodes_sets_the_earlier_eval_after_aside(evaluated_run, tmp_path, capsys):
    """--eval-episodes 0 is taken; the eval_after.json of the adapters the resume trains further stayed, and
    summary.json called it the result of training."""
    run = Path(shutil.copytree(evaluated_run, tmp_path / "r"))
    capsys.readouterr()
    assert main(["train", "--resume", str(run), "--steps", "2", "--eval-episodes", "0", "--no-progress"]) == 0
    assert "and the earlier eval_after.json (its adapters are trained further), moved to" in capsys.readouterr().err
    [aside] = (run / "superseded").iterdir()
    assert not (run / "eval_after.json").exists() and (aside / "eval_after.json").is_file()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["eval_before"]["episodes"] == 1 and "eval_after" not in summary
