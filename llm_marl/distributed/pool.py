"""`RayEnginePool`: the `Engine` interface over several engine actors.

Every request of a task (its parallel episodes, tree forks, fork points and counterfactual replays)
goes to the engine that served the task first, so that engine's prefix cache holds the task's
shared prompt prefixes; a task seen for the first time goes to the least-loaded engine (fewest
tasks this pool has sent there; ties go to the engine after the last one chosen, starting at
`start`, so pools of different workers begin on different engines). Requests without a task tag
are spread by the same rule, one request at a time. One call fans out to the engines at once (each
with its own seed, `engine_sampling`) and waits for all of them, each with `timeout_s`.

An engine actor that dies during a call: in the driver, `on_engine_death` restarts it (or raises) and its
requests go to the new one; inside a rollout worker (no `on_engine_death`) the error ends the worker's
shard, which the driver retries on restarted actors.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from llm_marl.engines.base import GenerationRequest, GenerationResult, SamplingParams

from .config import ClusterError


class RayEnginePool:
    """Route `generate` calls to engine actors; `sync_adapters` publishes `policy`'s adapters (driver side)."""

    def __init__(self, engines: list[Any], timeout_s: float = 600.0, start: int = 0, policy: Any = None,
                 publish: Any = None, on_engine_death: Callable[[int, int, BaseException], None] | None = None):
        if not engines:
            raise ValueError("RayEnginePool needs at least one engine actor")
        self.engines = list(engines)
        self.timeout_s = timeout_s
        self.policy_set = policy
        """The driver's policy set (σ, adapters to publish); None inside a rollout worker."""
        self._publish = publish
        self._on_engine_death = on_engine_death
        """(engine index, times it died during this call, the error): replaces the engine, or raises (driver side)."""
        self._home: dict[str, int] = {}
        self._load = [0] * len(self.engines)
        self._next = start % len(self.engines)

    def engine_for(self, request: GenerationRequest) -> int:
        """The engine of this request's task (least-loaded on first sight)."""
        task = getattr(request.tag, "task_id", None)
        if task is not None and task in self._home:
            return self._home[task]
        order = [(self._next + k) % len(self.engines) for k in range(len(self.engines))]
        choice = min(order, key=lambda e: self._load[e])
        self._next = (choice + 1) % len(self.engines)
        self._load[choice] += 1
        if task is not None:
            self._home[task] = choice
        return choice

    def generate(self, requests: list[GenerationRequest], sampling: SamplingParams) -> list[GenerationResult]:
        import ray

        groups: dict[int, list[int]] = {}
        for i, request in enumerate(requests):
            groups.setdefault(self.engine_for(request), []).append(i)
        seeded = {e: engine_sampling(sampling, e, len(self.engines)) for e in groups}
        calls = {e: self.engines[e].generate.remote([requests[i] for i in idx], seeded[e]) for e, idx in groups.items()}
        results: list[GenerationResult | None] = [None] * len(requests)
        for e, ref in calls.items():
            deaths = 0
            while True:
                try:
                    out = ray.get(ref, timeout=self.timeout_s)
                    break
                except ray.exceptions.GetTimeoutError:
                    raise ClusterError(f"engine actor {e} did not answer {len(groups[e])} requests within {self.timeout_s:.0f} s "
                                       "(raise --remote-timeout-s, or add engines)") from None
                except ray.exceptions.RayActorError as exc:
                    if self._on_engine_death is None:
                        raise
                    deaths += 1
                    self._on_engine_death(e, deaths, exc)  # raises once the retries are used up
                    ref = self.engines[e].generate.remote([requests[i] for i in groups[e]], seeded[e])
            for i, result in zip(groups[e], out):
                result.request = requests[i]  # the caller's own request object (its tag is compared by identity)
                results[i] = result
        return results  # type: ignore[return-value]

    def sync_adapters(self) -> None:
        """Publish the driver's adapters to every engine actor (a no-op inside a worker: the driver publishes)."""
        if self._publish is not None:
            self._publish()

    def close(self) -> None:
        pass  # the actors belong to the ClusterRun that made them


def engine_sampling(sampling: SamplingParams, engine: int, engines: int) -> SamplingParams:
    """What engine `engine` of `engines` samples its part of a call with: a seed derived from (seed, engine) when
    there are several. Every engine seeds its call's first sample alike (vLLM: seed * stride + 0; hf: one
    generator from the seed), so with the call's one seed two tasks with the same prompt on two engines drew
    the same reply, and every other pair of samples the same random numbers. One engine keeps the seed."""
    if sampling.seed is None or engines == 1:
        return sampling
    return dataclasses.replace(sampling, seed=int(np.random.SeedSequence([int(sampling.seed), engine]).generate_state(1)[0]))
