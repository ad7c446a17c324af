"""`--report-to` (issue 13, item 1): TensorBoard event files next to metrics.jsonl hold the same
numbers, and the run's config as hyperparameters; a tracker that is not installed is one line."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import sys

import pytest

from llm_marl.cli import main
from llm_marl.tracking import numeric
from tests.test_progress import ARGS


def test_tensorboard_event_files_match_metrics_jsonl(tmp_path, capsys):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    assert main(["train", *ARGS, "--steps", "2", "--out-dir", str(tmp_path), "--run-name", "tb"]) == 0
    run = tmp_path / "tb"
    assert list(run.glob("events.out.tfevents.*")), "no event file next to metrics.jsonl"
    events = EventAccumulator(str(run), size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    tags = set(events.Tags()["scalars"])
    checked = 0
    for record in metrics:
        for key, value in numeric(record).items():
            assert key in tags, key
            by_step = {e.step: e.value for e in events.Scalars(key)}
            assert by_step[record["step"]] == pytest.approx(value, rel=1e-6, abs=1e-6), key
            checked += 1
    assert checked > 20 and tags == set(numeric(metrics[0])) | set(numeric(metrics[1]))
    assert "reward/success_rate" in tags
    # The resolved config: as hyperparameters (TensorBoard's HPARAMS plugin) and as text.
    assert events.PluginTagToContent("hparams")
    config = json.loads((run / "config.json").read_text())
    text = events.Tensors("config/text_summary")[0].tensor_proto.string_val[0].decode()
    assert json.loads(text.strip("`\n")) == config


def test_a_resume_that_starts_over_purges_the_steps_it_redoes(tmp_path):
    """A run stopped before its first checkpoint resumes from step 1: its metrics.jsonl starts over, but TensorBoard
    kept the steps logged before (purge_step was only set for a resume after step 1), so it drew steps 1-5 twice."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from llm_marl.tracking import open_tracker

    for steps in (5, 2):  # the run, then its resume from step 1
        tracker = open_tracker("tensorboard", tmp_path, {"run": {"steps": 5}}, first_step=1)
        for step in range(1, steps + 1):
            tracker.log(step, {"reward/success_rate": step / 10})
        tracker.close()
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    assert [(e.step, round(e.value, 3)) for e in events.Scalars("reward/success_rate")] == [(1, 0.1), (2, 0.2)]


def test_report_to_none_writes_no_event_file(tmp_path, capsys):
    assert main(["train", *ARGS, "--steps", "1", "--report-to", "none", "--out-dir", str(tmp_path), "--run-name", "quiet"]) == 0
    assert (tmp_path / "quiet" / "metrics.jsonl").is_file() and not list((tmp_path / "quiet").glob("events.out.tfevents.*"))


