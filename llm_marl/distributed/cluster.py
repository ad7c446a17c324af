"""`ClusterRun`: the engine actors, rollout workers and trainer ranks of one training run.

    driver (the trainer loop: tasks, advantages on the whole batch, checkpoints, metrics)
     ├─ EngineActor × E      frozen base + one LoRA slot per adapter; adapters arrive as tensors
     ├─ RolloutWorker × R    the unchanged rollout() on shards of whole tasks, through a RayEnginePool
     └─ TrainerRank × T      a torch.distributed world (NCCL on GPUs, gloo on CPUs); LoRA grads all-reduced

The driver keeps its own `PolicySet` (σ, checkpoints, held-out evaluation): after each update it takes
rank 0's adapters, and `engine.sync_adapters()` publishes those whose weights changed to every engine
actor through the object store (one `ray.put`, no shared filesystem), as version v+1 (vLLM: new LoRA
ids, old removed); when none changed, nothing is sent.

Faults: a rollout shard whose worker (or one of whose engines) died is retried on restarted actors,
up to `actor_retries` times, as is an engine call of the driver's own rollout or evaluation; the dead
attempt's samples never reach the driver, so none is counted twice. A dead trainer rank, a timeout
or retries used up end the step with a `ClusterError` that names the resume command; the run
continues from its last checkpoint. Every remote call waits at most `remote_timeout_s`.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from llm_marl.policies import adapter_tensors, changed_adapters

from . import require_ray
from .actors import EngineActor, RolloutWorker, TrainerRank, TrainerSpec, load_adapter_tensors
from .config import ClusterConfig, ClusterError
from .pool import RayEnginePool
from .shards import merge_rollouts, shard_tasks

LOCAL_SYSTEM_CONFIG = {"worker_niceness": 0}
"""Ray's settings for the local instance a run starts: its workers (the actors) at the driver's
priority. Ray's default, nice 15, puts them behind every other process on the machine, where a
local cluster's actors are this run's own work."""

RAY_INIT = {"include_dashboard": False, "log_to_driver": False}
"""`ray.init`'s settings for every run, local or joining a cluster."""

RANK_CLOSE_S = 30.0
"""How long `close` waits for the trainer ranks to leave their torch.distributed world before it kills them."""

HEAL_PING_S = 10.0
"""How long a heal waits for the actors' pings: a dead actor's fails at once, a busy one's waits for its call."""

RAY_SOCKET_TAIL = len("/ray/session_2026-11-28_15-49-23_753385_4194304/sockets/plasma_store")
"""What Ray adds to its temp root for its longest socket path: a session folder (date, time to the
microsecond, a pid of up to 7 digits) and the object store's socket."""


def local_ray_kwargs(num_cpus: int | None = None, log: Callable[[str], None] = print) -> dict[str, Any]:
    """`ray.init`'s arguments for the local instance a run starts (no dashboard, workers at the driver's
    priority), with its temp root moved where Ray's own would make socket paths too long.

    Ray puts its sessions under $RAY_TMPDIR, else (on Linux) $TMPDIR, else /tmp, and a Unix socket path
    has at most 107 bytes (103 on macOS): a TMPDIR longer than 39 bytes (a batch system's per-job folder)
    makes `ray.init` fail on its first socket. Ray's sessions then go under /tmp/ray, where Ray puts them
    without TMPDIR (TMPDIR still serves the rest of the run). A RAY_TMPDIR that long is an error naming the fix."""
    # A copy: ray.init writes its session's spilling folder into the dict it gets, which a second local instance of
    # this process (a notebook's next run) then took over from the first, stopped, session.
    kwargs: dict[str, Any] = {**RAY_INIT, "_system_config": dict(LOCAL_SYSTEM_CONFIG)}
    if num_cpus is not None:
        kwargs["num_cpus"] = num_cpus
    limit = (103 if sys.platform == "darwin" else 107) - RAY_SOCKET_TAIL
    if len(os.fsencode(os.environ.get("RAY_TMPDIR", ""))) > limit:
        raise ClusterError(f"RAY_TMPDIR={os.environ['RAY_TMPDIR']} is too long for Ray's socket paths (at most {limit} "
                           "bytes leave room for its session folders); set RAY_TMPDIR to a shorter folder, such as /tmp")
    tmpdir = os.environ.get("TMPDIR", "")
    if "RAY_TMPDIR" not in os.environ and sys.platform.startswith("linux") and len(os.fsencode(tmpdir)) > limit:
        kwargs["_temp_dir"] = "/tmp/ray"
        log(f"cluster: Ray's sessions go under /tmp/ray: TMPDIR ({tmpdir}) is too long for its socket paths "
            f"(at most {limit} bytes); set RAY_TMPDIR to choose another folder")
    return kwargs


