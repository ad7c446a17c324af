"""`ClusterConfig`: where the engines, rollout workers and trainer ranks of a run live (the CLI's cluster flags)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_marl.config import opt


class ClusterError(RuntimeError):
    """A cluster step failed for good (an actor died twice, a remote call timed out); the message says how to resume."""


@dataclass
class ClusterConfig:
    ray_address: str = opt("", "Ray cluster to join ('auto': the one `ray start --head` runs on this node); unset with any "
                               "other cluster flag: the one $RAY_ADDRESS names (`ray job submit` sets it), else a local "
                               "Ray instance on this machine")
    engines: int = opt(0, "engine actors, each one engine (the --engine backend) with the frozen base and one LoRA slot per "
                          "adapter; 0: the engine runs in the trainer process (1 when --rollout-workers is set)")
    rollout_workers: int = opt(0, "rollout worker actors, each running the rollout on a shard of whole tasks with its own "
                                  "sandbox and search runtime; 0: the rollout runs in the trainer process")
    trainer_ranks: int = opt(1, "trainer ranks (a torch.distributed world, NCCL on GPUs, gloo on CPUs) that all-reduce the "
                                "LoRA gradients; 1: the update runs in the trainer process")
    gpus_per_engine: float = opt(0.0, "GPUs of each engine actor (1 for vLLM with tensor parallel 1; 0: CPU)")
    gpus_per_trainer_rank: float = opt(0.0, "GPUs of each trainer rank (1 on a GPU cluster; 0: CPU and gloo)")
    cpus_per_actor: float = opt(1.0, "logical CPUs Ray reserves for each actor (fractions allowed, e.g. 0.25 on a laptop)")
    remote_timeout_s: float = opt(600.0, "timeout of every remote call (a rollout shard, an update, an adapter push), in seconds")
    actor_retries: int = opt(1, "times a rollout shard is retried on a restarted worker (and restarted engines), or an "
                                "engine call of the trainer process on a restarted engine, after an actor died; 0: the "
                                "step fails and the run resumes from its checkpoint")

    def __post_init__(self) -> None:
        for name in ("engines", "rollout_workers", "actor_retries"):
            if getattr(self, name) < 0:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 0, got {getattr(self, name)}")
        if self.trainer_ranks < 1:
            raise ValueError(f"--trainer-ranks must be >= 1, got {self.trainer_ranks}")
        # Written as ranges that NaN fails too: NaN and inf reached Ray and int() as tracebacks once the model had loaded.
        if not (0 <= self.gpus_per_engine < math.inf and 0 <= self.gpus_per_trainer_rank < math.inf and 0 < self.cpus_per_actor < math.inf):
            raise ValueError("--gpus-per-engine and --gpus-per-trainer-rank must be >= 0, --cpus-per-actor > 0, each a finite number")
        if not 0 < self.remote_timeout_s < math.inf:
            raise ValueError(f"--remote-timeout-s must be > 0 and finite (seconds), got {self.remote_timeout_s}")

    @property
    def engine_actors(self) -> int:
        """The engine actors a run starts: --engines, or 1 for rollout workers to call. Kept apart from `engines`, which
        config.json saves as given: a saved 1 that only came with the workers made a resume with --rollout-workers 0
        start an engine actor still, unless --engines 0 was given too."""
        return self.engines or (1 if self.rollout_workers else 0)

    @property
    def enabled(self) -> bool:
        """Whether any part of the run leaves the trainer process."""
        return bool(self.ray_address or self.engines or self.rollout_workers or self.trainer_ranks > 1)

    @property
    def backend(self) -> str:
        return "nccl" if self.gpus_per_trainer_rank > 0 else "gloo"


PATH_ENV_ARGS = ("dataset", "problems")
"""Environment options that name a file or folder (math's and MASS's `dataset`, code's `problems`); they also take a
Hub id, which names no path here."""

FORWARDED_ENV = ("OPENAI_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
"""Environment variables the actors read as the trainer process does: the API key of the api endpoints and judges, and
the Hub token of gated models and datasets. Ray starts an actor on another node with that node's environment."""


def node_independent_env_args(env_kwargs: Mapping[str, Any], cwd: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """`env_kwargs` with each relative path of `PATH_ENV_ARGS` that exists here made absolute: a rollout worker on
    another node (or in another working directory) resolved `dataset=data/train.jsonl` against its own cwd, where it
    is missing or another file. A value naming no path here (a Hub id) is left as it is."""
    out = dict(env_kwargs)
    for key in PATH_ENV_ARGS:
        if isinstance(out.get(key), (str, os.PathLike)):
            out[key] = absolute_if_here(out[key], cwd)
    return out


def absolute_if_here(value: str | os.PathLike[str], cwd: str | os.PathLike[str] | None = None) -> Any:
    """`value` as the absolute path it names when it is a relative path that exists here (in `cwd`), else as given
    (an absolute path, a Hub id, a built-in model's name)."""
    path = Path(value).expanduser()
    here = Path(cwd) if cwd is not None else Path.cwd()
    return str((here / path).resolve()) if not path.is_absolute() and (here / path).exists() else value


def forwarded_env(env_kwargs: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables of `FORWARDED_ENV`, and the one a judge option names (`judge={"api_key_env": ...}`), that are set
    here: what the actors' runtime_env carries to other nodes. Their values are never logged."""
    environ = os.environ if environ is None else environ
    names = list(FORWARDED_ENV)
    judge = env_kwargs.get("judge")
    key_env = judge.get("api_key_env") if isinstance(judge, Mapping) else getattr(judge, "api_key_env", None)
    if isinstance(key_env, str) and key_env:
        names.append(key_env)
    return {name: environ[name] for name in names if environ.get(name)}
