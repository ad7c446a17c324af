"""Scale-out on a local Ray cluster (num_cpus=2, fractional actors): llm_marl.distributed.

What it must show: a sharded rollout equals the in-process rollout sample for sample; a 2-rank gloo
update with unequal shards gives one process's adapter weights; a published adapter changes what
the engine actors sample; the sandbox works inside a worker actor; a killed worker is retried
without counting a sample twice, or the step fails with a clear message.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import sys
import time
import zlib
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import torch

from llm_marl.distributed import ClusterConfig, ClusterError, merge_rollouts, shard_tasks
from llm_marl.distributed.cluster import local_ray_kwargs
from llm_marl.distributed.pool import RayEnginePool
from llm_marl.engines.base import GenerationRequest, SamplingParams
from llm_marl.engines.scripted import ScriptedEngine
from llm_marl.rollout import RequestTag, make_tasks, rollout
from tests.support.update_samples import adapter_weights, synthetic_samples, tiny_policy

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install -e '.[ray]')")
pytestmark = [pytest.mark.distributed, pytest.mark.timeout(240)]

CPU = 0.1  # actors of these tests and of the README command (0.25 each) fit in num_cpus=2 together


@pytest.fixture(scope="module")
def local_ray():
    import sys

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # actors cannot import this test module by name
    ray.init(**local_ray_kwargs(num_cpus=2), runtime_env={"env_vars": {"PYTHONPATH": os.environ.get("PYTHONPATH", ""), "OMP_NUM_THREADS": "1"}})
    yield
    ray.shutdown()


# ---------------------------------------------------------------------------- scripted engines
def plan_path_reply(request: GenerationRequest, k: int) -> str:
    """A deterministic move from the prompt and the candidate index (no RNG, so any process agrees)."""
    text = request.messages[-1]["content"]
    moves = ["[D,R]", "[R,D]", "[U]", "[L,L]", "[R]", "[D]"][(zlib.crc32(text.encode()) + k) % 6]
    if getattr(request.tag, "agent", "") == "planner":
        return f"#### {moves}"
    return f"```python\nprint('{moves}')\n```"


def scripted_plan_path() -> ScriptedEngine:
    return ScriptedEngine(plan_path_reply)


def at_grpo_plan():
    from llm_marl.algorithms import get

    algorithm = get("at-grpo")
    return algorithm, algorithm.config_cls(K=2)


def record(out) -> list[tuple]:
    """Every sample's content, credit and advantage, in a canonical order.

    Sample and decision ids are positions in the batch: the merge numbers them shard by shard, while
    one process numbers them wave by wave across all tasks, so they are compared through the
    episodes' paths instead (`paths`)."""
    rows = [(s.task_id, s.episode_id, s.step, s.candidate, s.role, s.turn, s.text, s.reward, s.selected, s.trainable,
             s.group_key, s.credit, s.advantage, tuple(s.response_ids)) for s in out.samples]
    return sorted(rows, key=repr)


def paths(out) -> list[tuple]:
    """Each episode with the samples along its path, and each decision's candidates, by content."""
    key = lambda s: (s.task_id, s.episode_id, s.step, s.candidate, s.role, s.text)  # noqa: E731
    episodes = sorted((ep.episode_id, tuple(key(out.samples[i]) for i in ep.sample_ids), tuple(sorted(ep.returns.items())))
                      for ep in out.episodes)
    decisions: dict[int, list] = {}
    for s in out.samples:
        decisions.setdefault(s.decision_id, []).append(key(s))
    return [episodes, sorted(tuple(v) for v in decisions.values())]


PLAN_PATH = {"height": 4, "width": 4, "wall_density": 0.15, "min_path_length": 2, "max_path_length": 4, "max_turns": 2}


@pytest.fixture(scope="module")
def scripted_cluster(local_ray):
    from llm_marl.distributed.cluster import ClusterRun

    config = ClusterConfig(engines=2, rollout_workers=2, cpus_per_actor=CPU, remote_timeout_s=120)
    with ClusterRun(config, None, engine_factory=scripted_plan_path, log=lambda m: None) as scale:
        yield scale


# ---------------------------------------------------------------------------- pure parts
def test_shards_never_split_a_task_and_merge_renumbers():
    tasks = make_tasks("plan_path", seeds=range(5), env_kwargs=PLAN_PATH)
    shards = shard_tasks(tasks, 2)
    assert [len(s) for s in shards] == [3, 2] and [t for s in shards for t in s] == tasks
    assert shard_tasks(tasks[:1], 3) == [tasks[:1]]
    algorithm, cfg = at_grpo_plan()
    parts = [rollout(s, algorithm.sampling_plan(cfg), scripted_plan_path(), sigma={"tool": "a", "planner": "a"}) for s in shards]
    merged = merge_rollouts(parts)
    assert [s.sample_id for s in merged.samples] == list(range(len(merged.samples)))
    for ep in merged.episodes:  # episodes still point at their own samples
        assert all(merged.samples[i].episode_id == ep.episode_id or merged.samples[i].task_id == ep.task_id for i in ep.sample_ids)
    assert len({s.decision_id for s in merged.samples}) == sum(len({s.decision_id for s in p.samples}) for p in parts)
    assert merged.stats["samples"] == len(merged.samples)
    # The shards ran side by side: the step waited for the slowest, whose parts the step-time breakdown shows (the
    # merge had none, so with rollout workers every second of the rollout was `other`).
    slowest = max(parts, key=lambda p: p.timings["rollout_s"])
    assert merged.timings == slowest.timings and merged.timings["env_s"] > 0


