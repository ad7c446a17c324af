"""The training loop shared by every algorithm.

    rollout (the algorithm's sampling plan, one engine call per wave)
      -> credit, group key, group-relative advantage (the algorithm's three functions)
      -> per-adapter batches (AT-GRPO Eq. 2) -> clipped surrogate (llm_marl.loss), one AdamW per adapter
      -> push adapters to the engine -> metrics, trajectories, checkpoint

Every random choice of step s derives from (seed, s): the task instances, the sampling seed of each
wave and the minibatch order. A run killed at any point and resumed from its last checkpoint
therefore repeats exactly the steps it lost; with `--deterministic` (deterministic torch kernels)
its adapters and metrics equal those of an uninterrupted run.

Deviations (numbered, as the algorithms' own are):
1. Samples with advantage 0 are left out of the update when the KL weight is 0: their policy
   gradient is exactly zero, and on a CPU the forward/backward pass is the dominant cost. The
   token-mean normaliser then counts informative tokens only (as DAPO's dynamic sampling does).
   A sample is left out only with its whole loss segment (all of the segment's advantages 0): its
   tokens count in the segment's seq-mean normaliser and its sequence-level ratio.
2. The learning-rate schedule advances once per training step, not per minibatch, so it does not
   depend on how many samples a step happened to produce.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import shlex
import shutil
import time
import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from llm_marl.advantage import AdvantageConfig
from llm_marl.algorithms import Algorithm, assign_advantages, listed, nonfinite_steps
from llm_marl.algorithms import get as get_algorithm
from llm_marl.config import ModelConfig, OptimConfig, RunConfig, SamplingConfig, quick_env_args
from llm_marl.credit.dpo import dpo_loss
from llm_marl.credit.team import CreditConfig, assign_shapley, preference_pairs, shapley_plan
from llm_marl.distributed.config import ClusterConfig, ClusterError, absolute_if_here, forwarded_env, node_independent_env_args
from llm_marl.engines.base import SamplingParams
from llm_marl.interrupts import interrupts_deferred, sigterm_interrupts, stopped_by
from llm_marl.loss import LossConfig
from llm_marl.rollout import Rollout, Sample, batches_by_adapter, make_tasks, rollout
from llm_marl.runs import CheckpointMismatch, RunDir, RunDirError, write_error
from llm_marl.update import apply_update, clipped_step, loss_units, minibatches, plan_update  # noqa: F401 (loss_units, minibatches: re-exported)
from llm_marl.tracking import open_tracker
from llm_marl.signal import postfix, run_counts, signal_metrics, step_line, step_messages, wave_progress
from llm_marl.step_time import PARTS, step_time_metrics, step_time_totals

TRAINER_STATE = "trainer_state.pt"


@dataclass
class TrainConfig:
    """Everything a run needs; saved resolved in `config.json` and read back by `--resume`."""

    model: ModelConfig = field(default_factory=ModelConfig)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    run: RunConfig = field(default_factory=RunConfig)
    algo: Any = None
    """The algorithm's own Config (K, alpha, G, ...); None: its defaults."""
    credit: CreditConfig = field(default_factory=CreditConfig)
    """`--credit shapley` and the failure route (`llm_marl.credit.team`), for any algorithm."""
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    """Engine actors, rollout workers and trainer ranks (`llm_marl.distributed`); the default runs in one process."""

    def __post_init__(self) -> None:
        if isinstance(self.cluster, dict):
            self.cluster = ClusterConfig(**self.cluster)
        if self.cluster.trainer_ranks > 1 and self.credit.dpo_beta > 0:
            raise ValueError("--dpo-beta (the failure route's DPO step) runs in the trainer process only: drop it, or use --trainer-ranks 1")
        algorithm = get_algorithm(self.run.algo)
        if self.run.algo != algorithm.id:  # config.json names the algorithm by its id, as --algo's flags and --resume read it
            self.run = dataclasses.replace(self.run, algo=algorithm.id)
        if self.algo is None:
            self.algo = algorithm.config_cls()
        elif isinstance(self.algo, dict):
            self.algo = algorithm.config_cls(**self.algo)
        if isinstance(self.credit, dict):
            self.credit = CreditConfig(**self.credit)
        # Loss settings left unset take the algorithm's paper values (from the CLI and from Python alike).
        unset = {k: v for k, v in algorithm.loss_defaults.items() if getattr(self.optim, k) is None}
        if unset:
            self.optim = dataclasses.replace(self.optim, **unset)
        if self.credit.enabled and algorithm.id in ("sharp", "at-grpo"):
            why = ("sharp computes its own counterfactual credit" if algorithm.id == "sharp" else
                   "at-grpo trains tree candidates that lost the argmax, which no played episode (and so no replay) scores")
            raise ValueError(f"--credit shapley does not apply to {algorithm.id}: {why}; use it with grpo, matpo or mhgpo")

    @property
    def algorithm(self) -> Algorithm:
        return get_algorithm(self.run.algo)

    @property
    def loss(self) -> LossConfig:
        """The clipped-surrogate settings of this run (llm_marl.loss)."""
        o = self.optim
        return LossConfig(eps_low=o.clip_eps, eps_high=o.clip_eps_high, ratio_level=o.ratio_level, aggregation=o.loss_agg,
                          beta=o.kl_beta, dual_clip=o.dual_clip)

    def env_kwargs(self) -> dict[str, Any]:
        """The environment's options: the user's (or the quick defaults), then what the algorithm needs."""
        base = quick_env_args(self.run.env, self.run.env_args)
        return {**base, **self.algorithm.env_kwargs(self.algo, self.run.env)}

    def to_dict(self) -> dict[str, Any]:
        return {"model": dataclasses.asdict(self.model), "sampling": dataclasses.asdict(self.sampling),
                "optim": dataclasses.asdict(self.optim), "run": dataclasses.asdict(self.run),
                "algo": dataclasses.asdict(self.algo), "credit": dataclasses.asdict(self.credit),
                "cluster": dataclasses.asdict(self.cluster),
                "resolved_env_args": self.env_kwargs()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        return cls(model=ModelConfig(**data["model"]), sampling=SamplingConfig(**data["sampling"]),
                   optim=OptimConfig(**data["optim"]), run=RunConfig(**data["run"]), algo=dict(data["algo"]),
                   credit=CreditConfig(**data.get("credit", {})), cluster=ClusterConfig(**data.get("cluster", {})))


# ---------------------------------------------------------------------------- seeds
def step_seeds(seed: int, step: int, count: int) -> list[int]:
    """`count` distinct seeds for step `step` of a run seeded `seed` (SeedSequence, never seed + i).

    32-bit words repeat by chance (with 1024 tasks a step, run seed 0 drew one seed twice at step 119), and a task
    twice is a task id twice, which the rollout refuses: every step of the run would stop there, also when resumed.
    A repeat is left out and the stream's next words fill in; its first `count` words are these words, so seeds
    without repeats are the ones drawn before.
    """
    sequence, n = np.random.SeedSequence([seed, step]), count
    while True:
        seeds = list(dict.fromkeys(int(x) for x in sequence.generate_state(n, dtype=np.uint32)))
        if len(seeds) >= count:
            return seeds[:count]
        n += count - len(seeds)


# ---------------------------------------------------------------------------- update
def update_policy(policy: Any, optimizers: dict[str, torch.optim.Optimizer], samples: list[Sample],
                  optim: OptimConfig, loss_config: LossConfig, temperature: float, segment: str,
                  rng: np.random.Generator) -> dict[str, float]:
    """One pass of `optim.epochs` epochs over each adapter's batch, minibatch by minibatch.

    Samples are routed to the adapter that produced them (AT-GRPO Eq. 2); each adapter has its own
    optimizer and its own gradient clipping. This is the one-rank case of `llm_marl.update`
    (trainer ranks on a cluster run the same two halves with T ranks).
    """
    shards, counts = plan_update(samples, optim, loss_config, segment, rng, ranks=1)
    return {**counts, **apply_update(policy, optimizers, shards[0], optim, loss_config, temperature, segment)}


def update_dpo(policy: Any, optimizers: dict[str, torch.optim.Optimizer], pairs: list[Any], beta: float,
               optim: OptimConfig, temperature: float) -> dict[str, float]:
    """One DPO step per adapter on the failure route's preference pairs (y+ and y- answer one prompt)."""
    sums: dict[str, list[float]] = defaultdict(list)
    by_adapter: dict[str, list[Any]] = defaultdict(list)
    for pair in pairs:
        if pair.rejected.adapter is not None and pair.chosen.adapter == pair.rejected.adapter:
            by_adapter[pair.rejected.adapter].append(pair)
    for adapter, batch in sorted(by_adapter.items()):
        prompts = [p.rejected.prompt_ids for p in batch] * 2
        responses = [p.chosen.response_ids for p in batch] + [p.rejected.response_ids for p in batch]
        width = max(len(r) for r in responses)
        with policy.checkpointing(optim.gradient_checkpointing):
            token_logps = policy.response_logprobs(prompts, responses, adapter, temperature, grad=True)
        mask = torch.tensor([[1.0] * len(r) + [0.0] * (width - len(r)) for r in responses], device=token_logps.device)
        logps = (token_logps * mask).sum(dim=1)  # log π(y | x) of each whole reply
        ref = (policy.reference_logprobs(prompts, responses, temperature) * mask).sum(dim=1)
        n = len(batch)
        loss, metrics = dpo_loss(logps[:n], logps[n:], ref[:n], ref[n:], beta=beta)
        optimizer = optimizers[adapter]
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if clipped_step(optimizer, policy.trainable_parameters(adapter), optim.grad_clip) is None:
            sums[f"dpo/{adapter}/skipped_nonfinite"].append(1.0)
        for key, value in metrics.items():
            sums[key.replace("dpo/", f"dpo/{adapter}/")].append(float(value))
    return {k: sum(v) / len(v) for k, v in sums.items()}


def recompute_old_logprobs(policy: Any, samples: list[Sample], temperature: float, batch_size: int = 8) -> None:
    """Replace the engine's log-probs with the trainer model's (for engines with their own numerics,
    e.g. vLLM), so the first update epoch has ratio exactly 1 on the sampled tokens."""
    by_adapter = batches_by_adapter(samples)
    for adapter, batch in by_adapter.items():
        for start in range(0, len(batch), batch_size):
            chunk = [s for s in batch[start:start + batch_size] if s.response_ids]
            if not chunk:
                continue
            logprobs = policy.response_logprobs([s.prompt_ids for s in chunk], [s.response_ids for s in chunk], adapter, temperature)
            for s, row in zip(chunk, logprobs):
                s.old_logprobs = row[: len(s.response_ids)].tolist()


# ---------------------------------------------------------------------------- metrics
def step_metrics(out: Rollout) -> dict[str, float]:
    episodes = out.real_episodes
    metrics: dict[str, float] = {
        "reward/success_rate": float(np.mean([ep.success for ep in episodes])) if episodes else 0.0,
        "episode/steps": float(np.mean([ep.steps for ep in episodes])) if episodes else 0.0,
        "episode/count": float(len(episodes)),
    }
    # A reward that is NaN or inf would make its mean so and hide the step on every plot: the means are of the finite
    # values, and reward/nonfinite/<role> counts the steps left out. (One that a credit reads stops the step instead.)
    by_role: dict[str, list[float]] = defaultdict(list)
    for ep in episodes:
        for role, value in ep.returns.items():
            by_role[role].append(value)
    for role, values in sorted(by_role.items()):
        finite = [v for v in values if math.isfinite(v)]
        if finite:
            metrics[f"reward/return/{role}"] = float(np.mean(finite))
    fields: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    nonfinite: dict[str, int] = defaultdict(int)
    replay_ids = {ep.episode_id for ep in out.episodes if ep.counterfactual is not None}
    for s in out.samples:
        if s.episode_id in replay_ids:
            continue  # counterfactual replays are not the policy's play
        rewards = {"reward": s.reward, "team_reward": float(s.info.get("team_reward", 0.0)),
                   "local_reward": float(s.info.get("local_reward", 0.0))}
        for key, value in rewards.items():
            if math.isfinite(value):
                fields[s.role][key].append(value)
        nonfinite[s.role] += not all(map(math.isfinite, rewards.values()))
        # A reply cut off by --max-new-tokens is counted as truncated, and one that a prompt longer than the model's
        # context window left empty as context_overflow: neither is a format error.
        truncated, overflow = s.finish_reason == "length", s.finish_reason == "context"
        fields[s.role]["truncated"].append(float(truncated))
        fields[s.role]["context_overflow"].append(float(overflow))
        fields[s.role]["parse_error"].append(float(s.info.get("parse_error") is not None and not truncated and not overflow))
        fields[s.role]["response_tokens"].append(float(len(s.response_ids)))
    for role, values in sorted(fields.items()):
        for key, xs in values.items():
            metrics[f"reward/{key}/{role}" if key != "response_tokens" else f"perf/response_tokens/{role}"] = float(np.mean(xs))
        if nonfinite[role]:
            metrics[f"reward/nonfinite/{role}"] = float(nonfinite[role])
    for key, value in out.stats.items():
        metrics[f"rollout/{key}"] = float(value)
    return metrics


def nonfinite_messages(out: Rollout) -> list[str]:
    """The environment's NaN or inf rewards and numeric infos of the step, in words (none: []). No credit read them
    (assign_advantages refuses a non-finite credit, naming its steps), so the step trained; its reward metrics left them out."""
    steps = nonfinite_steps(out.samples)
    if not steps:
        return []
    return [f"the environment returned non-finite values, which no credit reads, at {listed(steps)}: the reward metrics "
            "average the finite values (reward/nonfinite/<role> counts the steps left out). An environment's rewards and "
            "infos must be finite numbers"]


def trajectory_records(out: Rollout) -> list[dict[str, Any]]:
    """The trajectories file's lines of the step (RunDir.write_trajectories writes a NaN or inf in them as null)."""
    return [{
        "sample_id": s.sample_id, "task_id": s.task_id, "episode_id": s.episode_id, "role": s.role, "turn": s.turn,
        "candidate": s.candidate, "selected": s.selected, "trainable": s.trainable, "adapter": s.adapter, "reward": s.reward, "credit": s.credit,
        "group_key": repr(s.group_key), "advantage": s.advantage, "text": s.text, "reasoning": s.reasoning,
        "finish_reason": s.finish_reason, "truncated": s.finish_reason == "length",
        "info": {k: v for k, v in s.info.items() if k in ("team_reward", "local_reward", "local_terms", "mask", "parse_error", "success")},
    } for s in out.samples]


# ---------------------------------------------------------------------------- schedule
def lr_lambda(optim: OptimConfig, total_steps: int):
    def factor(step: int) -> float:
        if step < optim.warmup_steps:
            return (step + 1) / (optim.warmup_steps + 1)
        progress = (step - optim.warmup_steps) / max(1, total_steps - optim.warmup_steps)
        if optim.schedule == "linear":
            return max(0.0, 1.0 - progress)
        if optim.schedule == "cosine":
            return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
        return 1.0

    return factor


def resumed_settings(optimizer: torch.optim.Optimizer, scheduler: Any, optim: OptimConfig) -> None:
    """This run's --lr and --weight-decay on an optimizer and scheduler loaded from a checkpoint, which hold the values
    the run had when it was written: flags given with --resume apply from the resumed step on. The learning rate is
    computed as the scheduler computes it, so unchanged settings give the same numbers."""
    scheduler.base_lrs = [optim.lr for _ in scheduler.base_lrs]
    for group, factor in zip(optimizer.param_groups, scheduler.lr_lambdas):
        group.update(initial_lr=optim.lr, lr=optim.lr * factor(scheduler.last_epoch), weight_decay=optim.weight_decay)


def warm_start(policy: Any, init_adapters: str, log: Any) -> None:
    sources = policy.init_from(init_adapters)
    log(f"adapters start from {init_adapters}: " + ", ".join(f"{a} <- {s}" for a, s in sources.items()))


# ---------------------------------------------------------------------------- checkpoints
def read_checkpoint(path: Any, adapters: tuple[str, ...]) -> dict[str, Any]:
    """A checkpoint's trainer state, after checking that all of it loads (adapters included), before
    anything is applied. `weights_only=True`: a crafted run directory cannot run code."""
    from safetensors.torch import load_file

    from llm_marl.policies import MANIFEST

    state = torch.load(path / TRAINER_STATE, weights_only=True, map_location="cpu")
    for key in ("optimizers", "schedulers"):
        missing = [a for a in adapters if a not in state.get(key, {})]
        if state.get(key) and set(state[key]) != set(adapters):
            raise CheckpointMismatch(f"{path} holds adapters {sorted(state[key])}, this run trains {list(adapters)}: resume "
                                     "with the run's own --policy and --env-arg mode")
        if missing:
            raise ValueError(f"{TRAINER_STATE} has no {key} state for adapters {missing}")
    manifest = json.loads((path / "adapters" / MANIFEST).read_text())
    for name in manifest["adapters"]:
        load_file(str(path / "adapters" / name / "adapter_model.safetensors"))
    return state


# ---------------------------------------------------------------------------- the loop
def build_engine(config: TrainConfig, policy: Any) -> Any:
    from llm_marl.engines import make_engine

    if config.model.engine == "hf":
        return make_engine("hf", policy, seed=config.run.seed)
    # --dtype is vLLM's too, so that the update recomputes log-probs of the weights that sampled them.
    return make_engine("vllm", policy_set=policy, dtype=config.model.dtype)


def train(config: TrainConfig, resume: str | None = None, log: Any = print,
          engine_factory: Any = None) -> RunDir:
    """Run (or resume) training; returns the run directory.

    `engine_factory(policy)` replaces the configured engine (a custom backend, or a scripted engine in
    tests); the trainer then recomputes the old log-probs with its own model.
    """
    with contextlib.ExitStack() as hold:  # the run's lock, let go when training returns or fails
        return _train(config, resume, log, engine_factory, hold)


def _train(config: TrainConfig, resume: str | None, log: Any, engine_factory: Any, hold: contextlib.ExitStack) -> RunDir:
    from llm_marl.models import BUILTINS, resolve_device
    from llm_marl.policies import LoRAConfig, PolicySet, parse_thinking, set_deterministic
    from llm_marl.provenance import record, versions
    from llm_marl.threads import set_threads
    from llm_marl_envs.registry import get as get_env
    from llm_marl_envs.registry import make_raw

    run_cfg = config.run
    algorithm = config.algorithm
    env_kwargs = config.env_kwargs()
    if config.cluster.rollout_workers:  # the workers may run on other nodes, in other working directories
        env_kwargs = node_independent_env_args(env_kwargs)
    probe = make_raw(run_cfg.env, **env_kwargs)
    algorithm.check_env(probe, config.algo)
    roles = list(probe.possible_agents)
    thinking = parse_thinking(config.model.thinking, config.model.thinking_roles, roles)
    set_threads(run_cfg.threads)
    if run_cfg.deterministic:
        set_deterministic(True, run_cfg.seed)
    torch.manual_seed(run_cfg.seed)

    if resume:
        run = RunDir.open(resume)
        run.check_writable()  # before the lock file is opened and the model loads
        hold.enter_context(run.held())  # before the model loads: a run that another process still trains is refused at once
    lora = LoRAConfig(r=config.model.lora_r, alpha=config.model.lora_alpha, dropout=config.model.lora_dropout)
    device = resolve_device(config.model.device)
    policy = PolicySet.from_pretrained(config.model.model, roles=roles, policy=config.model.policy, lora=lora, seed=run_cfg.seed,
                                       device=device, dtype=config.model.dtype, thinking=thinking)
    if config.optim.gradient_checkpointing:
        policy.checkpoint_layers()  # a model transformers cannot checkpoint is refused before any rollout
    if config.model.lora_dropout > 0:
        log(f"--lora-dropout {config.model.lora_dropout:g} has no effect here: RL updates run without dropout, so that their "
            "log-probs are those the replies were sampled with (it applies in sft)")
    if config.model.init_adapters and not resume:
        warm_start(policy, config.model.init_adapters, log)  # before the run directory exists: a bad path leaves nothing behind
    if not resume:
        run = None  # made in the try below: a stop or failure from its creation on removes it
    optimizers = {a: torch.optim.AdamW(policy.trainable_parameters(a), lr=config.optim.lr, weight_decay=config.optim.weight_decay)
                  for a in policy.adapters}
    schedulers = {a: torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(config.optim, run_cfg.steps)) for a, opt in optimizers.items()}

    start = 1
    checkpoint = run.resume_point(lambda path: read_checkpoint(path, policy.adapters), log=log) if resume else None
    if checkpoint is not None:
        done, path, state = checkpoint
        if done > run_cfg.steps:  # config.json would say fewer steps than the run's checkpoints and metrics hold
            raise RunDirError(f"--steps {run_cfg.steps}: {run.path} has trained {done} steps already (its checkpoint "
                              f"{path.name}); pass --steps {done} or more, or start a new run from its weights with "
                              f"--init-adapters {shlex.quote(str(path / 'adapters'))}")
        policy.load(path / "adapters")
        for a in policy.adapters:
            optimizers[a].load_state_dict(state["optimizers"][a])
            schedulers[a].load_state_dict(state["schedulers"][a])
            resumed_settings(optimizers[a], schedulers[a], config.optim)
        start = done + 1
        log(f"resuming {run.path} after step {done}")
    elif resume:
        log(f"no checkpoint in {run.path}: starting it from step 1")
        if config.model.init_adapters:  # a checkpoint supersedes the warm start, which may since have been deleted
            warm_start(policy, config.model.init_adapters, log)
    if resume:
        changed = run.save_resumed_config(config.to_dict(), start)
        if changed:
            log(f"resumed with other settings than {run.path} had: {'; '.join(changed)} (config.json holds the new ones, "
                "its `resumes` the earlier ones)")
        # An eval_after.json of the adapters this resume trains further would pass for the result of training.
        aside = run.truncate_after(start - 1, stale=(EVAL_AFTER,) if start <= run_cfg.steps else ())
        if aside is not None:
            also = f", and the earlier {EVAL_AFTER} (its adapters are trained further)," if (aside / EVAL_AFTER).exists() else ""
            log(f"metrics and trajectories of steps after {start - 1} (to be redone){also} moved to {aside}")

    engine = None
    scale: Any = None
    cluster = config.cluster
    if cluster.engine_actors and engine_factory is not None:
        raise ValueError("engine_factory builds an in-process engine; with engine actors the engine is --engine's, built in each actor")
    # The in-process hf engine samples with the trainer's own model; any other engine's log-probs are recomputed.
    own_logprobs = config.model.engine == "hf" and engine_factory is None and not cluster.engine_actors
    sigma_map = {role: policy.adapter_for(role) for role in roles}
    plan = algorithm.sampling_plan(config.algo)
    if config.credit.enabled:
        plan = shapley_plan(plan, config.credit)
    loss_config = config.loss
    segment = getattr(config.algo, "loss_segment", "sample")
    hints: set[str] = set()
    provenance = versions(get_env(run_cfg.env).module, str(policy.device))  # before the directory exists: it takes a while
    from tqdm import tqdm

    def one_step(step: int, on_wave: Any) -> tuple[dict[str, float], Rollout]:
        """Rollout, credit and advantages, the update, and the adapters pushed to the engine."""
        t0 = time.perf_counter()
        tasks = make_tasks(run_cfg.env, step_seeds(run_cfg.seed, step, run_cfg.envs_per_step), split="train", env_kwargs=env_kwargs)
        sampling = SamplingParams(temperature=config.sampling.temperature, max_new_tokens=config.sampling.max_new_tokens,
                                  seed=step_seeds(run_cfg.seed + 1, step, 1)[0])
        if scale is not None and scale.workers:
            out = scale.rollout(tasks, plan, sigma_map, sampling, on_wave=on_wave)
        else:
            out = rollout(tasks, plan, engine, sigma=policy, sampling=sampling, on_wave=on_wave)
        t1 = time.perf_counter()
        metrics = step_metrics(out)
        t_credit = time.perf_counter()
        credit = (lambda r: assign_shapley(r, config.credit)) if config.credit.enabled else None
        metrics.update(assign_advantages(out, algorithm, config.algo, AdvantageConfig(), credit=credit))
        t_update = time.perf_counter()
        metrics.update(signal_metrics(metrics))
        if not own_logprobs:
            if scale is not None:
                scale.recompute(out.samples, sampling.temperature)
            else:
                recompute_old_logprobs(policy, out.samples, sampling.temperature)
        rng = np.random.default_rng(step_seeds(run_cfg.seed + 2, step, 1)[0])
        if scale is not None and scale.ranks:  # T ranks; the driver's policy then holds rank 0's adapters
            metrics.update(scale.update(out.samples, config.optim, loss_config, sampling.temperature, segment, rng))
        else:
            metrics.update(update_policy(policy, optimizers, out.samples, config.optim, loss_config, sampling.temperature, segment, rng))
        if config.credit.dpo_beta > 0:
            pairs, pair_stats = preference_pairs(out)
            metrics.update(pair_stats)
            metrics.update(update_dpo(policy, optimizers, pairs, config.credit.dpo_beta, config.optim, sampling.temperature))
        with warnings.catch_warnings():
            # An adapter that took no optimiser step this step is reported by step_messages.
            warnings.filterwarnings("ignore", message=r"Detected call of `lr_scheduler\.step\(\)` before")
            for scheduler in schedulers.values():
                scheduler.step()
        engine.sync_adapters()
        t2 = time.perf_counter()
        if scale is not None:
            metrics.update({"perf/publish_s": scale.publish_s, "cluster/shard_retries": float(out.stats.get("shard_retries", 0.0))})
        metrics.update({"perf/rollout_s": t1 - t0, "perf/step_s": t2 - t0,
                        "perf/generated_tokens": float(sum(len(s.response_ids) for s in out.samples)),
                        "optim/lr": schedulers[policy.adapters[0]].get_last_lr()[0]})
        metrics.update(step_time_metrics(t2 - t0, out.timings, credit_s=t_update - t_credit, update_s=t2 - t_update))
        return metrics, out

    current = start  # the step in progress, for the messages of a run that stops
    stage = ""  # or, once the steps are done, what the run does after them
    tracker = None
    hold.enter_context(sigterm_interrupts())
    try:
        if not resume:
            with interrupts_deferred():  # a stop while the directory is made waits until it holds config.json
                # Named by the environment's name, also when --env gave its module or PettingZoo id (which holds a '/').
                run = RunDir.create(run_cfg.out_dir, get_env(run_cfg.env).name, algorithm.id, run_cfg.seed,
                                    name=run_cfg.run_name or None)
                hold.enter_context(run.held())
                run.save_config(config.to_dict())
        record(run.path, provenance, log, resumed_at=start if resume else None)
        log(f"run directory: {run.path}")
        tracker = open_tracker(run_cfg.report_to, run.path, config.to_dict(), first_step=start)
        if cluster.enabled:
            from llm_marl.distributed.actors import EngineSpec, TrainerSpec
            from llm_marl.distributed.cluster import ClusterRun

            threads = max(1, int(cluster.cpus_per_actor))
            # A relative model folder as actors elsewhere find it (a built-in's name wins over a folder, as in resolve_model).
            model = config.model.model if config.model.model in BUILTINS else absolute_if_here(config.model.model)
            spec = EngineSpec(config.model.engine, model, tuple(roles), config.model.policy, lora, run_cfg.seed, threads,
                              thinking, config.model.dtype)
            trainer_spec = TrainerSpec(model, tuple(roles), config.model.policy, lora, config.optim, run_cfg.steps,
                                       run_cfg.seed, threads, run_cfg.deterministic, config.model.dtype)
            scale = ClusterRun(cluster, policy, engine_factory=spec, trainer=trainer_spec, log=log,
                               env_vars=forwarded_env(env_kwargs)).start()
            hold.enter_context(sigterm_interrupts())  # ray.init installed its own handler (sys.exit): take SIGTERM back
            scale.load_trainer_state(optimizers, schedulers)
        if scale is not None and scale.engine is not None:
            engine = scale.engine
        else:
            engine = build_engine(config, policy) if engine_factory is None else engine_factory(policy)
        steps = tqdm(range(start, run_cfg.steps + 1), initial=start - 1, total=run_cfg.steps, desc="train",
                     disable=not run_cfg.progress or None)
        bars = not steps.disable
        say = steps.write if bars else log  # messages between bar updates, or as plain log lines
        if run_cfg.eval_episodes and not (run.path / EVAL_BEFORE).exists():
            if start == 1:
                held_out_eval(config, engine, policy, run.path / EVAL_BEFORE, "before training", log, bars)
            else:  # --eval-episodes given with --resume: the adapters loaded are trained already, not the run's start
                log(f"no held-out eval before training: the run resumed after step {start - 1} (its adapters are trained "
                    "already); the one after training is written")
        previous = None  # the metrics of the step before, for the messages
        # The adapters, and AdamW's two moments of each of their weights: about what a checkpoint holds.
        first_checkpoint_bytes = 3 * sum(p.numel() * p.element_size() for a in policy.adapters for p in policy.trainable_parameters(a))
        for step in steps:
            current = step
            bar, on_wave = wave_progress(f"step {step} rollout", run_cfg.envs_per_step, bars)
            with bar:
                metrics, out = one_step(step, on_wave)
            run.log_metrics(step, metrics)
            tracker.log(step, metrics)
            run.write_trajectories(step, trajectory_records(out))
            if step % run_cfg.checkpoint_every == 0 or step == run_cfg.steps:
                tmp = run.begin_checkpoint(step, needed=run.checkpoint_bytes() or first_checkpoint_bytes)
                policy.save(tmp / "adapters")
                state = scale.trainer_state() if scale is not None and scale.ranks else {
                    "optimizers": {a: o.state_dict() for a, o in optimizers.items()},
                    "schedulers": {a: s.state_dict() for a, s in schedulers.items()}}
                torch.save({"step": step, **state}, tmp / TRAINER_STATE)
                run.commit_checkpoint(step, tmp)
            steps.set_postfix(postfix(metrics))
            if not bars:
                say(step_line(step, run_cfg.steps, metrics))
            for message in nonfinite_messages(out) + step_messages(metrics, list(policy.adapters), hints, env=run_cfg.env,
                                                                   warm_started=bool(config.model.init_adapters),
                                                                   previous=previous):
                say(f"step {step}: {message}")
            previous = metrics
        stage = "saving the final adapters"
        run.save_adapters(policy.save)
        if run_cfg.eval_episodes:
            stage = "the held-out evaluation after training"
            # Compared with the evaluation before training: the tasks and reply length of that one, which a resume
            # with other --env-arg or --max-new-tokens does not change.
            before, now = settings_before(run.path), json.loads(json.dumps(eval_settings(config), default=str))
            if before == now:
                before = None  # the run's own, as the config holds them (the file's JSON has lists for tuples)
            elif before is not None:
                changed = [f"{key} {json.dumps(before[key])} (the run's now: {json.dumps(now[key])})" for key in now
                           if before[key] != now[key]]
                say(f"held-out eval after training plays the settings of the one before ({EVAL_BEFORE}): {'; '.join(changed)}; "
                    f"llm-marl eval --adapters {shlex.quote(str(run.path))} scores the adapters on the run's own")
            held_out_eval(config, engine, policy, run.path / EVAL_AFTER, "after training", log, bars, before)
    except BaseException as exc:  # Ctrl-C and SIGTERM too: a start stopped before any step leaves nothing behind either
        if run is None:
            raise  # no run directory was made (one of that name exists, or --out-dir cannot hold one)
        if isinstance(exc, Exception) and not isinstance(exc, (RunDirError, ClusterError)):
            exc = write_error(exc, run.path) or exc
        run.discard_unfinished_checkpoints()
        if not resume and not run.metrics():
            if tracker is not None:  # its writer thread would otherwise recreate the folder when it flushes
                tracker.close()
                tracker = None
            shutil.rmtree(run.path, ignore_errors=True)  # a start that failed leaves nothing behind
        if isinstance(exc, KeyboardInterrupt):
            what, code = stopped_by(exc)
            raise TrainingInterrupted(interrupted_message(run, current, resume, what, stage), code) from None
        if isinstance(exc, (ClusterError, RunDirError)):
            failed = interrupted_message(run, current, resume, stage=stage).replace('interrupted during', 'failed in')
            raise type(exc)(f"{exc}; {failed}") from None
        raise
    finally:
        if engine is not None:
            engine.close()
        if scale is not None:
            scale.close()
        if tracker is not None:
            tracker.close()
    from llm_marl.plots import learning_curve

    try:
        summary = write_summary(run, list(policy.adapters))
        curve = learning_curve(run.path)
    except Exception as exc:  # outside the handler above: nothing is left to discard, and a resume writes these again
        error = write_error(exc, run.path)
        if error is None:
            raise
        raise RunDirError(f"{error}; failed after the last step ({run_cfg.steps}), while writing the summary and learning "
                          f"curve; the adapters in {run.path / 'adapters'} and the checkpoints are intact; write them "
                          f"again with: llm-marl train --resume {shlex.quote(str(run.path))}") from None
    for line in summary_lines(summary):
        log(line)
    log(f"done: metrics in {run.path / 'metrics.jsonl'}, learning curve in {curve}, adapters in {run.path / 'adapters'}, "
        f"summary in {run.path / SUMMARY}")
    return run


