"""The run directory: resolved config, metrics, sampled trajectories, adapters and checkpoints.

    runs/<env>__<algo>__<seed>__<YYYYmmdd-HHMMSS>/
        config.json            the resolved configuration (what `--resume` reads back)
        versions.json          llm-marl, Python, package versions, environment and device (`provenance`)
        metrics.jsonl          one JSON object per training step, metrics namespaced reward/ loss/ perf/ ...
        trajectories/step_000001.jsonl   every sampled reply of the step with its reward and advantage
        checkpoints/step_000004/         adapters + optimiser/scheduler/RNG state (written atomically)
        checkpoints/LATEST               name of the newest complete checkpoint
        adapters/                        the final adapters (PEFT format, written atomically)
        .lock                            held (flock) by the process training the run: one at a time

A checkpoint is written into a temporary folder and renamed into place, and LATEST is replaced
atomically after it, so a run killed at any instant resumes from a complete checkpoint. LATEST is only
a hint: `--resume` takes the newest checkpoint that loads (a garbled LATEST, a deleted or corrupt newest
checkpoint fall back to the one before, and say so). Metrics and trajectories of the steps after it are
moved to `superseded/<time>/` (never deleted: the resuming process did not write them), so no step is
lost or counted twice. Pruning keeps the two newest checkpoints up to the current step and never
touches a newer one. A damaged run directory ends in one line naming the file and the fix
(`RunDirError`), and so does a full file system (`begin_checkpoint` checks for room first, and
`out_of_space` tells a failed write that ran out of it), and any other file's error under the run
(`write_failure`: a folder made read-only, an I/O error); `write_error` words either as that line.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import shlex
import shutil
import time
from pathlib import Path
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

try:
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX: runs are not guarded against a second process
    fcntl = None  # type: ignore[assignment]

T = TypeVar("T")


class RunDirError(ValueError):
    """A run directory that cannot be used as it is; the message names the file and the fix."""


class CheckpointMismatch(RunDirError):
    """A checkpoint written for other adapters than this run's (another --policy, or other roles): it is not
    damaged, so `resume_point` stops at it instead of falling back to an older one."""


_NO_SPACE = {errno.ENOSPC, errno.EDQUOT}
_MIB = 1 << 20


def free_bytes(path: str | Path) -> int:
    """Bytes this user may still write on `path`'s file system."""
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


def out_of_space(exc: BaseException, path: str | Path) -> bool:
    """Whether `exc`, raised while writing under `path`, is a full file system: an OSError saying so anywhere in its
    chain, or (torch and safetensors report a failed write in their own words) less than 1 MiB left there."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in _NO_SPACE:
            return True
        seen = seen.__cause__ or seen.__context__
    try:
        return free_bytes(path) < _MIB
    except OSError:
        return False


def write_failure(exc: BaseException, path: str | Path) -> OSError | None:
    """The OSError in `exc`'s chain that a file under `path` raised (a folder made read-only, an I/O error), or None:
    an OSError of anything else (a connection's, a dataset file's) is not the run directory's to report."""
    root = Path(path).absolute()
    seen: BaseException | None = exc
    while seen is not None:
        name = getattr(seen, "filename", None)
        if isinstance(seen, OSError) and isinstance(name, (str, os.PathLike)) and Path(name).absolute().is_relative_to(root):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def write_error(exc: Exception, path: str | Path) -> RunDirError | None:
    """`exc` as the one line it is when a full disk (`out_of_space`) or another file's error under the run directory
    `path` (`write_failure`) raised it, or None for any other failure."""
    if out_of_space(exc, path):
        return RunDirError(f"no space left where {path} is ({type(exc).__name__}: {exc}); free some space")
    failed = write_failure(exc, path)
    if failed is None:
        return None
    fix = f": make {path} writable" if failed.errno in (errno.EACCES, errno.EPERM, errno.EROFS) else ""
    return RunDirError(f"cannot write {failed.filename} ({failed.strerror or failed}){fix}")


def _json_number(value: Any) -> Any:
    """NaN and inf as None (JSON has neither); any other value as it is."""
    try:
        return value if math.isfinite(value) else None
    except TypeError:  # not a number
        return value


def _json_safe(value: Any) -> Any:
    """`value` with every NaN or inf in it, in nested dicts and lists too (an info's local_terms), as None."""
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return _json_number(value)