def test_relative_dataset_paths_are_made_absolute_for_workers_on_other_nodes(tmp_path):
    """A rollout worker on another node (or with another cwd) resolved a relative dataset= against its own cwd."""
    from llm_marl.distributed.config import absolute_if_here, node_independent_env_args

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.jsonl").write_text("{}\n")
    given = {"dataset": "data/train.jsonl", "problems": "openai/openai_humaneval", "mode": "mas", "max_turns": 2}
    out = node_independent_env_args(given, cwd=tmp_path)
    assert out == {**given, "dataset": str(tmp_path.resolve() / "data" / "train.jsonl")}  # a Hub id and the rest as given
    assert node_independent_env_args(out, cwd="/") == out and given["dataset"] == "data/train.jsonl"
    assert absolute_if_here("data", cwd=tmp_path) == str(tmp_path.resolve() / "data")  # a model folder, as the actors get it
    assert absolute_if_here("tiny-random", cwd=tmp_path) == "tiny-random"


def test_api_keys_named_for_the_actors_are_those_set_here():
    from llm_marl.distributed.config import forwarded_env

    environ = {"OPENAI_API_KEY": "sk-here", "HF_TOKEN": "", "JUDGE_KEY": "sk-judge", "HOME": "/home/x"}
    assert forwarded_env({}, environ) == {"OPENAI_API_KEY": "sk-here"}
    assert forwarded_env({"judge": {"api_key_env": "JUDGE_KEY"}}, environ) == {"OPENAI_API_KEY": "sk-here", "JUDGE_KEY": "sk-judge"}


def test_a_trainer_process_on_a_gpu_ray_hands_out_is_warned_of():
    """Ray does not count the trainer process's GPU: it placed engine actors on the GPU the trainer process's model
    was on (cuda:0), and nothing said so."""
    from llm_marl.distributed.cluster import shared_gpu_warning

    engines_on_gpus = ClusterConfig(engines=2, gpus_per_engine=1)
    said = shared_gpu_warning("cuda:0", engines_on_gpus, node_gpus=4)
    assert "holds its model on cuda:0" in said and "CUDA_VISIBLE_DEVICES=1,2,3 ray start --head" in said
    ranks_on_gpus = shared_gpu_warning("cuda", ClusterConfig(trainer_ranks=2, gpus_per_trainer_rank=1), node_gpus=8)
    assert "pass --device cpu" in ranks_on_gpus
    assert shared_gpu_warning("cuda", ClusterConfig(rollout_workers=2, gpus_per_engine=0.5), node_gpus=1)  # the implied engine
    for device, config, gpus in [("cpu", engines_on_gpus, 4),  # the trainer process on the CPU
                                 ("cuda", engines_on_gpus, 0),  # no GPU of its node is Ray's
                                 ("cuda", ClusterConfig(engines=2), 4),  # CPU actors only
                                 ("cuda", ClusterConfig(gpus_per_trainer_rank=1), 4)]:  # one rank: the update is in process
        assert shared_gpu_warning(device, config, node_gpus=gpus) is None, (device, config, gpus)


def test_a_cluster_start_says_when_the_trainer_process_may_share_a_gpu(local_ray, monkeypatch):
    import types

    from llm_marl.distributed import cluster

    monkeypatch.setattr(cluster, "driver_node_gpus", lambda: 2.0)  # as on a node with 2 GPUs
    monkeypatch.setattr(cluster.ClusterRun, "_start_actors", lambda self: None)
    said = []
    cluster.ClusterRun(ClusterConfig(engines=1, gpus_per_engine=1), types.SimpleNamespace(device="cuda", adapters=[]),
                       log=said.append).start()
    assert len(said) == 1 and "holds its model on cuda" in said[0]
    monkeypatch.undo()
    assert cluster.driver_node_gpus() == ray.cluster_resources().get("GPU", 0.0)  # the one node of this instance


def test_pool_routes_a_task_to_one_engine_least_loaded_first():
    pool = RayEnginePool(["e0", "e1"])
    tag = lambda task: RequestTag(0, task, task, "tool", 0)  # noqa: E731
    first = [pool.engine_for(GenerationRequest([], tag=tag(t))) for t in ("a", "b", "c")]
    assert first == [0, 1, 0]
    assert [pool.engine_for(GenerationRequest([], tag=tag(t))) for t in ("b", "a", "b", "c")] == [1, 0, 1, 0]
    assert pool.engine_for(GenerationRequest([], tag=tag("d"))) == 1  # e1 holds fewer tasks