# ---------------------------------------------------------------------------- evaluation and summary
EVAL_BEFORE, EVAL_AFTER, SUMMARY = "eval_before.json", "eval_after.json", "summary.json"


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM during training; the message says where the last checkpoint is and how to resume.
    `exit_code`: what the CLI exits with, 128 + the signal's number (130 for Ctrl-C, 143 for SIGTERM)."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


def interrupted_message(run: RunDir, step: int, resume: str | None, what: str = "interrupted", stage: str = "") -> str:
    """`stage`: what the run was doing after its last step, which then is no step in progress."""
    latest = run.latest_checkpoint()
    where = f"the last checkpoint is {latest[1]} (step {latest[0]})" if latest else "no checkpoint was written yet"
    during = f"during {stage or f'step {step}'}"
    if not latest and not resume and not run.metrics():
        return f"{what} {during}; nothing was trained yet, so {run.path} was removed"
    return f"{what} {during}; {where}; continue with: llm-marl train --resume {shlex.quote(str(run.path))}"


def eval_settings(config: TrainConfig) -> dict[str, Any]:
    """What a held-out evaluation's scores depend on besides the adapters and its episodes: the tasks, the reply
    length and the prompts (the thinking switch)."""
    return {"env_args": config.env_kwargs(), "max_new_tokens": config.sampling.max_new_tokens,
            "thinking": config.model.thinking, "thinking_roles": config.model.thinking_roles}