def cluster_address(config: ClusterConfig) -> tuple[str, str]:
    """(the Ray cluster to join, what named it): --ray-address, else $RAY_ADDRESS, which `ray job submit` and
    KubeRay set for a job's driver; ("", "") for a local instance. A local instance's settings (`_system_config`)
    made `ray.init` refuse to join the cluster RAY_ADDRESS names."""
    if config.ray_address:
        return config.ray_address, "--ray-address"
    if os.environ.get("RAY_ADDRESS"):
        return os.environ["RAY_ADDRESS"], "RAY_ADDRESS"
    return "", ""


def actor_gpus(config: ClusterConfig) -> float:
    """The GPUs the run's actors ask Ray for: the engine actors', and the trainer ranks' when there are several."""
    ranks = config.trainer_ranks if config.trainer_ranks > 1 else 0
    return config.engine_actors * config.gpus_per_engine + ranks * config.gpus_per_trainer_rank


def shared_gpu_warning(driver_device: str, config: ClusterConfig, node_gpus: float) -> str | None:
    """What to say when the trainer process holds its model on a GPU of a node whose GPUs Ray hands to this run's
    actors (`node_gpus`: Ray's GPUs on the trainer process's node): Ray does not count the trainer process, which is
    none of its tasks, so it can give an engine actor or trainer rank that very GPU, and the two then share it unseen
    (out of memory, or each slowed). None where they cannot meet."""
    if not str(driver_device).startswith("cuda") or node_gpus <= 0 or actor_gpus(config) <= 0:
        return None
    fix = ("pass --device cpu (with --trainer-ranks above 1 the trainer process needs no GPU: it keeps the adapters, "
           "and the ranks update)" if config.trainer_ranks > 1 else
           "start Ray on this node without that GPU (e.g. CUDA_VISIBLE_DEVICES=1,2,3 ray start --head, then --ray-address "
           "auto), or pass --trainer-ranks 2 or more with --device cpu")
    return (f"cluster: the trainer process holds its model on {driver_device}, and Ray may give that GPU to an engine actor "
            f"or trainer rank too ({node_gpus:g} GPU(s) of this node are Ray's; it does not count the trainer process's): "
            f"{fix}")


def driver_node_gpus() -> float:
    """Ray's GPUs on the node of this process (the trainer process)."""
    import ray

    here = ray.get_runtime_context().get_node_id()
    return float(next((node["Resources"].get("GPU", 0.0) for node in ray.nodes() if node["NodeID"] == here and node["Alive"]), 0.0))