class InProcessActor:
    """An engine behind the actor-handle interface the pool calls (`generate.remote` gives an object ref)."""

    def __init__(self, engine):
        from types import SimpleNamespace

        self.generate = SimpleNamespace(remote=lambda requests, sampling: ray.put(engine.generate(requests, sampling)))


def test_pool_engines_sample_with_seeds_of_their_own(local_ray):
    """Every engine got the call's one seed: two tasks with the same prompt, on two engines, drew the same reply."""
    from llm_marl.engines.hf import HFEngine

    engine = HFEngine(tiny_policy("shared"))
    requests = [GenerationRequest([{"role": "user", "content": "Say something about cats."}], adapter="shared", n=1,
                                  tag=RequestTag(i, f"task{i}", f"task{i}", "tool", 0)) for i in range(2)]
    sampling = SamplingParams(temperature=1.0, max_new_tokens=12, seed=123)
    pool = RayEnginePool([InProcessActor(engine), InProcessActor(engine)])
    replies = [r.completions[0].token_ids for r in pool.generate(requests, sampling)]
    assert [pool.engine_for(r) for r in requests] == [0, 1]
    assert replies[0] != replies[1]
    assert replies == [r.completions[0].token_ids for r in pool.generate(requests, sampling)]  # still reproducible
    one = RayEnginePool([InProcessActor(engine)])  # one engine: the call's own seed, as in the trainer process
    assert [r.completions[0].token_ids for r in one.generate(requests, sampling)] == \
        [r.completions[0].token_ids for r in engine.generate(requests, sampling)]


# ---------------------------------------------------------------------------- sharded rollout
def test_sharded_rollout_equals_in_process_sample_for_sample(scripted_cluster):
    from llm_marl.advantage import AdvantageConfig
    from llm_marl.algorithms import assign_advantages

    algorithm, cfg = at_grpo_plan()
    tasks = make_tasks("plan_path", seeds=range(6), env_kwargs=PLAN_PATH)
    sigma = {"tool": "tool", "planner": "planner"}
    sampling = SamplingParams(temperature=1.0, max_new_tokens=8, seed=3)
    local = rollout(tasks, algorithm.sampling_plan(cfg), scripted_plan_path(), sigma=sigma, sampling=sampling)
    sharded = scripted_cluster.rollout(tasks, algorithm.sampling_plan(cfg), sigma, sampling)
    for out in (local, sharded):
        assign_advantages(out, algorithm, cfg, AdvantageConfig())
    assert len(local.samples) > 2 * len(tasks)
    assert record(sharded) == record(local)
    assert paths(sharded) == paths(local)
    assert any(s.advantage != 0 for s in sharded.samples)
    served = [s["served"] for s in scripted_cluster.engine_stats()]
    assert all(n > 0 for n in served), served  # both engines took requests
    assert sharded.timings["generate_s"] > 0 and sharded.timings["env_s"] > 0  # the workers' timings reach the driver


# ---------------------------------------------------------------------------- faults
_DIE_FLAG = "LLM_MARL_TEST_DIE_FLAG"


def make_env_that_kills_its_process_once(flag: str, **kwargs):
    """The first call (in whichever process) kills that process mid-shard; later calls build the env."""
    from llm_marl_envs.registry import make_raw

    path = Path(flag)
    if not path.exists():
        path.write_text("died once")
        os._exit(17)
    return make_raw("plan_path", **kwargs)


def test_killed_worker_is_restarted_and_its_shard_retried_once(scripted_cluster, tmp_path):
    algorithm, cfg = at_grpo_plan()
    tasks = make_tasks("plan_path", seeds=range(4), env_kwargs=PLAN_PATH)
    flag = tmp_path / "died"
    killer = dataclasses.replace(tasks[3], make_env=partial(make_env_that_kills_its_process_once, str(flag), **PLAN_PATH))
    sigma = {"tool": "tool", "planner": "tool"}
    local = rollout(tasks, algorithm.sampling_plan(cfg), scripted_plan_path(), sigma=sigma)
    old_pid = ray.get(scripted_cluster.workers[1].ping.remote(), timeout=60)
    out = scripted_cluster.rollout(tasks[:3] + [killer], algorithm.sampling_plan(cfg), sigma, SamplingParams())
    assert flag.exists()  # the worker of the last shard did die
    assert out.stats["shard_retries"] == 1
    assert ray.get(scripted_cluster.workers[1].ping.remote(), timeout=60) != old_pid  # a new worker process
    from llm_marl.advantage import AdvantageConfig
    from llm_marl.algorithms import assign_advantages

    for r in (out, local):
        assign_advantages(r, algorithm, cfg, AdvantageConfig())
    assert record(out) == record(local) and paths(out) == paths(local)  # nothing lost, nothing counted twice
    assert len({(s.episode_id, s.decision_id, s.candidate) for s in out.samples}) == len(out.samples)


