"""The run directory: resolved config, metrics, sampled trajectories, adapters and checkpoints.

    runs/<env>__<algo>__<seed>__<YYYYmmdd-HHMMSS>/
        config.json            the resolved configuration (what `--resume` reads back)
        metrics.jsonl          one JSON object per training step, metrics namespaced reward/ loss/ perf/ ...
        trajectories/step_000001.jsonl   every sampled reply of the step with its reward and advantage
        checkpoints/step_000004/         adapters + optimiser/scheduler/RNG state (written atomically)
        checkpoints/LATEST               name of the newest complete checkpoint
        adapters/                        the final adapters (PEFT format)

A checkpoint is written into a temporary folder and renamed into place, and LATEST is replaced
atomically after it, so a run killed at any instant resumes from a complete checkpoint. On resume,
metrics and trajectories of steps after that checkpoint are dropped, so no step is lost or repeated.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any


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
    def create(cls, root: str | Path, env: str, algo: str, seed: int, name: str | None = None) -> RunDir:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        run = cls(Path(root) / (name or f"{env}__{algo}__{seed}__{stamp}"))
        if run.path.exists() and any(run.path.iterdir()):
            raise ValueError(f"run directory {run.path} already exists; pass --resume {run.path} to continue it or choose another --run-name")
        for sub in ("trajectories", "checkpoints", "adapters"):
            (run.path / sub).mkdir(parents=True, exist_ok=True)
        return run

    @classmethod
    def open(cls, path: str | Path) -> RunDir:
        run = cls(path)
        if not (run.path / "config.json").is_file():
            raise ValueError(f"{run.path} is not a run directory (no config.json); pass the folder printed when the run started")
        return run

    # ------------------------------------------------------------------ config
    def save_config(self, config: dict[str, Any]) -> None:
        _atomic_write_text(self.path / "config.json", json.dumps(config, indent=2, sort_keys=True, default=str) + "\n")

    def load_config(self) -> dict[str, Any]:
        return json.loads((self.path / "config.json").read_text())

    # ------------------------------------------------------------------ logs
    def log_metrics(self, step: int, metrics: dict[str, Any]) -> None:
        with open(self.path / "metrics.jsonl", "a") as f:
            f.write(json.dumps({"step": step, **metrics}, default=float) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def metrics(self) -> list[dict[str, Any]]:
        path = self.path / "metrics.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def write_trajectories(self, step: int, records: list[dict[str, Any]]) -> None:
        lines = "".join(json.dumps(r, default=str) + "\n" for r in records)
        _atomic_write_text(self.path / "trajectories" / f"step_{step:06d}.jsonl", lines)

    # ------------------------------------------------------------------ checkpoints
    def checkpoint_dir(self, step: int) -> Path:
        return self.path / "checkpoints" / f"step_{step:06d}"

    def begin_checkpoint(self, step: int) -> Path:
        """A fresh temporary folder to write the checkpoint of `step` into."""
        tmp = self.path / "checkpoints" / f".tmp_step_{step:06d}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        return tmp

    def commit_checkpoint(self, step: int, tmp: Path, keep: int = 2) -> Path:
        final = self.checkpoint_dir(step)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        _atomic_write_text(self.path / "checkpoints" / "LATEST", final.name + "\n")
        complete = sorted(p for p in (self.path / "checkpoints").glob("step_*") if p.is_dir())
        for old in complete[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
        return final

    def latest_checkpoint(self) -> tuple[int, Path] | None:
        marker = self.path / "checkpoints" / "LATEST"
        if not marker.exists():
            return None
        name = marker.read_text().strip()
        path = self.path / "checkpoints" / name
        if not path.is_dir():
            return None
        return int(name.split("_")[1]), path

    def truncate_after(self, step: int) -> None:
        """Drop metrics and trajectories of steps after `step` (they are redone on resume)."""
        kept = [m for m in self.metrics() if m["step"] <= step]
        _atomic_write_text(self.path / "metrics.jsonl", "".join(json.dumps(m, default=float) + "\n" for m in kept))
        for traj in (self.path / "trajectories").glob("step_*.jsonl"):
            if int(traj.stem.split("_")[1]) > step:
                traj.unlink()
