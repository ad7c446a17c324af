"""Progress a person can follow (issue 13, item 2): progress inside a step, Ctrl-C that says how to
resume, and no empty run directory after a failed start."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llm_marl.engines.base import SamplingParams
from llm_marl.engines.scripted import ScriptedEngine
from llm_marl.rollout import make_tasks, rollout, tree

QUICK = {"height": 3, "width": 3, "wall_density": 0.1, "min_path_length": 2, "max_path_length": 3, "max_turns": 1}
ARGS = ["--algo", "at-grpo", "--env", "plan_path", *(f"--env-arg={k}={v}" for k, v in QUICK.items()), "--model", "tiny-random",
        "--K", "2", "--max-new-tokens", "6", "--lora-r", "4", "--lora-alpha", "8", "--no-progress"]


def test_the_rollout_reports_every_wave():
    seen = []
    out = rollout(make_tasks("plan_path", [0, 1], env_kwargs=QUICK), tree(2), ScriptedEngine(lambda r, k: "#### [U]"),
                  sampling=SamplingParams(seed=0), on_wave=seen.append)
    assert [c["waves"] for c in seen] == [*range(1, out.stats["waves"] + 1), out.stats["waves"]]
    assert seen[-1] == {"waves": out.stats["waves"], "completions": out.stats["completions"], "episodes": 2, "live": 0}
    assert [c["episodes"] for c in seen] == sorted(c["episodes"] for c in seen)


def test_a_failed_start_leaves_no_run_directory(tmp_path):
    from llm_marl.config import ModelConfig, RunConfig
    from llm_marl.trainer import TrainConfig, train

    def broken_engine(policy):
        raise RuntimeError("the engine could not start")

    config = TrainConfig(model=ModelConfig(model="tiny-random", lora_r=4, lora_alpha=8),
                         run=RunConfig(env="plan_path", env_args=QUICK, out_dir=str(tmp_path), run_name="r", progress=False))
    with pytest.raises(RuntimeError, match="could not start"):
        train(config, log=lambda *_: None, engine_factory=broken_engine)
    assert not (tmp_path / "r").exists()


def signal_once_written(proc: subprocess.Popen, path: Path, sig: int) -> str:
    """Send `sig` to `proc` once `path` exists; its stderr when it has ended."""
    deadline = time.time() + 300
    while not path.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(sig)
    return proc.communicate(timeout=120)[1]


@pytest.mark.slow
@pytest.mark.parametrize("sig, code, said, extra", [
    (signal.SIGINT, 130, "interrupted", []),
    # A batch scheduler's preemption or time limit; with a cluster, after ray.init has installed its own handler.
    (signal.SIGTERM, 143, "terminated (SIGTERM)", []),
    (signal.SIGTERM, 143, "terminated (SIGTERM)", ["--rollout-workers", "1", "--cpus-per-actor", "0.5"]),
], ids=["ctrl-c", "sigterm", "sigterm-ray"])
def test_ctrl_c_or_sigterm_says_where_the_checkpoint_is_and_how_to_resume(tmp_path, sig, code, said, extra):
    exe = str(Path(sys.executable).with_name("llm-marl"))
    # A shell that starts a job in the background (`make test &`) makes it ignore SIGINT, and Python keeps
    # an ignored SIGINT ignored; a terminal's Ctrl-C reaches a process that has the default handler.
    proc = subprocess.Popen([exe, "train", *ARGS, *extra, "--steps", "50", "--out-dir", str(tmp_path), "--run-name", "r"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    err = signal_once_written(proc, tmp_path / "r" / "checkpoints" / "LATEST", sig)
    assert proc.returncode == code, err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"llm-marl: {said} during step") and "checkpoints/step_" in last
    assert last.endswith(f"continue with: llm-marl train --resume {shlex.quote(str(tmp_path / 'r'))}") and "Traceback" not in err


@pytest.mark.slow
@pytest.mark.parametrize("sig, code, said", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated (SIGTERM)")],
                         ids=["ctrl-c", "sigterm"])
def test_a_stopped_sft_says_so_and_leaves_no_run_directory(tmp_path, sig, code, said):
    """SFT has no checkpoints to resume from, so its half-trained run directory is removed."""
    exe = str(Path(sys.executable).with_name("llm-marl"))
    proc = subprocess.Popen([exe, "sft", "--env", "plan_path", *(f"--env-arg={k}={v}" for k, v in QUICK.items()), "--model",
                             "tiny-random", "--demos", "4", "--heldout-demos", "0", "--epochs", "500", "--out-dir", str(tmp_path),
                             "--run-name", "s"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    err = signal_once_written(proc, tmp_path / "s" / "metrics.jsonl", sig)
    assert proc.returncode == code, err
    assert err.strip().splitlines()[-2:] == [f"sft stopped: {tmp_path / 's'} was removed (an SFT run cannot be resumed: start it again)",
                                              f"llm-marl: {said}"]
    assert not (tmp_path / "s").exists() and "Traceback" not in err


def test_a_stopped_run_names_the_step_in_progress(tmp_path):
    """Stopped during step 2's rollout, after step 1's checkpoint: the message says step 2 (it once said 3)."""
    from llm_marl.config import ModelConfig, RunConfig
    from llm_marl.trainer import TrainConfig, TrainingInterrupted, train

    latest = tmp_path / "r" / "checkpoints" / "LATEST"

    def reply(request, k):
        if latest.exists():
            raise KeyboardInterrupt
        return "#### [U]"

    config = TrainConfig(model=ModelConfig(model="tiny-random", lora_r=4, lora_alpha=8),
                         run=RunConfig(env="plan_path", env_args=QUICK, steps=3, out_dir=str(tmp_path), run_name="r", progress=False))
    with pytest.raises(TrainingInterrupted) as stopped:
        train(config, log=lambda *_: None, engine_factory=lambda policy: ScriptedEngine(reply))
    assert str(stopped.value) == (f"interrupted during step 2; the last checkpoint is {tmp_path / 'r' / 'checkpoints' / 'step_000001'} "
                                  f"(step 1); continue with: llm-marl train --resume {tmp_path / 'r'}")
    assert stopped.value.exit_code == 130


def test_a_run_stopped_after_its_last_step_says_where_it_was(tmp_path):
    """Stopped in the held-out evaluation after training, the message said "during step 2", the last step, which had
    ended and been checkpointed (and a resume stopped there said "during step 3" of 2)."""
    from llm_marl.config import ModelConfig, RunConfig
    from llm_marl.trainer import TrainConfig, TrainingInterrupted, train

    latest = tmp_path / "r" / "checkpoints" / "LATEST"

    def reply(request, k):
        if latest.exists() and latest.read_text().strip() == "step_000002":
            raise KeyboardInterrupt  # in the evaluation after the last step
        return "#### [U]"

    config = TrainConfig(model=ModelConfig(model="tiny-random", lora_r=4, lora_alpha=8),
                         run=RunConfig(env="plan_path", env_args=QUICK, steps=2, eval_episodes=1, out_dir=str(tmp_path),
                                       run_name="r", progress=False))
    with pytest.raises(TrainingInterrupted) as stopped:
        train(config, log=lambda *_: None, engine_factory=lambda policy: ScriptedEngine(reply))
    assert str(stopped.value) == (f"interrupted during the held-out evaluation after training; the last checkpoint is "
                                  f"{tmp_path / 'r' / 'checkpoints' / 'step_000002'} (step 2); continue with: llm-marl train "
                                  f"--resume {tmp_path / 'r'}")


def test_a_run_stopped_before_its_first_step_ended_is_removed_as_it_says(tmp_path):
    """The message said the run directory was removed, but Ctrl-C and SIGTERM skipped the removal a failed start gets."""
    from llm_marl.config import ModelConfig, RunConfig
    from llm_marl.interrupts import Terminated
    from llm_marl.trainer import TrainConfig, TrainingInterrupted, train

    def reply(request, k):
        raise Terminated  # SIGTERM during step 1's rollout

    config = TrainConfig(model=ModelConfig(model="tiny-random", lora_r=4, lora_alpha=8),
                         run=RunConfig(env="plan_path", env_args=QUICK, steps=2, out_dir=str(tmp_path), run_name="r", progress=False))
    with pytest.raises(TrainingInterrupted) as stopped:
        train(config, log=lambda *_: None, engine_factory=lambda policy: ScriptedEngine(reply))
    assert str(stopped.value) == f"terminated (SIGTERM) during step 1; nothing was trained yet, so {tmp_path / 'r'} was removed"
    assert stopped.value.exit_code == 143 and not (tmp_path / "r").exists()


@pytest.mark.parametrize("where", ["claim", "record"])
def test_a_stop_while_the_run_directory_is_made_removes_it(tmp_path, monkeypatch, where):
    """Ctrl-C between the run directory's creation and the training loop once left the folder behind (without
    config.json when it came inside RunDir.create), so the same --run-name then said it exists. The signal is sent
    from inside the window: in RunDir.create once the folder is claimed, or as versions.json is written."""
    from llm_marl.config import ModelConfig, RunConfig
    from llm_marl.runs import RunDir
    from llm_marl.trainer import TrainConfig, TrainingInterrupted, train

    if where == "claim":
        claim = RunDir._claim
        monkeypatch.setattr(RunDir, "_claim", lambda self: (claim(self), signal.raise_signal(signal.SIGINT))[0])
    else:
        monkeypatch.setattr("llm_marl.provenance.record", lambda *args, **kwargs: signal.raise_signal(signal.SIGINT))
    config = TrainConfig(model=ModelConfig(model="tiny-random", lora_r=4, lora_alpha=8),
                         run=RunConfig(env="plan_path", env_args=QUICK, steps=1, out_dir=str(tmp_path), run_name="r", progress=False))
    # KeyboardInterrupt too: without the fix it escapes train, and pytest would take it for the user's Ctrl-C.
    with pytest.raises((TrainingInterrupted, KeyboardInterrupt)) as stopped:
        train(config, log=lambda *_: None, engine_factory=lambda policy: ScriptedEngine(lambda r, k: "#### [U]"))
    assert not (tmp_path / "r").exists()
    assert type(stopped.value) is TrainingInterrupted
    assert str(stopped.value) == f"interrupted during step 1; nothing was trained yet, so {tmp_path / 'r'} was removed"