def test_worker_dying_with_no_retries_left_fails_the_step_clearly(scripted_cluster, tmp_path):
    algorithm, cfg = at_grpo_plan()
    tasks = make_tasks("plan_path", seeds=range(2), env_kwargs=PLAN_PATH)
    killer = dataclasses.replace(tasks[1], make_env=partial(make_env_that_kills_its_process_once, str(tmp_path / "f"), **PLAN_PATH))
    scripted_cluster.config.actor_retries = 0
    try:
        with pytest.raises(ClusterError, match=r"rollout worker 1 .*died 1 time"):
            scripted_cluster.rollout([tasks[0], killer], algorithm.sampling_plan(cfg), {"tool": "a", "planner": "a"}, SamplingParams())
    finally:
        scripted_cluster.config.actor_retries = 1
    scripted_cluster._heal()  # the next step gets a live worker again
    assert len(scripted_cluster.rollout(tasks, algorithm.sampling_plan(cfg), {"tool": "a", "planner": "a"}, SamplingParams()).samples) > 0


def make_env_that_fails_as_a_cluster(**kwargs):
    raise ClusterError("engine actor 0 did not answer 3 requests within 5 s (raise --remote-timeout-s, or add engines)")


def test_a_cluster_error_inside_a_worker_reaches_the_driver_as_itself(scripted_cluster):
    """Ray wraps a worker's exception in a RayTaskError subclass whose text is the remote traceback; the trainer rebuilt
    that class with its resume command, and the message came out as Ray's traceback without it."""
    algorithm, cfg = at_grpo_plan()
    task = dataclasses.replace(make_tasks("plan_path", seeds=[0], env_kwargs=PLAN_PATH)[0], make_env=make_env_that_fails_as_a_cluster)
    with pytest.raises(ClusterError) as caught:
        scripted_cluster.rollout([task], algorithm.sampling_plan(cfg), {"tool": "a", "planner": "a"}, SamplingParams())
    assert type(caught.value) is ClusterError and str(caught.value).startswith("engine actor 0 did not answer 3 requests")


def actor_dies(actor, within_s: float = 30.0) -> bool:
    """Whether `actor` is dead within `within_s` seconds: ray.kill is asynchronous, so a ping sent at once may still
    be answered."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            ray.get(actor.ping.remote(), timeout=within_s)
        except ray.exceptions.RayActorError:
            return True
        time.sleep(0.2)
    return False


def make_env_after(seconds: float, **kwargs):
    """The env of a task whose shard keeps its worker busy for `seconds` first."""
    import time

    from llm_marl_envs.registry import make_raw

    time.sleep(seconds)
    return make_raw("plan_path", **kwargs)


def test_heal_replaces_a_dead_worker_and_leaves_a_busy_one_running(scripted_cluster):
    """A ping waits behind the shard an actor is busy with: a worker whose shard outlasted the heal's ping was
    taken for dead, killed mid-shard and its shard run again (with --remote-timeout-s 600, any shard over 60 s)."""
    algorithm, cfg = at_grpo_plan()
    slow = dataclasses.replace(make_tasks("plan_path", seeds=[0], env_kwargs=PLAN_PATH)[0],
                               make_env=partial(make_env_after, 3.0, **PLAN_PATH))
    busy, doomed = scripted_cluster.workers
    running = busy.run.remote(scripted_cluster.engines, [slow], algorithm.sampling_plan(cfg), {"tool": "a", "planner": "a"},
                              SamplingParams())
    ray.kill(doomed)
    assert actor_dies(doomed)  # as when a heal follows a death the driver saw
    timeout = scripted_cluster.config.remote_timeout_s
    scripted_cluster.config.remote_timeout_s = 1.0  # the heal's ping waits this long, less than the busy shard takes
    try:
        scripted_cluster._heal()
    finally:
        scripted_cluster.config.remote_timeout_s = timeout
    assert scripted_cluster.workers[0] is busy and scripted_cluster.workers[1] is not doomed
    assert len(ray.get(running, timeout=60).samples) > 0  # the busy worker finished its shard
    ray.get([w.ping.remote() for w in scripted_cluster.workers], timeout=60)


def test_an_engine_dying_under_the_drivers_own_rollout_is_restarted_or_fails_the_step_clearly(scripted_cluster):
    """--engines without --rollout-workers (and the held-out evaluation) sample through the driver's pool: a dead
    engine ended the step with Ray's ActorDiedError, no retry and no resume command."""
    algorithm, cfg = at_grpo_plan()
    tasks = make_tasks("plan_path", seeds=range(4), env_kwargs=PLAN_PATH)
    sigma = {"tool": "a", "planner": "a"}
    local = rollout(tasks, algorithm.sampling_plan(cfg), scripted_plan_path(), sigma=sigma)
    dead = scripted_cluster.engines[0]
    ray.kill(dead)
    assert actor_dies(dead)
    out = rollout(tasks, algorithm.sampling_plan(cfg), scripted_cluster.engine, sigma=sigma)
    assert scripted_cluster.engines[0] is not dead and scripted_cluster.engine.engines == scripted_cluster.engines
    assert record(out) == record(local) and paths(out) == paths(local)
    scripted_cluster.config.actor_retries = 0
    try:
        ray.kill(scripted_cluster.engines[1])
        assert actor_dies(scripted_cluster.engines[1])
        with pytest.raises(ClusterError, match=r"engine actor 1 died 1 time"):
            rollout(tasks, algorithm.sampling_plan(cfg), scripted_cluster.engine, sigma=sigma)
    finally:
        scripted_cluster.config.actor_retries = 1
    scripted_cluster._heal()  # the next test gets live engines again


