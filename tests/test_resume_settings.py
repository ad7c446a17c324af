"""Flags given with `--resume` change the run's settings from the step it resumes at: config.json holds them from then
on (a later plain `--resume`, e.g. the one an interrupted run prints, keeps them), and its `resumes` the earlier ones."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from llm_marl.cli import main
from tests.test_sft import TINY, TINY_ARGS

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


def test_a_resume_with_other_tasks_or_reply_length_evaluates_after_training_as_before(evaluated_run, tmp_path, capsys):
    """The evaluation after training played the resumed run's --env-arg and --max-new-tokens, so that summary.json set
    scores of other tasks (or replies cut elsewhere) beside the ones before: it now plays those of eval_before.json."""
    run = Path(shutil.copytree(evaluated_run, tmp_path / "r"))
    before = json.loads((run / "eval_before.json").read_text())["settings"]
    assert before == {"env_args": json.loads((run / "config.json").read_text())["resolved_env_args"], "max_new_tokens": 4,
                      "thinking": False, "thinking_roles": ""}
    other = [f"--env-arg={k}={v}" for k, v in {**TINY, "height": 4, "width": 4}.items()]
    capsys.readouterr()
    assert main(["train", "--resume", str(run), "--steps", "2", *other, "--max-new-tokens", "6", "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert ("held-out eval after training plays the settings of the one before (eval_before.json): env_args "
            f"{json.dumps(before['env_args'])} (the run's now: ") in err and "max_new_tokens 4 (the run's now: 6)" in err
    assert json.loads((run / "eval_after.json").read_text())["settings"] == before
    config = json.loads((run / "config.json").read_text())
    assert (config["resolved_env_args"]["height"], config["sampling"]["max_new_tokens"]) == (4, 6)  # trained with the new ones


def test_a_resume_with_another_thinking_switch_is_refused_when_evaluated_after(evaluated_run, tmp_path, capsys):
    """The prompts of the evaluation after training are the engine's, built with the switch the run goes on with."""
    run = Path(shutil.copytree(evaluated_run, tmp_path / "r"))
    config = (run / "config.json").read_text()
    capsys.readouterr()
    assert main(["train", "--resume", str(run), "--steps", "2", "--thinking", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"llm-marl: error: {run} was evaluated before training with --no-thinking (eval_before.json), and the "
                   "evaluation after training prompts as that one did to compare: keep it, or pass --eval-episodes 0 (none after "
                   f"training); llm-marl eval --adapters {run} scores the trained adapters with either")
    assert (run / "config.json").read_text() == config


def test_eval_of_a_runs_adapters_plays_its_tasks_and_reply_length(evaluated_run, capsys):
    """Without --env-arg, eval --adapters RUN scored the quick configuration (and 256-token replies), not necessarily the
    run's: a run trained on 10x10 mazes was scored on 4x4 ones. It now reproduces the run's eval_after.json."""
    after = json.loads((evaluated_run / "eval_after.json").read_text())
    config = json.loads((evaluated_run / "config.json").read_text())
    for adapters in (evaluated_run, evaluated_run / "adapters", evaluated_run / "checkpoints" / "step_000001" / "adapters"):
        capsys.readouterr()
        assert main(["eval", "--env", "plan_path", "--adapters", str(adapters), "--n", "1"]) == 0
        out, err = capsys.readouterr()
        result = json.loads(out)
        assert (result["env_args"], result["max_new_tokens"]) == (config["resolved_env_args"], 4)
        assert f"eval: as {evaluated_run} trained (its config.json)" in err
        assert {k: result[k] for k in ("success_rate", "mean_reward", "final_team_reward")} == \
            {k: after[k] for k in ("success_rate", "mean_reward", "final_team_reward")}
    # An option given overrides its key of the run's, as over a --config file; the others stay.
    assert main(["eval", "--env", "plan_path", "--adapters", str(evaluated_run), "--n", "1", "--env-arg", "height=4",
                 "--env-arg", "mode=planner", "--max-new-tokens", "5"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["env_args"] == {**config["resolved_env_args"], "height": 4, "mode": "planner"}
    assert result["max_new_tokens"] == 5


@pytest.mark.parametrize("saved_engines", [0, 1])  # as config.json saves it now, and as it did (the implied 1)
def test_a_resume_with_rollout_workers_0_samples_in_the_trainer_process(tmp_path, capsys, monkeypatch, saved_engines):
    """A run with --rollout-workers saved engines 1 (the engine actor the workers call): a resume with --rollout-workers 0
    still started a Ray cluster with that engine actor, unless --engines 0 was given too."""
    from llm_marl.distributed.cluster import ClusterRun
    from llm_marl.distributed.config import ClusterConfig

    assert ClusterConfig(rollout_workers=2).engines == 0 and ClusterConfig(rollout_workers=2).engine_actors == 1
    run = tmp_path / "r"
    assert main(["train", "--algo", "at-grpo", *ARGS, "--steps", "1", "--out-dir", str(tmp_path), "--run-name", "r"]) == 0
    config = json.loads((run / "config.json").read_text())
    config["cluster"].update(rollout_workers=2, engines=saved_engines)  # as a run with --rollout-workers 2 saved it
    (run / "config.json").write_text(json.dumps(config))

    def no_cluster(self):
        raise AssertionError(f"a Ray cluster started: {self.config}")

    monkeypatch.setattr(ClusterRun, "start", no_cluster)
    capsys.readouterr()
    assert main(["train", "--resume", str(run), "--steps", "2", "--rollout-workers", "0", "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert ("pass --engines 1 to keep it" in err) == (saved_engines == 1)
    assert json.loads((run / "config.json").read_text())["cluster"]["engines"] == 0


def test_a_run_saved_before_dual_clip_resumes_with_plain_ppo_clip(tmp_path, capsys):
    """--dual-clip's default (3) came after such runs: their objective was plain PPO-clip, which a resume keeps."""
    run = tmp_path / "r"
    assert main(["train", "--algo", "at-grpo", *ARGS, "--steps", "1", "--out-dir", str(tmp_path), "--run-name", "r"]) == 0
    config = json.loads((run / "config.json").read_text())
    assert config["optim"].pop("dual_clip") == 3.0
    (run / "config.json").write_text(json.dumps(config))
    assert main(["train", "--resume", str(run), "--steps", "2", "--no-progress"]) == 0
    assert "had: run.steps 1 -> 2 (config.json" in capsys.readouterr().err  # dual_clip is no change
    assert json.loads((run / "config.json").read_text())["optim"]["dual_clip"] == 0.0
