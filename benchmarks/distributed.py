"""Scale-out on a local Ray cluster: rollout throughput with 1 vs 2 workers, adapter publication time
by adapter size, and one `llm-marl train` run on 2 rollout workers + 2 trainer ranks beside a
single-process run.

    PYTHONPATH=. python benchmarks/distributed.py --write benchmarks.md

Every actor asks for `--cpus-per-actor` logical CPUs; on a 2-core machine the actors share the two
cores, so this measures the machinery (sharding, routing, object store), not a speed-up from more
hardware.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class Sink:
    """Receives published tensors (the transport part of an adapter push, without an engine)."""

    def take(self, adapters: dict) -> int:
        return sum(t.numel() for state in adapters.values() for t in state.values())


def rollout_throughput(tasks_n: int, cpus: float, max_new_tokens: int) -> list[dict]:
    import ray

    from llm_marl.algorithms import get
    from llm_marl.distributed import ClusterConfig
    from llm_marl.distributed.actors import EngineSpec
    from llm_marl.distributed.cluster import ClusterRun
    from llm_marl.engines import make_engine
    from llm_marl.engines.base import SamplingParams
    from llm_marl.policies import LoRAConfig, PolicySet
    from llm_marl.rollout import make_tasks, rollout

    algorithm = get("at-grpo")
    cfg = algorithm.config_cls(K=2)
    roles = ("tool", "planner")
    lora = LoRAConfig(r=8, alpha=16)
    policy = PolicySet.from_pretrained("tiny-random", roles=list(roles), policy="per-role", lora=lora)
    sigma = {r: policy.adapter_for(r) for r in roles}
    sampling = SamplingParams(temperature=1.0, max_new_tokens=max_new_tokens, seed=0)
    env_kwargs = {"height": 4, "width": 4, "wall_density": 0.15, "min_path_length": 2, "max_path_length": 4, "max_turns": 2}
    rows = []

    def timed(run) -> tuple[float, int]:
        run(make_tasks("plan_path", range(1000, 1000 + tasks_n), env_kwargs=env_kwargs))  # warm-up (imports, first forward)
        t0 = time.perf_counter()
        out = run(make_tasks("plan_path", range(tasks_n), env_kwargs=env_kwargs))
        return time.perf_counter() - t0, int(out.stats["completions"])

    engine = make_engine("hf", policy, seed=0)
    seconds, completions = timed(lambda tasks: rollout(tasks, algorithm.sampling_plan(cfg), engine, sigma=sigma, sampling=sampling))
    rows.append({"setup": "in process (no Ray)", "seconds": seconds, "completions": completions})
    spec = EngineSpec("hf", "tiny-random", roles, "per-role", lora, seed=0, threads=1)
    for workers in (1, 2):
        config = ClusterConfig(engines=workers, rollout_workers=workers, cpus_per_actor=cpus, remote_timeout_s=600)
        with ClusterRun(config, policy, engine_factory=spec, log=lambda m: None) as scale:
            seconds, completions = timed(lambda tasks: scale.rollout(tasks, algorithm.sampling_plan(cfg), sigma, sampling))
        rows.append({"setup": f"{workers} worker(s) + {workers} hf engine actor(s)", "seconds": seconds, "completions": completions})
    assert ray.is_initialized()
    return rows


def publication(sizes_mb: list[float], engines: int, cpus: float) -> list[dict]:
    import ray
    import torch

    from llm_marl.distributed import ClusterConfig
    from llm_marl.distributed.actors import EngineSpec
    from llm_marl.distributed.cluster import ClusterRun
    from llm_marl.policies import LoRAConfig, PolicySet

    rows = []
    sinks = [ray.remote(Sink).options(num_cpus=cpus).remote() for _ in range(engines)]
    ray.get([s.take.remote({}) for s in sinks], timeout=300)
    for mb in sizes_mb:
        numel = int(mb * 2**20 / 4)
        adapters = {"tool": {"w": torch.randn(numel // 2)}, "planner": {"w": torch.randn(numel - numel // 2)}}
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            ref = ray.put(adapters)
            ray.get([s.take.remote(ref) for s in sinks], timeout=600)
            times.append(time.perf_counter() - t0)
            del ref
        rows.append({"what": f"{mb:g} MB of fp32 tensors, put once, fetched by {engines} actors", "seconds": min(times)})
    for s in sinks:
        ray.kill(s)
    # The real path: the tiny model's adapters into 2 hf engine actors' policy sets (load + sync_adapters).
    lora = LoRAConfig(r=8, alpha=16)
    policy = PolicySet.from_pretrained("tiny-random", roles=["tool", "planner"], policy="per-role", lora=lora)
    size = sum(p.numel() * p.element_size() for a in policy.adapters for p in policy.trainable_parameters(a)) / 2**20
    spec = EngineSpec("hf", "tiny-random", ("tool", "planner"), "per-role", lora, seed=0, threads=1)
    with ClusterRun(ClusterConfig(engines=engines, cpus_per_actor=cpus), policy, engine_factory=spec, log=lambda m: None) as scale:
        times = [scale.publish() for _ in range(3)]
    rows.append({"what": f"tiny-random's 2 adapters ({size:.2f} MB) into {engines} hf engine actors (ClusterRun.publish)",
                 "seconds": min(times)})
    return rows


def train_pair(steps: int, envs: int, cpus: float) -> dict:
    """`llm-marl train` single-process vs 2 rollout workers + 2 trainer ranks (same seed and settings)."""
    out_dir = Path(os.environ.get("TMPDIR", "/tmp")) / "llm-marl-bench-distributed"
    common = ["-m", "llm_marl.cli", "train", "--algo", "at-grpo", "--env", "plan_path", "--model", "tiny-random",
              "--steps", str(steps), "--envs-per-step", str(envs), "--out-dir", str(out_dir), "--no-progress", "--threads", "1",
              "--kl-beta", "0.01", "--seed", "0"]
    runs = {"single process": [], "2 rollout workers + 2 trainer ranks": ["--rollout-workers", "2", "--trainer-ranks", "2",
                                                                          "--cpus-per-actor", str(cpus)]}
    result = {}
    for name, extra in runs.items():
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, *common, *extra], capture_output=True, text=True, cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"{name} failed:\n{proc.stderr[-3000:]}")
        run_dir = Path(json.loads(proc.stdout.strip().splitlines()[-1])["run_dir"])
        metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        result[name] = {"wall_s": wall, "metrics": metrics}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=16, help="plan_path tasks per rollout (AT-GRPO tree, K=2, 2 turns)")
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--cpus-per-actor", type=float, default=0.25)
    parser.add_argument("--sizes-mb", default="1,16,70,175", help="adapter sizes to publish (70/175 MB: Qwen3-1.7B/8B r=16 fp32)")
    parser.add_argument("--train-steps", type=int, default=2)
    parser.add_argument("--train-envs", type=int, default=4)
    parser.add_argument("--write", default=None, help="write the section into this markdown file")
    args = parser.parse_args()

    import ray

    from llm_marl.distributed.cluster import local_ray_kwargs

    ray.init(**local_ray_kwargs(num_cpus=2), runtime_env={"env_vars": {"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}})
    try:
        throughput = rollout_throughput(args.tasks, args.cpus_per_actor, args.max_new_tokens)
        publish = publication([float(x) for x in args.sizes_mb.split(",")], 2, args.cpus_per_actor)
    finally:
        ray.shutdown()
    pair = train_pair(args.train_steps, args.train_envs, args.cpus_per_actor)

    lines = [f"Local Ray cluster, `num_cpus=2`, actors at {args.cpus_per_actor} CPU, `tiny-random` (hf engine), "
             f"AT-GRPO tree K=2 on {args.tasks} plan_path tasks (4x4, 2 turns), {args.max_new_tokens} new tokens; "
             "the second of two rollouts is timed (the first imports and warms up). The machine was shared "
             f"(load average {os.getloadavg()[0]:.1f} at the end).", "",
             "| rollout | seconds | completions | completions/s |", "|---|---|---|---|"]
    for row in throughput:
        lines.append(f"| {row['setup']} | {row['seconds']:.2f} | {row['completions']} | {row['completions'] / row['seconds']:.1f} |")
    lines += ["", "What limits it here: two cores for the driver, the engine actors and the workers together; each "
              "hf engine decodes on one thread, and the sharded rollout pays one object-store round trip per wave and "
              "engine. More workers only help when engines have hardware of their own (GPUs, or more cores).", "",
              "| adapter publication | seconds (best of 3) |", "|---|---|"]
    for row in publish:
        lines.append(f"| {row['what']} | {row['seconds']:.3f} |")
    lines += ["", f"`llm-marl train --algo at-grpo --env plan_path --model tiny-random --steps {args.train_steps} "
              f"--envs-per-step {args.train_envs} --kl-beta 0.01` (tiny-random earns no reward and its adapters start equal to the base, so the KL term is 0 too: these runs exercise the machinery with zero gradients; that T ranks compute one process's update is tested with constructed advantages in tests/test_distributed.py), alone and with `--rollout-workers 2 --trainer-ranks 2 "
              f"--cpus-per-actor {args.cpus_per_actor}` (a local cluster). Worker w samples with a seed from (seed, w), "
              "so the two runs draw different samples; their metrics are comparable, not equal.", "",
              "| run | step | reward/success_rate | reward/reward/tool | reward/reward/planner | loss/shared/total | "
              "perf/rollout_s | perf/update_s | perf/publish_s | wall s (whole command) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, res in pair.items():
        for m in res["metrics"]:
            cell = lambda k: f"{m[k]:.3f}" if k in m else "-"  # noqa: E731
            lines.append(f"| {name} | {m['step']} | {cell('reward/success_rate')} | {cell('reward/reward/tool')} | "
                         f"{cell('reward/reward/planner')} | {cell('loss/shared/total')} | {cell('perf/rollout_s')} | "
                         f"{cell('perf/update_s')} | {cell('perf/publish_s')} | {res['wall_s']:.0f} |")
    lines += ["", "Not measured here: CUDA engines (vLLM) and NCCL trainer ranks; no GPU was available."]
    body = "\n".join(lines)
    print(body)
    if args.write:
        sys.path.insert(0, str(ROOT))
        from benchmarks._report import write_section

        write_section(args.write, "distributed", "Scale-out on Ray (local cluster)",
                      "PYTHONPATH=. python benchmarks/distributed.py --write benchmarks.md", body)


if __name__ == "__main__":
    main()