def environment_reply(request: GenerationRequest, k: int) -> str:
    return f"{os.environ.get('OPENAI_API_KEY', 'unset')} {os.environ.get('OMP_NUM_THREADS', 'unset')}"


def scripted_environment() -> ScriptedEngine:
    return ScriptedEngine(environment_reply)


def test_api_keys_reach_actors_that_did_not_start_with_them(local_ray, monkeypatch):
    """An actor runs with its node's environment: on another node (here: a Ray instance started before the key was
    set) the API key of the trainer process was missing. ClusterRun sets the forwarded variables through runtime_env,
    and says which, never their values."""
    from llm_marl.distributed.cluster import ClusterRun
    from llm_marl.distributed.config import forwarded_env

    monkeypatch.setenv("OPENAI_API_KEY", "sk-forwarded-for-this-test")
    said = []
    with ClusterRun(ClusterConfig(engines=1, cpus_per_actor=CPU, remote_timeout_s=120), None, engine_factory=scripted_environment,
                    log=said.append, env_vars=forwarded_env({})) as scale:
        [result] = scale.engine.generate([GenerationRequest([{"role": "user", "content": "key?"}])], SamplingParams())
    key, threads = result.completions[0].text.split(" ")
    assert key == "sk-forwarded-for-this-test"
    assert threads == "1"  # the job's own runtime_env variables (local_ray's OMP_NUM_THREADS) still apply
    assert "OPENAI_API_KEY set in each" in said[-1] and "sk-forwarded" not in " ".join(said)


class StandInRank:
    """A trainer rank's `close` and `ping`, and a call that keeps it busy (as an all-reduce a dead rank never joins)."""

    def close(self) -> None:
        pass

    def ping(self) -> int:
        return os.getpid()

    def busy(self, seconds: float) -> None:
        time.sleep(seconds)


def test_close_does_not_wait_on_a_survivor_once_a_rank_died(local_ray):
    """close asked each rank in turn to leave its world, waiting 30 s for each: a survivor stuck in a collective that
    the dead rank never joins (its close queued behind it) held close for the full 30 s."""
    from llm_marl.distributed.cluster import ClusterRun

    scale = ClusterRun(ClusterConfig(), None, log=lambda m: None).start()  # joins this module's instance
    stuck, dead = [ray.remote(StandInRank).options(num_cpus=CPU).remote() for _ in range(2)]
    ray.get([stuck.ping.remote(), dead.ping.remote()], timeout=60)
    stuck.busy.remote(120)
    ray.kill(dead)
    assert actor_dies(dead)
    scale.ranks = [stuck, dead]
    t0 = time.monotonic()
    scale.close()
    assert time.monotonic() - t0 < 10
    assert actor_dies(stuck)  # and the survivor is stopped


def scripted_engine_once(flag: str) -> ScriptedEngine:
    """The first engine actor to start gets a scripted engine; any other fails to build its engine."""
    os.close(os.open(flag, os.O_CREAT | os.O_EXCL))  # FileExistsError after the first
    return scripted_plan_path()


def test_a_cluster_that_fails_to_start_stops_the_actors_it_started(local_ray, tmp_path):
    """`start` raised (here: an engine actor that cannot build its engine) with the actors it had made still running
    and holding their resources (GPUs, on a cluster), and `with ClusterRun(...)` never reaches `__exit__` then."""
    from llm_marl.distributed.cluster import ClusterRun

    scale = ClusterRun(ClusterConfig(engines=2, cpus_per_actor=CPU, remote_timeout_s=120), None,
                       engine_factory=partial(scripted_engine_once, str(tmp_path / "built")), log=lambda m: None)
    made = []
    new_engine = scale._new_engine
    scale._new_engine = lambda i: made.append(new_engine(i)) or made[-1]
    with pytest.raises(ClusterError, match="engine actors to start"):
        scale.start()
    assert len(made) == 2 and ray.is_initialized()  # the test's own instance stays up
    for engine in made:  # the one that did start is stopped too
        assert actor_dies(engine), "an engine actor of the failed start is still running 30 s after it"


