"""Run directories and config flags (a model, the tiny test one, only where a run trains)."""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from llm_marl.config import QUICK_ENV_ARGS, ModelConfig, OptimConfig, RunConfig, SamplingConfig, add_arguments, from_args
from llm_marl.runs import RunDir, RunDirError
from llm_marl.trainer import interrupted_message


def test_run_dir_layout_metrics_and_checkpoints(tmp_path):
    run = RunDir.create(tmp_path, "plan_path", "at-grpo", 3)
    assert run.path.name.startswith("plan_path__at-grpo__3__")
    run.save_config({"a": 1})
    assert RunDir.open(run.path).load_config() == {"a": 1}
    for step in (1, 2, 3):
        run.log_metrics(step, {"reward/mean": step / 10})
        run.write_trajectories(step, [{"text": f"s{step}"}])
        tmp = run.begin_checkpoint(step)
        (tmp / "state.txt").write_text(str(step))
        run.commit_checkpoint(step, tmp, keep=2)
    step, path = run.latest_checkpoint()
    assert step == 3 and (path / "state.txt").read_text() == "3"
    assert sorted(p.name for p in (run.path / "checkpoints").glob("step_*")) == ["step_000002", "step_000003"]
    run.truncate_after(2)
    assert [m["step"] for m in run.metrics()] == [1, 2]
    assert sorted(p.name for p in (run.path / "trajectories").iterdir()) == ["step_000001.jsonl", "step_000002.jsonl"]


def test_an_unfinished_checkpoint_is_ignored(tmp_path):
    run = RunDir.create(tmp_path, "e", "a", 0)
    tmp = run.begin_checkpoint(1)
    run.commit_checkpoint(1, tmp)
    run.begin_checkpoint(2)  # killed before commit
    assert run.latest_checkpoint()[0] == 1


def test_existing_run_dir_is_not_overwritten(tmp_path):
    RunDir.create(tmp_path, "e", "a", 0, name="x").save_config({})
    with pytest.raises(ValueError, match="--resume"):
        RunDir.create(tmp_path, "e", "a", 0, name="x")
    with pytest.raises(ValueError, match="not a run directory"):
        RunDir.open(tmp_path / "missing")


