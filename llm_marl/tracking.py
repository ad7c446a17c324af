"""Experiment tracking: `--report-to tensorboard|wandb|trackio|none` (TRL's convention).

    tracker = open_tracker("tensorboard", run_dir, config.to_dict(), first_step=1)
    tracker.log(step, metrics)          # the same numbers as metrics.jsonl
    tracker.close()

- `tensorboard` (the default) writes event files into the run directory, next to `metrics.jsonl`
  (`tensorboard --logdir runs/`): every numeric metric as a scalar under its own name (`reward/...`,
  `loss/...`), and the run's resolved config as hyperparameters (the HPARAMS tab) and as text.
  A resumed run purges the steps it redoes.
- `wandb` and `trackio` log the same metrics and the config to the project `llm-marl`; they are
  optional extras (`pip install 'llm-marl[wandb]'`, `'llm-marl[trackio]'`). A wandb run that cannot
  start (no login, no server) is a `TrackerError` naming the fixes. wandb drops a step at or below one it has, so a
  resume that redoes steps wandb holds rewinds the wandb run to before them (`resume_from`, a W&B preview
  feature); where wandb refuses, a warning says which steps it drops. The wandb run's id and the trackio
  run's name (trackio knows a run by its name), the run's name and a random suffix, are kept in the
  run directory (`wandb/llm-marl-run-id`, `trackio/llm-marl-run-id`) for `--resume`.
- `none` logs nothing but `metrics.jsonl`.
"""

from __future__ import annotations

import importlib
import json
import math
import secrets
import warnings
from pathlib import Path
from typing import Any

REPORT_TO = ("tensorboard", "wandb", "trackio", "none")
PROJECT = "llm-marl"
_PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb", "trackio": "trackio"}


class TrackerError(ValueError):
    """The tracker could not start its run (no login, no network); the message names the fixes."""


def check_available(report_to: str) -> None:
    """ValueError naming the install command when the tracker's package is missing (before a run starts)."""
    if report_to not in REPORT_TO:
        raise ValueError(f"unknown --report-to {report_to!r}; use one of {', '.join(REPORT_TO)}")
    package = _PACKAGES.get(report_to)
    if package is None:
        return
    try:
        importlib.import_module(package)
    except ImportError:
        raise ValueError(f"--report-to {report_to} needs the {package} package: pip install 'llm-marl[{report_to}]' "
                         "(or --report-to none)") from None


def numeric(metrics: dict[str, Any]) -> dict[str, float]:
    """The metrics a tracker can plot: finite numbers (bools as 0/1), `step` left out."""
    out = {}
    for key, value in metrics.items():
        if key != "step" and isinstance(value, (int, float)) and math.isfinite(float(value)):
            out[key] = float(value)
    return out


def flat_config(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"optim": {"lr": 1e-4}} -> {"optim/lr": 1e-4}; values that are not numbers, text or bools as JSON."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flat_config(value, name + "/"))
        else:
            out[name] = value if isinstance(value, (int, float, str, bool)) else json.dumps(value, default=str)
    return out


class NoTracker:
    def log(self, step: int, metrics: dict[str, Any]) -> None:
        pass

    def close(self) -> None:
        pass