# ---------------------------------------------------------------------------- sandbox in a worker
def math_reply(request: GenerationRequest, k: int) -> str:
    if request.tag.task_id.endswith(("/0", "/2")):
        return "**Code:**\n```python\nprint(sum(range(10)))\n```"
    return "**Code:**\n```python\nimport socket\nsocket.create_connection(('1.1.1.1', 80), timeout=1)\nprint('reached')\n```"


def scripted_math() -> ScriptedEngine:
    return ScriptedEngine(math_reply)


def sandbox_isolation() -> dict:
    from llm_marl_envs.sandbox import default_sandbox

    box = default_sandbox()
    return {"layers": box.isolation(), "ok": box.run("print(sum(range(10)))").stdout.strip(), "pid": os.getpid()}


def test_sandbox_runs_inside_a_worker_actor_with_its_isolation_layers(local_ray):
    from llm_marl.distributed.cluster import ClusterRun
    from llm_marl.rollout import parallel

    tasks = make_tasks("math", seeds=range(4), env_kwargs={"mode": "tool"})
    with ClusterRun(ClusterConfig(engines=1, rollout_workers=2, cpus_per_actor=CPU, remote_timeout_s=120), None,
                    engine_factory=scripted_math, log=lambda m: None) as scale:
        out = scale.rollout(tasks, parallel(1), {"tool": None}, SamplingParams())
        ran = {s.task_id: s.info["local_terms"]["tool"] for s in out.samples}
        assert ran == {"math/train/0": 1, "math/train/1": 0, "math/train/2": 1, "math/train/3": 0}  # no network in the sandbox
        inside = ray.get(ray.remote(num_cpus=CPU)(sandbox_isolation).remote(), timeout=120)
    from llm_marl_envs.sandbox import Sandbox

    with Sandbox(workers=1) as box:
        here = box.isolation()
    assert inside["pid"] != os.getpid() and inside["ok"] == "45"
    assert inside["layers"] == here and any(here.values())  # the same layers as in the driver process


# ---------------------------------------------------------------------------- trainer ranks
def test_two_rank_gloo_update_with_unequal_shards_equals_one_process(local_ray):
    from llm_marl.config import OptimConfig
    from llm_marl.distributed.actors import TrainerSpec
    from llm_marl.distributed.cluster import ClusterRun
    from llm_marl.loss import LossConfig
    from llm_marl.trainer import lr_lambda, update_policy
    from llm_marl.update import plan_update

    torch.manual_seed(0)
    optim = OptimConfig(lr=5e-2, minibatch_size=4, epochs=2, kl_beta=0.0, ratio_level="token", loss_agg="token-mean")
    loss = LossConfig(aggregation="token-mean")
    # float64, so that the only difference left (summation order) is far below the tolerance: Adam divides
    # by the gradient's size, which turns float32 rounding of near-zero gradients into ~1e-5 weight differences.
    single, driver = tiny_policy(dtype="float64"), tiny_policy(dtype="float64")
    samples = synthetic_samples(single.tokenizer, np.random.default_rng(1))
    before = adapter_weights(single)

    optimizers = {a: torch.optim.AdamW(single.trainable_parameters(a), lr=optim.lr, weight_decay=optim.weight_decay) for a in single.adapters}
    expected = update_policy(single, optimizers, copy.deepcopy(samples), optim, loss, 1.0, "sample", np.random.default_rng(7))

    shards, _ = plan_update(samples, optim, loss, "sample", np.random.default_rng(7), ranks=2)
    tokens = [sum(len(s.response_ids) for sh in shards[r] for s in sh.samples) for r in range(2)]
    assert tokens[0] != tokens[1] and any(not sh.samples for sh in shards[1])  # unequal shards, and an empty one

    spec = TrainerSpec("tiny-random", ("tool", "planner"), "per-role", driver.lora, optim, total_steps=1, dtype="float64")
    d_opt = {a: torch.optim.AdamW(driver.trainable_parameters(a), lr=optim.lr, weight_decay=optim.weight_decay) for a in driver.adapters}
    d_sched = {a: torch.optim.lr_scheduler.LambdaLR(o, lr_lambda(optim, 1)) for a, o in d_opt.items()}
    with ClusterRun(ClusterConfig(trainer_ranks=2, cpus_per_actor=CPU, remote_timeout_s=180), driver, trainer=spec,
                    log=lambda m: None) as scale:
        scale.load_trainer_state(d_opt, d_sched)
        got = scale.update(copy.deepcopy(samples), optim, loss, 1.0, "sample", np.random.default_rng(7))
        state = scale.trainer_state()
    after_single, after_ranks = adapter_weights(single), adapter_weights(driver)
    assert max(float((after_single[k] - before[k]).abs().max()) for k in before) > 1e-3  # the update did move the weights
    for k in after_single:
        torch.testing.assert_close(after_ranks[k], after_single[k], atol=1e-9, rtol=1e-9)
    assert got["update/tool/optimizer_steps"] == expected["update/tool/optimizer_steps"] == 6
    assert got["loss/tool/total"] == pytest.approx(expected["loss/tool/total"], abs=1e-5)
    assert got["loss/tool/grad_norm"] == pytest.approx(expected["loss/tool/grad_norm"], rel=1e-4)
    assert set(state["optimizers"]) == {"tool", "planner"}