def _create_at_once(monkeypatch, count: int, **kwargs) -> list:
    """`RunDir.create` from `count` threads released together, each one's look at a folder's contents slowed
    so that all look before any makes a folder (the race of separate processes): each one's run, or its error."""
    barrier, out, iterdir = threading.Barrier(count), [], Path.iterdir

    def slow_iterdir(path):
        entries = list(iterdir(path))
        time.sleep(0.1)
        return iter(entries)

    monkeypatch.setattr(Path, "iterdir", slow_iterdir)

    def one():
        barrier.wait()
        try:
            out.append(RunDir.create(**kwargs))
        except ValueError as exc:
            out.append(exc)

    threads = [threading.Thread(target=one) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_runs_started_in_the_same_second_get_their_own_directories(tmp_path, monkeypatch):
    """A sweep started in a loop (`for lr in ...; do llm-marl train --lr $lr & done`): before, the second run
    of a second failed with 'already exists', or two shared one directory when they checked at once."""
    monkeypatch.setattr("llm_marl.runs.time.strftime", lambda fmt: "20261128-162300")
    runs = _create_at_once(monkeypatch, 6, root=tmp_path, env="e", algo="a", seed=0)
    base = "e__a__0__20261128-162300"
    assert sorted(r.path.name for r in runs) == sorted([base] + [f"{base}-{n}" for n in range(2, 7)])
    assert all((r.path / sub).is_dir() for r in runs for sub in ("trajectories", "checkpoints", "adapters"))


def test_a_run_name_given_twice_at_once_goes_to_one_run(tmp_path, monkeypatch):
    out = _create_at_once(monkeypatch, 4, root=tmp_path, env="e", algo="a", seed=0, name="mine")
    assert [type(r).__name__ for r in out].count("RunDir") == 1
    assert all("already exists" in str(r) for r in out if not isinstance(r, RunDir))


def test_a_run_is_held_by_one_process_until_it_exits(tmp_path):
    """A resume started while the run (or another resume of it) still goes on is refused; once that process
    has ended, however it ended, the run can be resumed."""
    run = RunDir.create(tmp_path, "e", "a", 0)
    holder = subprocess.Popen([sys.executable, "-c", f"from llm_marl.runs import RunDir\nwith RunDir({str(run.path)!r}).held():\n"
                               "    print('held', flush=True)\n    import time\n    time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ValueError, match="in use by another llm-marl process"):
            with RunDir(run.path).held():
                pass
    finally:
        holder.kill()
        holder.wait()
    with RunDir(run.path).held():  # the kernel let go of the killed process's lock
        pass


def test_resume_of_a_run_in_use_is_one_error_line(tmp_path, capsys):
    from llm_marl.cli import main

    argv = ["train", "--model", "tiny-random", "--steps", "1", "--eval-episodes", "0", "--max-new-tokens", "8",
            "--no-progress", "--out-dir", str(tmp_path), "--run-name", "r"]
    assert main(argv) == 0
    capsys.readouterr()
    with RunDir(tmp_path / "r").held():  # as the run's own process holds it while it trains
        assert main(["train", "--resume", str(tmp_path / "r"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("llm-marl: error: ") and "in use by another llm-marl process" in err and "Traceback" not in err
    assert main(["train", "--resume", str(tmp_path / "r"), "--steps", "2", "--no-progress"]) == 0  # let go: it resumes


def test_a_run_trained_from_python_can_be_resumed_by_the_same_process(tmp_path):
    """`train` lets go of its run when it returns, so a script or notebook can resume what it trained."""
    from llm_marl.config import ModelConfig, RunConfig, SamplingConfig
    from llm_marl.trainer import TrainConfig, train

    config = TrainConfig(model=ModelConfig(model="tiny-random", lora_r=4, lora_alpha=8), sampling=SamplingConfig(max_new_tokens=8),
                         run=RunConfig(env="plan_path", steps=1, eval_episodes=0, out_dir=str(tmp_path), progress=False))
    run = train(config, log=lambda *_: None)
    config.run.steps = 2
    assert len(train(config, resume=str(run.path), log=lambda *_: None).metrics()) == 2


def test_the_resume_commands_a_run_names_take_any_path_as_one_argument(tmp_path):
    """What a message tells a user to run works when pasted into a shell, with spaces and quotes in the path."""
    root = tmp_path / "my runs" / "it's here"
    run = RunDir.create(root, "e", "a", 0, name="x")
    run.save_config({})
    run.log_metrics(1, {"reward": 0.0})
    with pytest.raises(ValueError) as refused:
        RunDir.create(root, "e", "a", 0, name="x")
    said = str(refused.value).split("pass ", 1)[1].split(" to continue")[0]
    interrupted = interrupted_message(run, 2, None).split("continue with: ", 1)[1]
    for command in (said, interrupted):
        assert shlex.split(command)[-2:] == ["--resume", str(run.path)], command


def parser():
    p = argparse.ArgumentParser()
    for cls, title in [(ModelConfig, "model"), (SamplingConfig, "sampling"), (OptimConfig, "optim"), (RunConfig, "run")]:
        add_arguments(p, cls, title)
    return p


def test_flags_override_defaults_and_saved_values():
    args = parser().parse_args(["--lr", "3e-4", "--env-arg", "height=5", "--env-arg", "mode=planner", "--no-progress", "--loss-agg", "seq-mean"])
    optim = from_args(OptimConfig, args, base={"lr": 1.0, "epochs": 3})
    assert optim.lr == 3e-4 and optim.epochs == 3 and optim.loss_agg == "seq-mean"
    run = from_args(RunConfig, args)
    assert run.env_args == {"height": 5, "mode": "planner"} and run.progress is False
    # A mapping's flag overrides its key; the saved options it does not name stay (they were dropped, so that
    # `--config RUN/config.json --env-arg max_turns=2` trained on the environment's default 10x10 mazes).
    run = from_args(RunConfig, args, base={"env_args": {"height": 3, "width": 3}, "steps": 2})
    assert run.env_args == {"height": 5, "width": 3, "mode": "planner"} and run.steps == 2


@pytest.mark.parametrize("argv,fix", [(["--temperature", "0"], "use eval for greedy"), (["--lr", "-1"], "--lr must be > 0"),
                                      (["--steps", "0"], "--steps")])
def test_bad_config_names_the_fix(argv, fix):
    args = parser().parse_args(argv)
    with pytest.raises(ValueError, match=fix):
        for cls in (SamplingConfig, OptimConfig, RunConfig):
            from_args(cls, args)


@pytest.mark.parametrize("spelling", ["at_grpo", "AT-GRPO"])
def test_any_spelling_of_algo_takes_its_flags_and_is_saved_as_its_id(spelling):
    """--algo at_grpo trained at-grpo, but its flags (--K) were 'unrecognized arguments' and config.json held at_grpo,
    so a --resume of the run refused them too."""
    from llm_marl.cli import build_parser
    from llm_marl.trainer import TrainConfig

    argv = ["train", "--algo", spelling, "--K", "3"]
    args = build_parser(argv).parse_args(argv)
    assert (args.algo_id, args.K) == ("at-grpo", 3)
    assert TrainConfig(run=RunConfig(algo=spelling)).to_dict()["run"]["algo"] == "at-grpo"


@pytest.mark.parametrize("env", ["plan_path_v2", "llm_marl/PlanPath-v2"])
def test_an_env_given_by_its_module_or_pettingzoo_id_is_the_env(tmp_path, env):
    """--env plan_path_v2 (the registry takes it, as eval and sft do) trained the 10x10 default instead of the quick
    configuration that eval then scored its adapters on, in a run directory named after the alias (its PettingZoo id
    made a folder llm_marl/ under --out-dir)."""
    from llm_marl.cli import main

    assert main(["train", "--env", env, "--model", "tiny-random", "--steps", "1", "--max-new-tokens", "4", "--lora-r", "4",
                 "--lora-alpha", "8", "--K", "2", "--out-dir", str(tmp_path), "--no-progress", "--report-to", "none"]) == 0
    [run] = tmp_path.iterdir()
    assert run.name.startswith("plan_path__at-grpo__0__")
    assert json.loads((run / "config.json").read_text())["resolved_env_args"] == QUICK_ENV_ARGS["plan_path"]


def test_bad_choice_is_rejected_by_the_parser(capsys):
    with pytest.raises(SystemExit):
        parser().parse_args(["--loss-agg", "sum"])
    assert "invalid choice" in capsys.readouterr().err


def test_metrics_jsonl_stays_json_with_a_nan_loss(tmp_path):
    """A skipped update's loss is NaN; Python would write `NaN`, which strict JSON readers (jq, browsers) refuse."""
    import json
    import math

    import numpy as np

    run = RunDir.create(tmp_path, "plan_path", "grpo", 0, name="r")
    run.log_metrics(1, {"loss/shared/total": math.nan, "loss/shared/grad_norm": np.float32("inf"), "reward/x": 0.5, "n": 3,
                        "note": "text"})

    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")

    line = (run.path / "metrics.jsonl").read_text().splitlines()[0]
    assert json.loads(line, parse_constant=refuse) == {"step": 1, "loss/shared/total": None, "loss/shared/grad_norm": None,
                                                       "reward/x": 0.5, "n": 3, "note": "text"}
    assert run.metrics()[0]["loss/shared/total"] is None


def test_a_steps_seeds_are_distinct_and_those_without_repeats_unchanged():
    """With --envs-per-step 1024, run seed 0 drew one 32-bit seed twice at step 119: a task id twice, which the rollout
    refuses ('task ids must be unique'), so the run stopped there with a traceback, and again at each resume."""
    import numpy as np

    from llm_marl.trainer import step_seeds

    words = [int(x) for x in np.random.SeedSequence([0, 119]).generate_state(1024, dtype=np.uint32)]
    assert len(set(words)) < 1024
    seeds = step_seeds(0, 119, 1024)
    assert len(set(seeds)) == len(seeds) == 1024 and seeds[:100] == words[:100]
    for step in (1, 2, 150):  # a run's seeds are those it drew before (a resumed run repeats its steps)
        assert step_seeds(0, step, 32) == [int(x) for x in np.random.SeedSequence([0, step]).generate_state(32, dtype=np.uint32)]


def test_a_damaged_metrics_line_is_named_by_its_line_in_the_file(tmp_path):
    """Blank lines (a hand edit) were not counted, so the error named an earlier line than the damaged one, and deleting
    the line it named lost a good step."""
    run = RunDir.create(tmp_path, "plan_path", "grpo", 0, name="r")
    (run.path / "metrics.jsonl").write_text('{"step": 1}\n\n\n{"step": 2, "reward/succ\n{"step": 3}\n')
    with pytest.raises(RunDirError, match=r"metrics\.jsonl:4 is damaged"):
        run.metrics()
