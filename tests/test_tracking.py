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
    """Stands in for the `wandb` package: `init` raises `fails` when given, else returns a run that records. `server`
    keeps each run id's history across fakes as wandb's server does: a resumed run's `step` (that of its next log) is
    the one after its last, a log at or below that is dropped, and `resume_from="<id>?_step=k"` (a rewind; exclusive
    with `resume`, as in wandb) keeps the steps up to k, or raises `rewind_fails` when given."""

    def __init__(self, fails: Exception | None = None, server: dict | None = None, rewind_fails: Exception | None = None):
        self.fails, self.logged, self.finished, self.init_kwargs = fails, [], False, {}
        self.server, self.rewind_fails, self.inits = {} if server is None else server, rewind_fails, []
        # Asked for by accelerate when it is first imported (find_spec raises on a module without one); it then finds
        # no installed wandb, as here.
        self.__spec__ = importlib.machinery.ModuleSpec("wandb", None)

    def init(self, **kwargs):
        if self.fails is not None:
            raise self.fails
        if "resume" in kwargs and "resume_from" in kwargs:
            raise ValueError("`fork_from`, `resume`, or `resume_from` are mutually exclusive.")
        self.inits.append(kwargs)
        history = self.server.setdefault(kwargs["id"], [])
        self.step = history[-1][0] + 1 if history else 0
        if "resume_from" in kwargs:
            if self.rewind_fails is not None:
                raise self.rewind_fails
            run_id, _, step = kwargs["resume_from"].partition("?_step=")
            assert run_id == kwargs["id"]
            history[:] = [(s, m) for s, m in history if s <= int(step)]
            self.step = int(step) + 1
        self.init_kwargs = kwargs
        return self

    def log(self, metrics, step):
        if step < self.step:  # wandb: "Tried to log to step {step} that is less than the current step"
            return
        self.server[self.init_kwargs["id"]].append((step, metrics))
        self.logged.append((step, metrics))
        self.step = step + 1

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


def _wandb_attempts(tmp_path, monkeypatch, attempts, **fake):
    """Each (first step, last step) in turn logged by a tracker of one run directory into one wandb server: the
    fakes (one per process) and the server's history."""
    from llm_marl.tracking import open_tracker

    server, fakes = {}, []
    for attempt, (first, last) in enumerate(attempts):
        fakes.append(_FakeWandb(server=server, **fake))
        monkeypatch.setitem(sys.modules, "wandb", fakes[-1])
        tracker = open_tracker("wandb", tmp_path, {}, first_step=first)
        for step in range(first, last + 1):
            tracker.log(step, {"reward/success_rate": attempt + step / 10})
        tracker.close()
    [history] = server.values()
    return fakes, [(step, m["reward/success_rate"]) for step, m in history]


def test_a_resume_from_an_earlier_checkpoint_rewinds_the_wandb_run(tmp_path, monkeypatch):
    """wandb drops a log at a step it has: a run resumed from its checkpoint at step 2 after logging steps 1-5 lost the
    redone steps 3-5 in wandb (TensorBoard purged and redrew them)."""
    fakes, history = _wandb_attempts(tmp_path, monkeypatch, [(1, 5), (3, 6)])
    assert history == [(1, 0.1), (2, 0.2), (3, 1.3), (4, 1.4), (5, 1.5), (6, 1.6)]
    run_id = fakes[0].inits[0]["id"]
    assert [{k: v for k, v in i.items() if k.startswith("resume")} for i in fakes[1].inits] == [
        {"resume": "allow"}, {"resume_from": f"{run_id}?_step=2"}]
    assert fakes[1].inits[1]["id"] == run_id and fakes[1].inits[1]["name"] == tmp_path.name
    # A resume without a checkpoint starts over (rewound to before step 1); one that redoes nothing is a plain resume.
    fakes, history = _wandb_attempts(tmp_path / "b", monkeypatch, [(1, 3), (1, 2), (3, 4)])
    assert history == [(1, 1.1), (2, 1.2), (3, 2.3), (4, 2.4)]
    assert fakes[1].inits[1]["resume_from"].endswith("?_step=0") and len(fakes[2].inits) == 1


def test_a_wandb_run_that_cannot_rewind_warns_which_steps_it_drops(tmp_path, monkeypatch):
    """Rewinding is a W&B preview (an account without it, or wandb older than 0.17.1): the run resumes as it did, and
    a warning names the steps wandb drops instead of losing them in silence."""
    with pytest.warns(UserWarning) as caught:
        fakes, history = _wandb_attempts(tmp_path, monkeypatch, [(1, 4), (3, 5)],
                                         rewind_fails=UsageError("rewind is not enabled for this entity\nmore"))
    run_id = fakes[0].inits[0]["id"]
    assert [str(w.message) for w in caught] == [
        f"wandb run {run_id} has steps up to 4 and refused to rewind to step 2 (UsageError: rewind is not enabled for this "
        "entity), so it drops the redone steps 3..4 (metrics.jsonl keeps them): ask W&B support for access to rewinding "
        "runs, or use --report-to tensorboard"]
    assert history == [(1, 0.1), (2, 0.2), (3, 0.3), (4, 0.4), (5, 1.5)]
    assert fakes[1].inits[-1]["resume"] == "allow"


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