def test_published_adapter_changes_what_engine_actors_sample(local_ray):
    from llm_marl.distributed.actors import EngineSpec
    from llm_marl.distributed.cluster import ClusterRun
    from llm_marl.engines.hf import HFEngine

    policy = tiny_policy("shared")
    spec = EngineSpec("hf", "tiny-random", ("tool", "planner"), "shared", policy.lora, seed=0)
    requests = [GenerationRequest([{"role": "user", "content": f"Say something about {w}."}], adapter="shared", n=1,
                                  tag=RequestTag(i, f"task{i}", f"task{i}", "tool", 0)) for i, w in enumerate(["cats", "maps", "boxes", "sums"])]
    greedy = SamplingParams(temperature=0.0, max_new_tokens=12)
    with ClusterRun(ClusterConfig(engines=2, cpus_per_actor=CPU, remote_timeout_s=180), policy, engine_factory=spec,
                    log=lambda m: None) as scale:
        texts0 = [r.completions[0].text for r in scale.engine.generate(requests, greedy)]
        with torch.no_grad():
            gen = torch.Generator().manual_seed(5)
            for p in policy.trainable_parameters("shared"):
                p.add_(torch.randn(p.shape, generator=gen) * 0.5)
        seconds = scale.publish()
        texts1 = [r.completions[0].text for r in scale.engine.generate(requests, greedy)]
        stats = scale.engine_stats()
    local = [r.completions[0].text for r in HFEngine(policy).generate(requests, greedy)]
    assert texts1 != texts0
    assert texts1 == local  # every engine actor now samples the published weights
    assert [s["version"] for s in stats] == [2, 2] and all(s["served"] > 0 for s in stats)
    assert seconds > 0


class LoadRecordingEngine(ScriptedEngine):
    """A scripted engine that records the adapters each publication hands it (an engine without a policy set)."""

    def __init__(self):
        super().__init__(plan_path_reply)
        self.loads: list[str] = []

    def load_adapters(self, adapters):
        self.loads.extend(f"{len(self.loads)}:{name}" for name in sorted(adapters))

    def loaded_lora_ids(self):
        return self.loads


def test_only_adapters_whose_weights_changed_are_published(local_ray):
    """Every step published every adapter as a new version, also when none changed (a step that took no optimiser
    step) or for a role whose adapter did not: with vLLM, new LoRA ids and a prefix-cache reset each time."""
    from llm_marl.distributed.cluster import ClusterRun

    policy = tiny_policy("per-role")
    with ClusterRun(ClusterConfig(engines=1, cpus_per_actor=CPU, remote_timeout_s=120), policy, engine_factory=LoadRecordingEngine,
                    log=lambda m: None) as scale:
        scale.publish()  # nothing changed since the start's publication
        with torch.no_grad():
            for p in policy.trainable_parameters("planner"):
                p.add_(0.1)
        scale.publish()
        scale.publish()
        [stats] = scale.engine_stats()
    assert stats["version"] == scale.version == 2
    assert stats["lora_ids"] == sorted(["0:planner", "1:tool", "2:planner"])  # the start's both, then the changed one
    assert scale.adapter_versions == {"tool": 1, "planner": 2}