@pytest.mark.parametrize("tracker", ["wandb", "trackio"])
def test_a_tracker_that_is_not_installed_is_one_line(tmp_path, capsys, tracker):
    if importlib.util.find_spec(tracker) is not None:
        pytest.skip(f"{tracker} is installed here: the missing-package message cannot be shown")
    assert main(["train", *ARGS, "--report-to", tracker, "--out-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"llm-marl: error: --report-to {tracker} needs the {tracker} package: pip install 'llm-marl[{tracker}]' (or --report-to none)"
    assert not list(tmp_path.iterdir())


class _FakeWandb:
    """Stands in for the `wandb` package: `init` raises `fails` when given, else returns a run that records."""

    def __init__(self, fails: Exception | None = None):
        self.fails, self.logged, self.finished, self.init_kwargs = fails, [], False, {}
        # Asked for by accelerate when it is first imported (find_spec raises on a module without one); it then finds
        # no installed wandb, as here.
        self.__spec__ = importlib.machinery.ModuleSpec("wandb", None)

    def init(self, **kwargs):
        if self.fails is not None:
            raise self.fails
        self.init_kwargs = kwargs
        return self

    def log(self, metrics, step):
        self.logged.append((step, metrics))

    def finish(self):
        self.finished = True


class UsageError(Exception):  # the name wandb's own error has
    pass


def test_wandb_logs_what_metrics_jsonl_holds(tmp_path, capsys, monkeypatch):
    fake = _FakeWandb()
    monkeypatch.setitem(sys.modules, "wandb", fake)
    assert main(["train", *ARGS, "--steps", "2", "--report-to", "wandb", "--out-dir", str(tmp_path), "--run-name", "wb"]) == 0
    metrics = [json.loads(line) for line in (tmp_path / "wb" / "metrics.jsonl").read_text().splitlines()]
    assert fake.logged == [(m["step"], numeric(m)) for m in metrics] and fake.finished
    assert fake.init_kwargs["project"] == "llm-marl" and fake.init_kwargs["name"] == "wb"
    assert fake.init_kwargs["config"] == json.loads((tmp_path / "wb" / "config.json").read_text())


def test_a_new_run_of_the_same_name_is_another_wandb_run_and_a_resume_the_same(tmp_path, capsys, monkeypatch):
    """The wandb id was the run's name, so a second run of that name (another --out-dir, or a run made again after the
    first was deleted) resumed the first one's wandb run (resume="allow"), which drops the steps it already has."""
    ids = []
    for root, extra in (("a", ["--steps", "1"]), ("b", ["--steps", "1"]), ("a", ["--resume", str(tmp_path / "a" / "wb"), "--steps", "2"])):
        fake = _FakeWandb()
        monkeypatch.setitem(sys.modules, "wandb", fake)
        run = ["--out-dir", str(tmp_path / root), "--run-name", "wb"] if "--resume" not in extra else []
        assert main(["train", *ARGS, "--report-to", "wandb", *run, *extra]) == 0
        ids.append(fake.init_kwargs["id"])
    first, other, resumed = ids
    assert first != other and resumed == first and first.startswith("wb-")


def test_a_new_run_of_the_same_name_is_another_trackio_run_and_a_resume_the_same(tmp_path, monkeypatch):
    """trackio knows a run by its name, and resume="allow" appends to a run of that name: a second run directory named
    as the first (another --out-dir, or made again after the first was deleted) logged into the first one's curves."""
    from types import SimpleNamespace

    from llm_marl.tracking import open_tracker

    names = []
    fake = SimpleNamespace(init=lambda **kwargs: names.append(kwargs["name"]), log=lambda metrics, step: None,
                           finish=lambda: None, __spec__=importlib.machinery.ModuleSpec("trackio", None))
    monkeypatch.setitem(sys.modules, "trackio", fake)
    for root in ("a", "b", "a"):  # the run, another of its name, then a --resume of the first
        run_dir = tmp_path / root / "tr"
        run_dir.mkdir(parents=True, exist_ok=True)
        open_tracker("trackio", run_dir, {}).close()
        (run_dir / "metrics.jsonl").write_text('{"step": 1}\n')
    first, other, resumed = names
    assert first != other and resumed == first and first.startswith("tr-")
    # A run that logged steps before names were kept goes on with the trackio run of its name.
    old = tmp_path / "old" / "tr"
    old.mkdir(parents=True)
    (old / "metrics.jsonl").write_text('{"step": 1}\n')
    open_tracker("trackio", old, {}).close()
    assert names[-1] == "tr"


def test_wandb_that_cannot_start_its_run_is_one_line(tmp_path, capsys, monkeypatch):
    """As with no API key (or no network): one line naming the fixes, and no run directory left behind."""
    monkeypatch.setitem(sys.modules, "wandb", _FakeWandb(UsageError("No API key configured. Use `wandb login` to log in.")))
    assert main(["train", *ARGS, "--report-to", "wandb", "--out-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("llm-marl: error: --report-to wandb could not start its run (UsageError: No API key configured.")
    assert "WANDB_MODE=offline" in err and "--report-to tensorboard" in err
    assert not any(tmp_path.iterdir())
