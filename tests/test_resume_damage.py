"""`--resume` on a damaged run directory (issue 11, findings 13-14): it resumes from the newest checkpoint
that loads, loses and repeats no step, deletes nothing it did not write, and ends in one line naming the
fix when it cannot go on. Checkpoints load with `weights_only=True`."""

from __future__ import annotations

import errno
import json
import os
import pickle
import shutil
from pathlib import Path

import pytest

from llm_marl.cli import main

QUICK = {"height": 3, "width": 3, "wall_density": 0.1, "min_path_length": 2, "max_path_length": 3, "max_turns": 1}
ARGS = ["--algo", "at-grpo", "--env", "plan_path", *(f"--env-arg={k}={v}" for k, v in QUICK.items()), "--model", "tiny-random",
        "--K", "2", "--max-new-tokens", "6", "--lora-r", "4", "--lora-alpha", "8", "--no-progress"]


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A 3-step run: checkpoints step_2 and step_3 (the two newest are kept)."""
    out = tmp_path_factory.mktemp("runs")
    assert main(["train", *ARGS, "--steps", "3", "--out-dir", str(out), "--run-name", "base"]) == 0
    return out / "base"


@pytest.fixture
def run(finished, tmp_path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(finished, copy)
    return copy


def resume(run: Path, capsys, steps: int = 4) -> tuple[int, str]:
    code = main(["train", "--resume", str(run), "--steps", str(steps), "--no-progress"])
    return code, capsys.readouterr().err


def steps_logged(run: Path) -> list[int]:
    return [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]


def superseded(run: Path) -> list[int]:
    return sorted(json.loads(line)["step"] for path in (run / "superseded").glob("*/metrics.jsonl")
                  for line in path.read_text().splitlines() if line.strip().endswith("}"))


@pytest.mark.parametrize("damage", ["garbled", "missing"])
def test_latest_is_only_a_hint(run, capsys, damage):
    marker = run / "checkpoints" / "LATEST"
    marker.write_bytes(b"step_\x00\xff") if damage == "garbled" else marker.unlink()
    code, err = resume(run, capsys)
    assert code == 0 and "resuming from the newest checkpoint that loads, step_000003" in err
    assert steps_logged(run) == [1, 2, 3, 4] and not (run / "superseded").exists()


@pytest.mark.parametrize("damage", ["deleted", "trainer_state", "adapter_weights", "policy_set"])
def test_a_damaged_newest_checkpoint_falls_back_to_the_one_before(run, capsys, damage):
    newest = run / "checkpoints" / "step_000003"
    if damage == "deleted":
        shutil.rmtree(newest)
    elif damage == "trainer_state":
        (newest / "trainer_state.pt").write_bytes((newest / "trainer_state.pt").read_bytes()[:100])
    elif damage == "adapter_weights":
        weights = newest / "adapters" / "shared" / "adapter_model.safetensors"
        weights.write_bytes(weights.read_bytes()[:-500])
    else:
        (newest / "adapters" / "policy_set.json").write_text('{"adapters": ["sha')
    code, err = resume(run, capsys)
    assert code == 0, err
    if damage != "deleted":
        assert "checkpoint step_000003 cannot be loaded" in err
    assert "resuming" in err and "after step 2" in err
    assert steps_logged(run) == [1, 2, 3, 4]  # step 3 redone once, nothing lost or repeated
    assert superseded(run) == [1, 2, 3]  # the old metrics file is kept, not deleted
    assert len(list((run / "superseded").glob("*/step_000003.jsonl"))) == 1  # and so are step 3's trajectories


def test_a_torn_last_metrics_line_is_not_a_step(run, capsys):
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"step": 4, "reward/succ')  # killed while writing step 4's line
    code, err = resume(run, capsys)
    assert code == 0, err
    assert steps_logged(run) == [1, 2, 3, 4]


def test_no_checkpoint_that_loads_is_one_line_naming_the_fix(run, capsys):
    for checkpoint in (run / "checkpoints").glob("step_*"):
        (checkpoint / "trainer_state.pt").write_bytes(b"junk")
    code, err = resume(run, capsys)
    last = err.strip().splitlines()[-1]
    assert code == 2 and last.startswith("llm-marl: error: no checkpoint of") and "move the damaged checkpoints" in last
    assert "Traceback" not in err and steps_logged(run) == [1, 2, 3]  # nothing was deleted


def test_a_garbled_config_is_one_line(run, capsys):
    (run / "config.json").write_text('{"run": {"algo": "at-gr')
    code, err = resume(run, capsys)
    assert code == 2 and "config.json is damaged" in err and "Traceback" not in err


class _Exploit:
    def __reduce__(self):
        return (os.system, ("touch pwned_by_checkpoint",))


def test_a_crafted_checkpoint_cannot_run_code(run, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    (run / "checkpoints" / "step_000003" / "trainer_state.pt").write_bytes(pickle.dumps({"optimizers": _Exploit()}))
    code, err = resume(run, capsys)
    assert not (tmp_path / "pwned_by_checkpoint").exists()
    assert code == 0 and "checkpoint step_000003 cannot be loaded" in err and "after step 2" in err


def test_bad_policy_and_unwritable_out_dir_are_one_line_and_leave_nothing(tmp_path, capsys):
    assert main(["train", *ARGS, "--policy", "tool=a,wizard=b", "--out-dir", str(tmp_path), "--run-name", "p"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--policy" in err and "wizard" in err and not (tmp_path / "p").exists()
    blocker = tmp_path / "a_file"  # nobody, root included, can create a directory under a regular file
    blocker.write_text("")
    assert main(["train", *ARGS, "--out-dir", str(blocker / "runs")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pass a writable --out-dir" in err


def test_a_resume_of_a_read_only_run_is_one_line_before_the_model_loads(run, capsys, monkeypatch):
    """It once ended in a PermissionError traceback at its first write (the lock file, or config.json's after the model
    loaded). Root writes into a read-only folder, so the refusal is simulated: every write under the run fails."""
    import builtins

    from llm_marl.policies import PolicySet

    real_open = builtins.open

    def read_only(file, mode="r", *args, **kwargs):
        if set(mode) & set("wax+") and isinstance(file, (str, os.PathLike)) and Path(file).is_relative_to(run):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(file))
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", read_only)
    monkeypatch.setattr(PolicySet, "from_pretrained", classmethod(lambda *a, **k: pytest.fail("a model was loaded")))
    code, err = resume(run, capsys)
    assert code == 2 and err == (f"llm-marl: error: cannot write in {run} (Permission denied): make it writable, or copy "
                                 "the run directory to a writable folder and resume the copy\n")
    assert steps_logged(run) == [1, 2, 3] and not list(run.glob(".write_check*"))


def test_eval_with_a_damaged_policy_set_is_one_line(finished, tmp_path, capsys):
    adapters = tmp_path / "adapters"
    shutil.copytree(finished / "adapters", adapters)
    (adapters / "policy_set.json").write_text("{")
    assert main(["eval", "--env", "plan_path", "--model", "tiny-random", "--adapters", str(adapters), "--n", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("llm-marl: error:") and "policy_set.json is damaged" in err[-1]
    assert not any("Traceback" in line for line in err)


# ---------------------------------------------------------------------------- a full disk
def test_no_room_for_a_checkpoint_is_one_line_before_it_is_written(tmp_path, capsys, monkeypatch):
    """Checked before a checkpoint starts (a partial one would take the space left): the size of the last one, or
    for the first one three times the adapters' bytes (the adapters and AdamW's two moments)."""
    monkeypatch.setattr("llm_marl.runs.free_bytes", lambda path: 1000)
    assert main(["train", *ARGS, "--steps", "2", "--out-dir", str(tmp_path), "--run-name", "r"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("llm-marl: error: no space for the checkpoint of step 1: about ") and "MiB needed, 0 MiB free" in err
    assert err.endswith(f"; free some space; failed in step 1; no checkpoint was written yet; continue with: llm-marl train "
                        f"--resume {tmp_path / 'r'}")
    assert not list((tmp_path / "r" / "checkpoints").iterdir())
    monkeypatch.undo()  # space freed: the run goes on from step 1 (its logged step is redone)
    code, _ = resume(tmp_path / "r", capsys, steps=2)
    assert code == 0 and steps_logged(tmp_path / "r") == [1, 2]


def test_a_write_that_fails_on_a_full_disk_is_one_line_and_resumable(finished, tmp_path, capsys, monkeypatch):
    """torch.save reports a full disk as a RuntimeError of its own ("unexpected pos"): the file system's free space
    tells. The unfinished checkpoint is removed; the finished ones stay and the run resumes from the newest."""
    import torch

    run = tmp_path / "run"
    shutil.copytree(finished, run)
    free = {"bytes": 10 << 30}
    real_save = torch.save

    def save(obj, path, *args, **kwargs):
        free["bytes"] = 100  # the disk filled up while the checkpoint was written
        real_save(obj, path, *args, **kwargs)
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534")

    monkeypatch.setattr("llm_marl.runs.free_bytes", lambda path: free["bytes"])
    monkeypatch.setattr(torch, "save", save)
    code, err = resume(run, capsys, steps=4)
    assert code == 2
    assert err.strip().splitlines()[-1] == (
        f"llm-marl: error: no space left where {run} is (RuntimeError: [enforce fail at inline_container.cc:672] . unexpected "
        f"pos 576 vs 534); free some space; failed in step 4; the last checkpoint is {run / 'checkpoints' / 'step_000003'} "
        f"(step 3); continue with: llm-marl train --resume {run}")
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["LATEST", "step_000002", "step_000003"]
    monkeypatch.undo()
    code, _ = resume(run, capsys, steps=4)
    assert code == 0 and steps_logged(run) == [1, 2, 3, 4]


@pytest.mark.parametrize("code, fix", [(errno.EACCES, ": make {run} writable"), (errno.EIO, "")])
def test_a_write_that_fails_otherwise_is_one_line_and_resumable(finished, tmp_path, capsys, monkeypatch, code, fix):
    """A checkpoint that could not be moved into place (a folder made read-only, a file system's I/O error) ended in a
    traceback: it is one line naming the file and the error now, as a full disk is, and the finished checkpoints stay."""
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    real_replace = os.replace

    def replace(src, dst, *args, **kwargs):
        if Path(src).name.startswith(".tmp_step_"):
            raise OSError(code, os.strerror(code), str(src), None, str(dst))
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    exit_code, err = resume(run, capsys, steps=4)
    assert exit_code == 2
    assert err.strip().splitlines()[-1] == (
        f"llm-marl: error: cannot write {run / 'checkpoints' / '.tmp_step_000004'} ({os.strerror(code)}){fix.format(run=run)}; "
        f"failed in step 4; the last checkpoint is {run / 'checkpoints' / 'step_000003'} (step 3); continue with: "
        f"llm-marl train --resume {run}")
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["LATEST", "step_000002", "step_000003"]
    monkeypatch.undo()
    exit_code, _ = resume(run, capsys, steps=4)
    assert exit_code == 0 and steps_logged(run) == [1, 2, 3, 4]


@pytest.mark.parametrize("target", ["summary", "curve"])
def test_a_write_that_fails_after_the_last_step_is_one_line(finished, tmp_path, capsys, monkeypatch, target):
    """summary.json and the learning curve are written after training's error handler: a folder made read-only or a
    full disk there ended in a traceback. It is one line naming the file, and the resume that writes them again."""
    from matplotlib.figure import Figure

    run = tmp_path / "run"
    shutil.copytree(finished, run)
    (run / "summary.json").unlink()
    if target == "summary":
        real_write_text = Path.write_text

        def write_text(self, *args, **kwargs):
            if self.name == "summary.json":
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(self))
            return real_write_text(self, *args, **kwargs)

        monkeypatch.setattr(Path, "write_text", write_text)
        first = f"cannot write {run / 'summary.json'} (Permission denied): make {run} writable"
    else:
        def savefig(self, path, *args, **kwargs):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

        monkeypatch.setattr(Figure, "savefig", savefig)
        first = (f"no space left where {run} is (OSError: [Errno 28] No space left on device: "
                 f"'{run / 'learning_curve.png'}'); free some space")
    exit_code, err = resume(run, capsys, steps=3)
    assert exit_code == 2 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        f"llm-marl: error: {first}; failed after the last step (3), while writing the summary and learning curve; the "
        f"adapters in {run / 'adapters'} and the checkpoints are intact; write them again with: llm-marl train --resume {run}")
    monkeypatch.undo()
    exit_code, _ = resume(run, capsys, steps=3)
    assert exit_code == 0 and steps_logged(run) == [1, 2, 3]
    assert json.loads((run / "summary.json").read_text())["steps"] == 3 and (run / "learning_curve.png").exists()


def test_another_failure_with_room_left_is_not_called_a_full_disk(finished, tmp_path, capsys, monkeypatch):
    import torch

    run = tmp_path / "run"
    shutil.copytree(finished, run)

    def save(obj, path, *args, **kwargs):
        raise RuntimeError("something else")

    monkeypatch.setattr(torch, "save", save)
    with pytest.raises(RuntimeError, match="something else"):
        resume(run, capsys, steps=4)
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["LATEST", "step_000002", "step_000003"]


def test_a_run_stopped_while_writing_its_final_adapters_keeps_the_earlier_ones(finished, tmp_path, capsys, monkeypatch):
    """adapters/ was written in place: a stop in the middle left the new weights half written beside the earlier
    policy_set.json, a folder that looked complete. It is written beside it and renamed into place now."""
    import safetensors.torch
    from safetensors.torch import load_file

    run = tmp_path / "run"
    shutil.copytree(finished, run)
    before = {p.relative_to(run): p.read_bytes() for p in (run / "adapters").rglob("*") if p.is_file()}
    real_save_file = safetensors.torch.save_file

    def save_file(tensors, path, *args, **kwargs):
        if "checkpoints" not in Path(path).parts:  # the final adapters: stopped half-way through their weights
            Path(path).write_bytes(b"torn")
            raise KeyboardInterrupt
        return real_save_file(tensors, path, *args, **kwargs)

    monkeypatch.setattr(safetensors.torch, "save_file", save_file)
    exit_code, err = resume(run, capsys, steps=4)
    assert exit_code == 130 and "interrupted during saving the final adapters" in err
    assert {p.relative_to(run): p.read_bytes() for p in (run / "adapters").rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in run.iterdir() if p.name.startswith(".tmp")) == []
    monkeypatch.undo()
    exit_code, _ = resume(run, capsys, steps=4)  # step 4's checkpoint was written: the resume only saves the adapters
    assert exit_code == 0 and steps_logged(run) == [1, 2, 3, 4]
    load_file(str(run / "adapters" / "shared" / "adapter_model.safetensors"))


# ---------------------------------------------------------------------------- a resume that changes the run
@pytest.mark.parametrize("flags, named", [
    (["--policy", "per-role"], "drop --policy per-role (the run's is shared)"),
    (["--lora-r", "8"], "drop --lora-r 8 (the run's is 4)"),
    (["--model", "smollm2-135m"], "drop --model smollm2-135m (the run's is tiny-random)"),
    (["--env", "sokoban"], "drop --env sokoban (the run's is plan_path)"),
    (["--algo", "grpo"], "drop --algo grpo (the run's is at-grpo)"),
    (["--run-name", "other"], "drop --run-name other (the run's is base)"),
])
def test_a_resume_that_changes_what_the_checkpoints_hold_is_refused_in_one_line(run, capsys, monkeypatch, flags, named):
    """These once ended in tracebacks (a LoRA or model shape mismatch, an AttributeError) or, for --policy, in advice
    to move the 'damaged' checkpoints away."""
    from llm_marl.policies import PolicySet

    monkeypatch.setattr(PolicySet, "from_pretrained", classmethod(lambda *a, **k: pytest.fail("a model was loaded")))
    before = sorted(p.name for p in (run / "checkpoints").iterdir())
    assert main(["train", "--resume", str(run), "--steps", "4", *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and named in err
    assert err.endswith(f"start a new run from its weights with --init-adapters {run / 'checkpoints' / 'step_N' / 'adapters'}")
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == before and steps_logged(run) == [1, 2, 3]


def test_a_resume_whose_roles_differ_from_the_checkpoints_stops_at_the_newest(tmp_path, capsys):
    """Another --env-arg mode gives other roles, so per-role adapters differ from the checkpoint's: not damage, so the
    older checkpoint is not tried and nothing is set aside."""
    assert main(["train", *ARGS, "--policy", "per-role", "--steps", "1", "--out-dir", str(tmp_path), "--run-name", "r"]) == 0
    capsys.readouterr()
    assert main(["train", "--resume", str(tmp_path / "r"), "--steps", "2", "--env-arg", "mode=planner", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (f"llm-marl: error: {tmp_path / 'r' / 'checkpoints' / 'step_000001'} holds adapters ['planner', 'tool'], "
                       "this run trains ['planner']: resume with the run's own --policy and --env-arg mode")
    assert not any("trying an older one" in line for line in err) and steps_logged(tmp_path / "r") == [1]


def test_an_sft_run_is_not_resumed_but_named_for_init_adapters(tmp_path, capsys):
    """--resume of an sft run once trained RL from fresh adapters into it, replacing the SFT adapters with them."""
    sft = tmp_path / "sft"
    (sft / "adapters").mkdir(parents=True)
    (sft / "config.json").write_text(json.dumps({"sft": {"env": "plan_path"}, "model": {"model": "tiny-random"}}))
    assert main(["train", "--resume", str(sft), "--steps", "1", "--max-new-tokens", "4", "--no-progress", "--report-to", "none"]) == 2
    assert capsys.readouterr().err == (f"llm-marl: error: {sft} is an `llm-marl sft` run, which cannot be resumed: start a new run "
                                       f"from its adapters with --init-adapters {sft}\n")
    assert sorted(p.name for p in sft.iterdir()) == ["adapters", "config.json"]