def _replace_folder(tmp: Path, final: Path) -> None:
    """Put the complete folder `tmp` in `final`'s place: the earlier `final` is renamed aside first, so a kill at any
    instant leaves it, the new one, or (between the two renames) neither, never part of one."""
    old = final.with_name(f".old_{final.name}")
    shutil.rmtree(old, ignore_errors=True)
    if final.exists():
        os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)


def _atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class RunDir:
    def __init__(self, path: str | Path):
        self.path = Path(path)

    # ------------------------------------------------------------------ creation
    @classmethod
    def create(cls, root: str | Path, env: str, algo: str, seed: int, name: str | None = None, resumable: bool = True) -> RunDir:
        """A new run directory under `root`: `name`, else `<env>__<algo>__<seed>__<time>`, with `-2`, `-3`, ...
        added when another run took that name (runs of a sweep started in the same second). One process
        claims a folder by making its `trajectories/` (`mkdir` fails for every other), so two runs never share one.
        `resumable`: whether a run that took the name can be continued with `--resume` (sft's cannot)."""
        base = Path(root) / (name or f"{env}__{algo}__{seed}__{time.strftime('%Y%m%d-%H%M%S')}")
        for n in range(1, 1000):
            run = cls(base if n == 1 else base.with_name(f"{base.name}-{n}"))
            try:
                run.path.mkdir(parents=True, exist_ok=True)
                if not any(run.path.iterdir()) and run._claim():
                    return run
            except OSError as exc:
                raise RunDirError(f"cannot create the run directory {run.path} ({exc.strerror or exc}): pass a writable --out-dir") from None
            if name:
                break
        resume = f"pass --resume {shlex.quote(str(run.path))} to continue it or " if resumable else ""
        raise RunDirError(f"run directory {run.path} already exists; {resume}choose another --run-name")

    def _claim(self) -> bool:
        """Make the run's folders; False where another process made `trajectories/` first."""
        try:
            (self.path / "trajectories").mkdir()
        except FileExistsError:
            return False
        for sub in ("checkpoints", "adapters"):
            (self.path / sub).mkdir(exist_ok=True)
        return True

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """The run, taken for this process while the block runs (an `flock` on `.lock`, which the kernel also
        drops when the process dies): another process training into it, such as a `--resume` started while
        the run still goes on, gets a `RunDirError` instead of mixing its steps and checkpoints into this run's."""
        with open(self.path / ".lock", "a") as handle:
            try:
                if fcntl is not None:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise RunDirError(f"{self.path} is in use by another llm-marl process (the run, or a resume of it, is "
                                  "still going on); wait for it to end or stop it, then resume") from None
            yield

    @staticmethod
    def check_root(root: str | Path) -> None:
        """Raise RunDirError unless run directories can be created under `root` (checked before a model
        loads, so a bad --out-dir fails at once and leaves nothing behind)."""
        path = Path(root).absolute()
        while not path.exists():
            path = path.parent
        if not path.is_dir() or not os.access(path, os.W_OK | os.X_OK):
            raise RunDirError(f"cannot create run directories under {root} ({path} is "
                              f"{'not a directory' if not path.is_dir() else 'not writable'}): pass a writable --out-dir")

    def check_writable(self) -> None:
        """Raise RunDirError unless this process can write in the run's folders (checked before a model loads, so that
        a resume of a read-only run fails at once, not at its first write). A file is made and removed in each: the
        permission bits do not tell (root ignores them, a read-only mount or an ACL refuses what they allow)."""
        for folder in (self.path, self.path / "checkpoints", self.path / "trajectories"):
            if not folder.is_dir():
                continue  # made when it is needed
            probe = folder / f".write_check_{os.getpid()}"
            try:
                with open(probe, "w"):
                    pass
                probe.unlink()
            except OSError as exc:
                raise RunDirError(f"cannot write in {folder} ({exc.strerror or exc}): make it writable, or copy the run "
                                  "directory to a writable folder and resume the copy") from None

    @classmethod
    def open(cls, path: str | Path) -> RunDir:
        run = cls(path)
        if not (run.path / "config.json").is_file():
            raise RunDirError(f"{run.path} is not a run directory (no config.json); pass the folder printed when the run started")
        return run

    # ------------------------------------------------------------------ config
    def save_config(self, config: dict[str, Any]) -> None:
        _atomic_write_text(self.path / "config.json", json.dumps(config, indent=2, sort_keys=True, default=str) + "\n")

    def load_config(self) -> dict[str, Any]:
        path = self.path / "config.json"
        try:
            config = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise RunDirError(f"{path} is damaged ({exc}): restore it (a copy of any run's config.json with this run's "
                              "settings works) or start a new run") from None
        if not isinstance(config, dict):
            raise RunDirError(f"{path} is not a run configuration (a JSON object): restore it or start a new run")
        return config

    def save_resumed_config(self, config: dict[str, Any], step: int) -> list[str]:
        """On a resume that goes on with other settings (flags given with `--resume`): write them to config.json, so
        that a later plain `--resume` keeps them and the file says what the run trains with, and append the earlier
        values, and `step` (the first step run with the new ones), to its `resumes` list. Returns the changes."""
        saved = self.load_config()
        history = saved.pop("resumes", [])
        now = json.loads(json.dumps(config, default=str))  # as the file holds it (tuples as lists)
        if now == saved:
            return []
        changed = {f"{section}.{key}": [saved[section][key], value]
                   for section, values in now.items() if isinstance(values, dict) and isinstance(saved.get(section), dict)
                   for key, value in values.items() if key in saved[section] and saved[section][key] != value}
        # Settings the file did not hold (added to llm-marl since the run started) are written, not reported.
        self.save_config({**now, "resumes": [*history, *([{"step": step, "changed": changed}] if changed else [])]})
        return [f"{name} {json.dumps(old)} -> {json.dumps(new)}" for name, (old, new) in changed.items()]

    # ------------------------------------------------------------------ logs
    def log_metrics(self, step: int, metrics: dict[str, Any]) -> None:
        """Append one step's metrics. A NaN or inf (the loss of an update that was skipped) is written as null:
        Python's `NaN` is not JSON, and strict readers (jq, a browser's JSON.parse) refuse a file that holds one."""
        record = {"step": step, **{k: _json_number(v) for k, v in metrics.items()}}
        with open(self.path / "metrics.jsonl", "a") as f:
            f.write(json.dumps(record, default=float) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def metrics(self) -> list[dict[str, Any]]:
        """Every logged step. A torn last line (a kill in the middle of a write) is not a step; a damaged
        line before it is a RunDirError."""
        path = self.path / "metrics.jsonl"
        if not path.exists():
            return []
        # Numbered as in the file, blank lines counted: the error names the line to delete.
        lines = [(number, line) for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1) if line.strip()]
        out = []
        for number, line in lines:
            try:
                record = json.loads(line)
                if not isinstance(record, dict) or not isinstance(record.get("step"), int):
                    raise ValueError("no integer 'step'")
            except ValueError as exc:
                if number == lines[-1][0]:
                    break  # torn by a kill: that step was not completed
                raise RunDirError(f"{path}:{number} is damaged ({exc}): delete that line, or the steps from it on") from None
            out.append(record)
        return out

    def write_trajectories(self, step: int, records: list[dict[str, Any]]) -> None:
        """One step's samples, a NaN or inf in them as null: a reward that no credit reads may be NaN (the step trains),
        and json writes it as a bare `NaN`, which is no JSON (jq, JavaScript and strict parsers refuse the file)."""
        lines = "".join(json.dumps(_json_safe(r), default=str) + "\n" for r in records)
        _atomic_write_text(self.path / "trajectories" / f"step_{step:06d}.jsonl", lines)

    # ------------------------------------------------------------------ checkpoints
    def checkpoint_dir(self, step: int) -> Path:
        return self.path / "checkpoints" / f"step_{step:06d}"

    def begin_checkpoint(self, step: int, needed: int = 0) -> Path:
        """A fresh temporary folder to write the checkpoint of `step` into, once the file system has room for
        about `needed` bytes (else a RunDirError, before a partial checkpoint takes what is left)."""
        free = free_bytes(self.path)
        if free < needed:
            raise RunDirError(f"no space for the checkpoint of step {step}: about {needed / _MIB:.0f} MiB needed, "
                              f"{free / _MIB:.0f} MiB free where {self.path} is; free some space")
        tmp = self.path / "checkpoints" / f".tmp_step_{step:06d}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        return tmp

    def discard_unfinished_checkpoints(self) -> None:
        """Remove checkpoints and final adapters that were being written (never listed, never loaded): what they hold
        is lost anyway."""
        for tmp in [*(self.path / "checkpoints").glob(".tmp_step_*"), self.path / ".tmp_adapters"]:
            shutil.rmtree(tmp, ignore_errors=True)

    def save_adapters(self, save: Callable[[Path], Any]) -> Path:
        """The final `adapters/`, written by `save(folder)` into a temporary sibling and renamed into place, as a
        checkpoint is: a run stopped in the middle keeps the earlier folder, never new weights beside its manifest."""
        tmp = self.path / ".tmp_adapters"
        shutil.rmtree(tmp, ignore_errors=True)
        save(tmp)
        _replace_folder(tmp, self.path / "adapters")
        return self.path / "adapters"

    def checkpoint_bytes(self) -> int:
        """The size of the newest checkpoint (0 without one): about what the next one needs."""
        latest = self.latest_checkpoint()
        return sum(f.stat().st_size for f in latest[1].rglob("*") if f.is_file()) if latest else 0

    def commit_checkpoint(self, step: int, tmp: Path, keep: int = 2) -> Path:
        final = self.checkpoint_dir(step)
        _replace_folder(tmp, final)
        _atomic_write_text(self.path / "checkpoints" / "LATEST", final.name + "\n")
        # Keep the `keep` newest up to this step; a newer one (left by a run that resumed from an older,
        # valid checkpoint) is never pruned here.
        older = [s for s, _ in self.checkpoints() if s <= step]
        for old in older[keep:]:
            shutil.rmtree(self.checkpoint_dir(old), ignore_errors=True)
        return final

    def checkpoints(self) -> list[tuple[int, Path]]:
        """Committed checkpoints, newest first (a killed write leaves only a `.tmp_` folder, never listed)."""
        found = []
        for path in (self.path / "checkpoints").glob("step_*"):
            number = path.name.removeprefix("step_")
            if path.is_dir() and number.isdigit():
                found.append((int(number), path))
        return sorted(found, reverse=True)

    def latest_checkpoint(self) -> tuple[int, Path] | None:
        """The newest committed checkpoint, whatever LATEST says (it is only a hint)."""
        found = self.checkpoints()
        return found[0] if found else None

    def resume_point(self, load: Callable[[Path], T], log: Callable[[str], None] = print) -> tuple[int, Path, T] | None:
        """The newest checkpoint that `load` accepts: (step, path, what load returned).

        Newer checkpoints that fail to load are reported through `log` and skipped. None when there is
        no checkpoint at all; a RunDirError naming the fix when there are some and none loads.
        """
        marker = self.path / "checkpoints" / "LATEST"
        hint = marker.read_text(errors="replace").strip() if marker.exists() else ""
        problems = []
        for step, path in self.checkpoints():
            try:
                loaded = load(path)
            except CheckpointMismatch:
                raise
            except Exception as exc:  # noqa: BLE001 -- any damage makes this checkpoint unusable; try the one before
                problems.append(f"{path.name}: {type(exc).__name__}: {str(exc)[:200]}")
                log(f"checkpoint {path.name} cannot be loaded ({problems[-1]}); trying an older one")
                continue
            if hint != path.name:
                log(f"checkpoints/LATEST says {hint or '(nothing)'!r}; resuming from the newest checkpoint that loads, {path.name}")
            return step, path, loaded
        if problems:
            raise RunDirError(f"no checkpoint of {self.path} loads ({'; '.join(problems)}): move the damaged checkpoints "
                              "out of checkpoints/ to start over from step 1, or start a new run")
        return None

    def truncate_after(self, step: int, stale: tuple[str, ...] = ()) -> Path | None:
        """Set aside metrics and trajectories of steps after `step` (they are redone on resume), and the run's
        files named in `stale` (results of adapters that the resume trains further): they move to
        `superseded/<time>/`, which is returned (None when there was nothing to move)."""
        history = self.metrics()
        kept = [m for m in history if m["step"] <= step]
        later = [p for p in (self.path / "trajectories").glob("step_*.jsonl") if int(p.stem.split("_")[1]) > step]
        later += [self.path / name for name in stale if (self.path / name).exists()]
        metrics_file = self.path / "metrics.jsonl"
        raw = metrics_file.read_text(errors="replace") if metrics_file.exists() else ""
        rewritten = "".join(json.dumps(m, default=float) + "\n" for m in kept)
        if not later and raw == rewritten:
            return None
        aside = self.path / "superseded" / time.strftime("%Y%m%d-%H%M%S")
        aside.mkdir(parents=True, exist_ok=True)
        (aside / "metrics.jsonl").write_text(raw)  # the file as it was, torn lines included
        for path in later:
            os.replace(path, aside / path.name)
        _atomic_write_text(metrics_file, rewritten)
        return aside