class ClusterRun:
    """Start with `start()` (or `with`), stop with `close()`; `engine` is the `Engine` the driver uses."""

    def __init__(self, config: ClusterConfig, policy: Any, *, engine_factory: Callable[[], Any] | None = None,
                 trainer: TrainerSpec | None = None, log: Callable[[str], None] = print, num_cpus: int | None = None,
                 env_vars: dict[str, str] | None = None):
        self.config = config
        self.env_vars = dict(env_vars or {})
        """Set in every actor (`forwarded_env`: API keys, the Hub token), as Ray's runtime_env carries them to other nodes."""
        self.policy = policy
        self.engine_factory = engine_factory
        self.trainer = trainer
        self.log = log
        self.num_cpus = num_cpus
        self.engines: list[Any] = []
        self.workers: list[Any] = []
        self.ranks: list[Any] = []
        self.engine: Any = None
        self.version = 0
        """The publication the engines serve (one per `publish` that found a changed adapter)."""
        self.adapter_versions: dict[str, int] = {}
        """Each adapter's version: the publications that changed its weights."""
        self.published: dict[str, dict[str, Any]] = {}
        """Each adapter's weights as last published, to tell which changed."""
        self.retries = 0
        self.publish_s = 0.0
        self._own_ray = False
        self._pg = None

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> ClusterRun:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def start(self) -> ClusterRun:
        ray = require_ray()
        cfg = self.config
        if not ray.is_initialized():
            address, named_by = cluster_address(cfg)
            if address:
                kwargs: dict[str, Any] = {**RAY_INIT, "address": address}
                if named_by == "RAY_ADDRESS":
                    self.log(f"cluster: joining the Ray cluster at RAY_ADDRESS={address} (--ray-address unset)")
            else:
                kwargs = local_ray_kwargs(self.num_cpus, self.log)
            try:
                ray.init(**kwargs)
            except ConnectionError as exc:
                fix = ("unset RAY_ADDRESS for a local instance" if named_by == "RAY_ADDRESS" else
                       "drop --ray-address for a local instance")
                raise ClusterError(f"cannot join the Ray cluster at {address!r} ({named_by}: {exc}); start one with "
                                   f"`ray start --head` or {fix}") from None
            self._own_ray = True
        warning = shared_gpu_warning(getattr(self.policy, "device", "cpu"), cfg, driver_node_gpus()) if actor_gpus(cfg) else None
        if warning:
            self.log(warning)
        try:
            self._start_actors()
        except BaseException:  # Ctrl-C too: the actors made so far would hold their CPUs and GPUs while this process lives
            self.close(graceful=False)
            raise
        return self

    def _start_actors(self) -> None:
        cfg = self.config
        t0 = time.perf_counter()
        if cfg.engine_actors:
            if self.engine_factory is None:
                raise ValueError("engine actors need an engine factory (an EngineSpec)")
            self.engines = [self._new_engine(i) for i in range(cfg.engine_actors)]
            self._wait([e.ping.remote() for e in self.engines], "engine actors to start")
            self.engine = RayEnginePool(self.engines, timeout_s=cfg.remote_timeout_s, policy=self.policy, publish=self.publish,
                                        on_engine_death=self._engine_died)
        self.workers = [self._new_worker(w) for w in range(cfg.rollout_workers)]
        if self.workers:
            self._wait([w.ping.remote() for w in self.workers], "rollout workers to start")
        if cfg.trainer_ranks > 1:
            self._start_ranks()
        if self.engines and getattr(self.policy, "adapters", None):
            self.publish()
        self.log(f"cluster: {len(self.engines)} engine actor(s), {len(self.workers)} rollout worker(s), "
                 f"{max(1, len(self.ranks))} trainer rank(s) ({cfg.backend if self.ranks else 'in process'}), "
                 f"ready in {time.perf_counter() - t0:.1f} s"
                 + (f"; {', '.join(sorted(self.env_vars))} set in each from this process's environment" if self.env_vars else ""))

    def close(self, graceful: bool = True) -> None:
        """Stop every actor (and the local Ray instance this run started); `graceful`: the trainer ranks leave
        their torch.distributed world first (not after a failed start, where they may still be waiting to form it)."""
        import ray

        if not ray.is_initialized():
            return
        if graceful and self.ranks:
            self._close_ranks()
        for actor in [*self.engines, *self.workers, *self.ranks]:
            ray.kill(actor)
        if self._pg is not None:
            ray.util.remove_placement_group(self._pg)
        self.engines, self.workers, self.ranks = [], [], []
        if self._own_ray:
            ray.shutdown()

    def _close_ranks(self) -> None:
        """Ask every rank to leave its world at once and wait up to `RANK_CLOSE_S` in all. A rank found dead ends the
        wait: the survivors' world is broken (one may be stuck in a collective the dead rank never joins, behind which
        its close would wait out the timeout), and they are killed next. Waiting on each rank in turn, 30 s each, made
        close take 30 s after a rank died."""
        import ray

        pending = [rank.close.remote() for rank in self.ranks]
        deadline = time.monotonic() + RANK_CLOSE_S
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=max(0.0, deadline - time.monotonic()))
            if not ready:
                return
            try:
                ray.get(ready[0], timeout=0)
            except ray.exceptions.RayActorError:
                return
            except Exception:  # noqa: BLE001 -- a rank whose close failed is killed like the rest
                pass

    # ------------------------------------------------------------------ actors
    def _new_engine(self, index: int) -> Any:
        import ray

        cfg = self.config
        return ray.remote(EngineActor).options(num_cpus=cfg.cpus_per_actor, num_gpus=cfg.gpus_per_engine, name=None,
                                               **self._runtime_env()).remote(self.engine_factory)

    def _new_worker(self, index: int) -> Any:
        import ray

        return ray.remote(RolloutWorker).options(num_cpus=self.config.cpus_per_actor, **self._runtime_env()).remote(
            index, self.config.remote_timeout_s)

    def _runtime_env(self) -> dict[str, Any]:
        """An actor's options for `env_vars` (none without any: Ray then reuses its idle workers as before). Ray merges
        them with the job's own runtime_env variables."""
        return {"runtime_env": {"env_vars": dict(self.env_vars)}} if self.env_vars else {}

    def _start_ranks(self) -> None:
        import ray

        cfg = self.config
        if self.trainer is None:
            raise ValueError("trainer ranks need a TrainerSpec")
        options: dict[str, Any] = {"num_cpus": cfg.cpus_per_actor, "num_gpus": cfg.gpus_per_trainer_rank, **self._runtime_env()}
        if cfg.gpus_per_trainer_rank > 0:
            # One bundle per rank, packed onto as few nodes as possible (NCCL inside a node is fastest).
            from ray.util.placement_group import placement_group
            from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

            bundle = {"CPU": cfg.cpus_per_actor, "GPU": cfg.gpus_per_trainer_rank}
            self._pg = placement_group([bundle] * cfg.trainer_ranks, strategy="PACK")
            self._wait([self._pg.ready()], "the trainer ranks' placement group (are there enough GPUs?)")
        self.ranks = []
        for r in range(cfg.trainer_ranks):
            opts = dict(options)
            if self._pg is not None:
                opts["scheduling_strategy"] = PlacementGroupSchedulingStrategy(placement_group=self._pg, placement_group_bundle_index=r)
            self.ranks.append(ray.remote(TrainerRank).options(**opts).remote(self.trainer, r, cfg.trainer_ranks))
        host, port = self._wait([self.ranks[0].address.remote()], "trainer rank 0 to start")[0]
        self._wait([rank.init_group.remote(cfg.backend, host, port, cfg.remote_timeout_s) for rank in self.ranks],
                   f"the {cfg.backend} world of {cfg.trainer_ranks} trainer ranks to form")

    def load_trainer_state(self, optimizers: dict[str, Any], schedulers: dict[str, Any]) -> None:
        """Every rank starts from the driver's adapters and optimizer/scheduler states (fresh run or resume)."""
        if not self.ranks:
            return
        import ray

        adapters = ray.put(adapter_tensors(self.policy))
        opt = ray.put({a: o.state_dict() for a, o in optimizers.items()})
        sched = ray.put({a: s.state_dict() for a, s in schedulers.items()})
        self._wait([rank.load_state.remote(adapters, opt, sched) for rank in self.ranks], "trainer ranks to load the run's state")

    def trainer_state(self) -> dict[str, Any]:
        """Rank 0's optimizer and scheduler states (identical on every rank), for the checkpoint."""
        return self._wait([self.ranks[0].trainer_state.remote()], "rank 0's optimizer state", fail="checkpoint")[0]

    # ------------------------------------------------------------------ rollout
    def rollout(self, tasks: list[Any], plan: Any, sigma: Any, sampling: Any, on_wave: Callable[[dict], None] | None = None,
                max_steps: int = 256) -> Any:
        """The rollout of `tasks`: in the driver through the engine pool, or sharded over the rollout workers."""
        from llm_marl.rollout import rollout

        if not self.workers:
            return rollout(tasks, plan, self.engine, sigma=sigma, sampling=sampling, on_wave=on_wave, max_steps=max_steps)
        import ray

        shards = shard_tasks(tasks, len(self.workers))
        args = {w: (shard, plan, sigma, _worker_sampling(sampling, w), max_steps) for w, shard in enumerate(shards)}
        pending = {self.workers[w].run.remote(self.engines, *a): w for w, a in args.items()}
        parts: dict[int, Any] = {}
        attempts = {w: 0 for w in args}
        deadline = time.monotonic() + self.config.remote_timeout_s
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=max(0.0, deadline - time.monotonic()))
            if not ready:
                raise ClusterError(f"{len(pending)} rollout shard(s) did not finish within {self.config.remote_timeout_s:.0f} s "
                                   "(raise --remote-timeout-s)")
            ref = ready[0]
            w = pending.pop(ref)
            try:
                parts[w] = ray.get(ref, timeout=self.config.remote_timeout_s)
            except ray.exceptions.RayActorError as exc:
                attempts[w] += 1
                if attempts[w] > self.config.actor_retries:
                    raise ClusterError(f"rollout worker {w} (or an engine it called) died {attempts[w]} time(s) during its shard "
                                       f"of {len(args[w][0])} task(s): {_first_line(exc)}") from None
                self.log(f"rollout worker {w} (or an engine it called) died: restarting it and retrying its shard "
                         f"(attempt {attempts[w] + 1}); the lost attempt's samples are dropped")
                self.retries += 1
                self._heal()
                pending[self.workers[w].run.remote(self.engines, *args[w])] = w
                deadline = time.monotonic() + self.config.remote_timeout_s
                continue
            except ray.exceptions.RayTaskError as exc:
                if isinstance(exc.cause, ClusterError):  # a worker's own (its engine pool's timeout): its text, not
                    raise exc.cause from None           # Ray's wrapper, whose text is the remote traceback
                raise
            if on_wave is not None:
                done = [parts[k] for k in sorted(parts)]
                on_wave({"waves": max(p.stats["waves"] for p in done), "completions": sum(p.stats["completions"] for p in done),
                         "episodes": sum(len(p.episodes) for p in done), "live": 0})
        merged = merge_rollouts([parts[w] for w in sorted(parts)])
        merged.stats["shard_retries"] = float(sum(attempts.values()))
        return merged

    def _engine_died(self, index: int, deaths: int, exc: BaseException) -> None:
        """An engine actor died during a call of the driver's own rollout or evaluation: restart it (the call is then
        sent again), or fail the step once `actor_retries` restarts did not help."""
        if deaths > self.config.actor_retries:
            raise ClusterError(f"engine actor {index} died {deaths} time(s) during one call: {_first_line(exc)}")
        self.log(f"engine actor {index} died: restarting it and sending its requests again (attempt {deaths + 1})")
        self.retries += 1
        self._heal()

    def _heal(self) -> None:
        """Replace every actor that died (engines get the current adapters); busy ones are left running."""
        import ray

        replaced = False
        for i in self._dead(self.engines):
            ray.kill(self.engines[i])
            self.engines[i] = self._new_engine(i)
            replaced = True
        for w in self._dead(self.workers):
            ray.kill(self.workers[w])
            self.workers[w] = self._new_worker(w)
        if replaced:
            self.engine.engines = list(self.engines)
            if self.published:  # a new engine starts from the initial adapters: it gets all of them (live ones ignore it)
                self._push(self.version, self.published)

    def _dead(self, actors: list[Any]) -> list[int]:
        """The indices of `actors` that died (a dead actor's ping fails at once). An actor runs one call at a time,
        so a ping waits behind the shard or batch it is busy with: one that has not answered within `HEAL_PING_S`
        is alive. Replacing it, as a timed-out ping once did, killed healthy workers and engines mid-shard and
        reloaded their models; one that hangs is left to the remote timeout of the calls waiting on it."""
        import ray

        if not actors:
            return []
        refs = [actor.ping.remote() for actor in actors]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=min(HEAL_PING_S, self.config.remote_timeout_s))
        answered = set(ready)
        dead = []
        for i, ref in enumerate(refs):
            if ref not in answered:
                continue  # busy
            try:
                ray.get(ref, timeout=0)
            except ray.exceptions.RayActorError:
                dead.append(i)
        return dead

    # ------------------------------------------------------------------ update
    def recompute(self, samples: list[Any], temperature: float) -> None:
        """Old log-probs from the trainer model, sharded by sample over the ranks."""
        if not self.ranks:
            from llm_marl.trainer import recompute_old_logprobs

            recompute_old_logprobs(self.policy, samples, temperature)
            return
        parts = [samples[r::len(self.ranks)] for r in range(len(self.ranks))]
        out = self._wait([rank.recompute.remote(part, temperature) for rank, part in zip(self.ranks, parts)],
                         "trainer ranks to recompute log-probs", fail="update")
        for part, rows in zip(parts, out):
            for s, row in zip(part, rows):
                s.old_logprobs = row

    def update(self, samples: list[Any], optim: Any, loss_config: Any, temperature: float, segment: str,
               rng: np.random.Generator) -> dict[str, float]:
        """The update on T ranks (gradients all-reduced); the driver's policy then holds rank 0's adapters."""
        from llm_marl.update import plan_update

        shards, counts = plan_update(samples, optim, loss_config, segment, rng, ranks=len(self.ranks))
        out = self._wait([rank.update.remote(part, optim, loss_config, temperature, segment) for rank, part in zip(self.ranks, shards)],
                         "trainer ranks to update", fail="update")
        adapters = self._wait([self.ranks[0].adapters.remote()], "rank 0's adapters", fail="update")[0]
        load_adapter_tensors(self.policy, adapters)
        return {**counts, **out[0]}

    # ------------------------------------------------------------------ publication
    def publish(self) -> float:
        """The driver's adapters whose weights changed since they were last published (`changed_adapters`) to every
        engine actor, as version v+1; returns the seconds it took. With none changed (a step that took no optimiser
        step) nothing is sent: the engines keep serving what they have (vLLM: its LoRA ids and prefix cache)."""
        t0 = time.perf_counter()
        if self.engines and getattr(self.policy, "adapters", None):  # else no adapters to serve (a factory that needs none)
            weights = adapter_tensors(self.policy)
            changed = {name: weights[name] for name in changed_adapters(weights, self.published)}
            if changed:
                self.version += 1
                self._push(self.version, changed)
                self.published.update(changed)
                for name in changed:
                    self.adapter_versions[name] = self.adapter_versions.get(name, 0) + 1
        self.publish_s = time.perf_counter() - t0
        return self.publish_s

    def _push(self, version: int, adapters: dict[str, dict[str, Any]]) -> None:
        import ray

        ref = ray.put(adapters)  # one copy in the object store, fetched by every engine
        self._wait([e.load_adapters.remote(version, ref) for e in self.engines], f"engine actors to load adapters v{version}",
                   fail="publish")

    def engine_stats(self) -> list[dict[str, Any]]:
        return self._wait([e.stats.remote() for e in self.engines], "engine stats")

    # ------------------------------------------------------------------ helpers
    def _wait(self, refs: list[Any], what: str, fail: str = "start") -> list[Any]:
        import ray

        try:
            return ray.get(refs, timeout=self.config.remote_timeout_s)
        except ray.exceptions.GetTimeoutError:
            raise ClusterError(f"timed out after {self.config.remote_timeout_s:.0f} s waiting for {what} "
                               "(raise --remote-timeout-s, or check `ray status` for missing resources)") from None
        except ray.exceptions.RayActorError as exc:
            raise ClusterError(f"an actor died while waiting for {what} ({fail}): {_first_line(exc)}") from None


def _worker_sampling(sampling: Any, worker: int) -> Any:
    """Worker w samples with a seed derived from (seed, w): reproducible for a fixed number of workers."""
    if sampling.seed is None:
        return sampling
    seed = int(np.random.SeedSequence([int(sampling.seed), worker]).generate_state(1)[0])
    return dataclasses.replace(sampling, seed=seed)


def _first_line(exc: BaseException) -> str:
    """The first line of a remote error and, when there is one, the last line of its remote traceback (the cause)."""
    text = [line for line in str(exc).strip().splitlines() if line.strip()]
    if not text:
        return type(exc).__name__
    first = text[0][:300]
    cause = next((line.strip() for line in reversed(text) if not line.startswith(" ") and ("Error" in line or "Exception" in line)), "")
    return f"{first} ({cause[:300]})" if cause and cause != text[0] else first