def test_a_local_cluster_runs_its_actors_at_the_drivers_priority():
    """Ray starts its workers at nice 15 (more than the driver's); the local instance a run starts
    (here in a process of its own, as this module's instance is up) runs them at the driver's."""
    import subprocess
    import sys

    probe = ("import os, ray\n"
             "from llm_marl.distributed import ClusterConfig\n"
             "from llm_marl.distributed.cluster import ClusterRun\n"
             "with ClusterRun(ClusterConfig(), None, log=lambda m: None, num_cpus=1):\n"
             "    print(os.nice(0), ray.get(ray.remote(num_cpus=0.1)(lambda: os.nice(0)).remote()))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    driver, worker = done.stdout.split()
    assert worker == driver, f"a worker at nice {worker}, its driver at {driver}"


LONG_TMPDIR = "per-job-scratch-folder-of-a-batch-system-" * 2  # 82 bytes: more than Ray's sockets leave room for


def test_a_local_cluster_starts_where_tmpdir_is_too_long_for_rays_sockets(tmp_path):
    """Ray puts its sessions under $TMPDIR on Linux; a long one made ray.init fail on a socket path
    ("AF_UNIX path length cannot exceed 107 bytes"). The local instance then starts under /tmp/ray and says so."""
    import subprocess

    long_tmp = tmp_path / LONG_TMPDIR
    long_tmp.mkdir()
    probe = ("import ray\n"
             "from llm_marl.distributed import ClusterConfig\n"
             "from llm_marl.distributed.cluster import ClusterRun\n"
             "with ClusterRun(ClusterConfig(), None, num_cpus=1):\n"
             "    print(ray.get(ray.remote(num_cpus=0.1)(lambda: 'ran').remote()))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300,
                          env={k: v for k, v in os.environ.items() if k != "RAY_TMPDIR"} | {"TMPDIR": str(long_tmp)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Ray's sessions go under /tmp/ray: TMPDIR" in done.stdout and done.stdout.rstrip().endswith("ran")


@pytest.mark.parametrize("long_one", ["TMPDIR", "RAY_TMPDIR"])
def test_rays_temp_root_is_moved_or_refused_only_when_too_long(monkeypatch, long_one):
    monkeypatch.delenv("RAY_TMPDIR", raising=False)
    monkeypatch.setenv("TMPDIR", "/tmp")
    assert "_temp_dir" not in local_ray_kwargs(log=pytest.fail)  # short: Ray's own choice
    monkeypatch.setenv(long_one, "/tmp/" + LONG_TMPDIR)
    if long_one == "RAY_TMPDIR":  # the user's explicit choice: not overridden
        with pytest.raises(ClusterError, match="set RAY_TMPDIR to a shorter folder"):
            local_ray_kwargs()
    elif sys.platform.startswith("linux"):
        said = []
        assert local_ray_kwargs(num_cpus=1, log=said.append)["_temp_dir"] == "/tmp/ray"
        assert len(said) == 1 and "set RAY_TMPDIR" in said[0]


def test_a_run_without_ray_address_joins_the_cluster_ray_address_names(local_ray, monkeypatch):
    """`ray job submit` (and KubeRay) set RAY_ADDRESS for the job's driver: ray.init then joins that cluster and refused
    the local instance's settings ("When connecting to an existing cluster, _system_config must not be provided")."""
    from llm_marl.distributed.cluster import ClusterRun

    calls = []
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kwargs: calls.append(kwargs))
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    said = []
    ClusterRun(ClusterConfig(rollout_workers=0), None, log=said.append).start()
    assert calls[-1]["address"] == "10.0.0.1:6379" and "_system_config" not in calls[-1] and "num_cpus" not in calls[-1]
    assert "RAY_ADDRESS=10.0.0.1:6379" in said[0]
    ClusterRun(ClusterConfig(ray_address="auto"), None, log=said.append).start()  # the flag wins
    assert calls[-1]["address"] == "auto"
    monkeypatch.delenv("RAY_ADDRESS")
    ClusterRun(ClusterConfig(), None, log=said.append, num_cpus=1).start()  # neither: a local instance
    # Its own settings: not those ray.init wrote into the dict of the instance this module started (its spilling folder).
    assert "address" not in calls[-1] and calls[-1]["_system_config"] == {"worker_niceness": 0}

    def refuse(**kwargs):
        raise ConnectionError("Failed to connect")

    monkeypatch.setattr(ray, "init", refuse)
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    with pytest.raises(ClusterError, match=r"RAY_ADDRESS: Failed to connect.*unset RAY_ADDRESS for a local instance"):
        ClusterRun(ClusterConfig(), None, log=said.append).start()


# ---------------------------------------------------------------------------- the README command
def test_readme_local_cluster_train_command_runs(local_ray, tmp_path, capsys):
    """2 rollout workers (1 hf engine actor) and 2 gloo trainer ranks, on the local Ray instance."""
    import json
    import re
    import shlex

    from llm_marl.cli import main

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    command = next(c for c in re.findall(r"^(llm-marl train .*?)(?<!\\)$", readme.replace("\\\n", " "), re.M)
                   if "--rollout-workers 2 --trainer-ranks 2" in c)
    argv = shlex.split(command)[1:] + ["--out-dir", str(tmp_path), "--no-progress"]
    assert main(argv) == 0
    run_dir = Path(json.loads(capsys.readouterr().out.strip().splitlines()[-1])["run_dir"])
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert metrics[-1]["update/shared/optimizer_steps"] >= 1 and "perf/publish_s" in metrics[-1]
    assert metrics[-1]["perf/generate_s"] > 0 and metrics[-1]["perf/env_s"] > 0  # the workers' parts of the step
    config = json.loads((run_dir / "config.json").read_text())
    assert config["cluster"]["rollout_workers"] == 2 and config["cluster"]["trainer_ranks"] == 2
    assert config["cluster"]["engines"] == 0 and ClusterConfig(**config["cluster"]).engine_actors == 1  # saved as given
    latest = (run_dir / "checkpoints" / "LATEST").read_text().strip()
    state = torch.load(run_dir / "checkpoints" / latest / "trainer_state.pt", weights_only=True)
    assert state["optimizers"]["shared"]["state"]  # rank 0's AdamW moments reached the checkpoint