def recorded_settings(result: Any) -> dict[str, Any] | None:
    """The `eval_settings` a held-out evaluation's result records (None for none: a result written before they
    were recorded, or no result)."""
    settings = result.get("settings") if isinstance(result, dict) else None
    return settings if isinstance(settings, dict) and set(settings) == {"env_args", "max_new_tokens", "thinking",
                                                                        "thinking_roles"} else None


def settings_before(run_path: Path) -> dict[str, Any] | None:
    """The settings eval_before.json was played with (None for none, or one written before they were recorded)."""
    try:
        return recorded_settings(json.loads((Path(run_path) / EVAL_BEFORE).read_text()))
    except (OSError, ValueError):
        return None


def held_out_eval(config: TrainConfig, engine: Any, policy: Any, path: Any, when: str, log: Any,
                  bars: bool = False, settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """Greedy episodes of the test split (the same instances before and after), written to `path`, with `settings`
    (default: the run's own; the prompts are the engine's, which a resume checks keep the ones before)."""
    from llm_marl.evaluate import evaluate

    settings = settings or eval_settings(config)
    t0 = time.perf_counter()
    bar, on_wave = wave_progress(f"held-out eval {when}", config.run.eval_episodes, bars)
    with bar:
        result = evaluate(engine, config.run.env, n=config.run.eval_episodes, split="test", seed=0,
                          env_kwargs=settings["env_args"], sigma=policy, on_wave=on_wave,
                          sampling=SamplingParams(temperature=0.0, max_new_tokens=settings["max_new_tokens"]))
    result["seconds"] = round(time.perf_counter() - t0, 1)
    result["settings"] = settings
    path.write_text(json.dumps(result, indent=2, default=str) + "\n")  # as config.json writes an option JSON lacks
    rewards = ", ".join(f"{role} {value:.3f}" for role, value in result["mean_reward"].items())
    log(f"held-out eval {when} ({result['episodes']} test episodes, greedy): success {result['success_rate']:.3f}, "
        f"mean reward {rewards} ({result['seconds']} s)")
    return result


def write_summary(run: RunDir, adapters: list[str]) -> dict[str, Any]:
    """`summary.json`: the learning-signal counts of every step, the last step's rewards, and the
    held-out evaluation before and after training when there is one."""
    history = run.metrics()
    summary: dict[str, Any] = {"run_dir": str(run.path), **run_counts(history, adapters)}
    if history:
        last = history[-1]
        summary["last_step"] = {k: v for k, v in last.items() if k.startswith(("reward/success_rate", "reward/reward/", "signal/"))}
        summary["train_s"] = round(sum(m.get("perf/step_s", 0.0) for m in history), 1)
        summary["step_time_s"] = {part: round(seconds, 3) for part, seconds in step_time_totals(history).items()}
    for key, name in (("eval_before", EVAL_BEFORE), ("eval_after", EVAL_AFTER)):
        if (run.path / name).exists():
            summary[key] = json.loads((run.path / name).read_text())
    (run.path / SUMMARY).write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """The summary in words, for the end of the log."""
    lines = [f"{summary['steps']} steps; steps without learning signal: {summary['steps_without_signal']}; "
             "steps without an optimiser step, per adapter: "
             + ", ".join(f"{a} {n}" for a, n in summary["adapter_steps_without_update"].items())]
    parts = summary.get("step_time_s", {})
    total = sum(parts.values())
    if total > 0:
        lines.append(f"{total:.1f} s in training steps: " + ", ".join(f"{part} {100 * parts.get(part, 0.0) / total:.1f}%" for part in PARTS))
    before, after = summary.get("eval_before"), summary.get("eval_after")
    if before and after:
        lines.append(f"held-out test, greedy ({after['episodes']} episodes): success {before['success_rate']:.3f} -> "
                     f"{after['success_rate']:.3f}; mean reward " + ", ".join(
                         f"{role} {before['mean_reward'].get(role, 0.0):.3f} -> {value:.3f}" for role, value in after["mean_reward"].items()))
    return lines