class TensorBoardTracker:
    def __init__(self, run_dir: Path, config: dict[str, Any], first_step: int):
        from torch.utils.tensorboard import SummaryWriter
        from torch.utils.tensorboard.summary import hparams

        # Purged from the first step this process logs, also 1: a resume without a checkpoint starts over, and the steps
        # the run logged before it (set aside in superseded/) would otherwise be drawn twice.
        self.writer = SummaryWriter(log_dir=str(run_dir), purge_step=first_step)
        hp = flat_config(config)
        for summary in hparams(hp, {}):  # experiment, session start, session end: the HPARAMS tab
            self.writer.file_writer.add_summary(summary)
        self.writer.add_text("config", "```\n" + json.dumps(config, indent=2, default=str) + "\n```", global_step=0)

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        for key, value in numeric(metrics).items():
            self.writer.add_scalar(key, value, global_step=step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandbTracker:
    def __init__(self, run_dir: Path, config: dict[str, Any], first_step: int):
        import wandb

        self.wandb = wandb
        run_id = _run_id(run_dir)
        settings = {"project": PROJECT, "name": run_dir.name, "id": run_id, "dir": str(run_dir), "config": config}
        self.run = self._start(settings, resume="allow")
        held = self.run.step - 1  # the last step the resumed wandb run has (run.step is the step of the next log)
        if held >= first_step:  # a resume from an earlier checkpoint redoes them, and wandb would drop every one
            self.run.finish()
            try:  # what TensorBoard's purge_step does: the history kept up to the step before, the same run id
                self.run = wandb.init(**settings, resume_from=f"{run_id}?_step={first_step - 1}")
            except Exception as exc:  # rewinding is a W&B preview (wandb >= 0.17.1, and access on the server)
                warnings.warn(f"wandb run {run_id} has steps up to {held} and refused to rewind to step {first_step - 1} "
                              f"({_first_line(exc)}), so it drops the redone steps {first_step}..{held} (metrics.jsonl "
                              "keeps them): ask W&B support for access to rewinding runs, or use --report-to tensorboard",
                              stacklevel=3)
                self.run = self._start(settings, resume="allow")

    def _start(self, settings: dict[str, Any], **resume: Any) -> Any:
        try:
            return self.wandb.init(**settings, **resume)
        except Exception as exc:  # wandb's own errors (no API key, no server) and what its client raises
            raise TrackerError(f"--report-to wandb could not start its run ({_first_line(exc)}); log in "
                               "(`wandb login`, or WANDB_API_KEY), or set WANDB_MODE=offline to log into the run "
                               "directory and `wandb sync` it later, or use --report-to tensorboard") from None

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        self.run.log(numeric(metrics), step=step)

    def close(self) -> None:
        self.run.finish()


class TrackioTracker:
    def __init__(self, run_dir: Path, config: dict[str, Any], first_step: int):
        import trackio

        self.trackio = trackio
        trackio.init(project=PROJECT, name=_run_id(run_dir, "trackio"), config=config, resume="allow")

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        self.trackio.log(numeric(metrics), step=step)

    def close(self) -> None:
        self.trackio.finish()


def _first_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"


def _run_id(run_dir: Path, tracker: str = "wandb") -> str:
    """The wandb id (the trackio name) of this run directory: its name and a random suffix, kept in
    `<tracker>/llm-marl-run-id` so that a --resume goes on with the same tracker run. An id made of the name alone
    (resume="allow") made a new run of the same name (under another --out-dir, or made again after the first was
    deleted) resume the old tracker run: wandb drops steps at or below the ones it already has, trackio appends
    them to the old run's curves."""
    path = run_dir / tracker / "llm-marl-run-id"
    kept = path.read_text().strip() if path.is_file() else ""
    if kept:
        return kept
    name = "".join(c if c.isalnum() or c in "-_" else "-" for c in run_dir.name)[:119]
    # A run that logged steps before ids were kept (a --resume of it) goes on with the id it had: its name.
    run_id = name if (run_dir / "metrics.jsonl").exists() else f"{name}-{secrets.token_hex(4)}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(run_id + "\n")
    return run_id


TRACKERS = {"tensorboard": TensorBoardTracker, "wandb": WandbTracker, "trackio": TrackioTracker}


def open_tracker(report_to: str, run_dir: str | Path, config: dict[str, Any], first_step: int = 1) -> Any:
    """The tracker of `--report-to` for a run directory (a resumed run passes the first step it redoes)."""
    check_available(report_to)
    if report_to == "none":
        return NoTracker()
    return TRACKERS[report_to](Path(run_dir), config, first_step)
