"""The rollout driver: plays any registered environment through its AEC loop in waves.

A wave collects the pending decision point of every live branch (all environments x branches x
roles), sends them to the engine in ONE `generate` call, and lets the sampling plan apply the
replies. Only the environment contract is used: `reset`, `agent_selection`, `observe`, `step`,
`rewards`, `infos`, `terminations`/`truncations`, `agents` and `fork()`.

    tasks = make_tasks("plan_path", seeds=range(4), env_kwargs={"max_turns": 4})
    out = rollout(tasks, tree(K=4), engine, sigma={"tool": "tool", "planner": "planner"},
                  sampling=SamplingParams(temperature=1.0, max_new_tokens=256, seed=0))
    out.samples, out.episodes, out.stats
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from llm_marl.engines.base import Engine, GenerationRequest, GenerationResult, SamplingParams
from llm_marl_envs.core.clock import tool_seconds, tool_wait

from .plans import Branch, Decision, SamplingPlan
from .samples import Episode, Rollout, Sample

Sigma = Any
"""σ: a role->adapter mapping, a callable, an object with `adapter_for(role)`, or None (base model)."""


ENV_ERROR_PENALTY = -1.0
"""Reward of a reply whose step made the environment raise (the contract says it never does; if it does,
that line of play ends there and its last reply gets this instead of a reward)."""


@dataclass(frozen=True)
class Task:
    """One task instance: how to build its environment and how to reset it."""

    task_id: str
    make_env: Callable[[], Any]
    seed: int | None = None
    options: dict[str, Any] = field(default_factory=dict)


def make_tasks(env: str, seeds: Iterable[int], split: str = "train", env_kwargs: Mapping[str, Any] | None = None,
               options: Mapping[str, Any] | None = None, prefix: str | None = None) -> list[Task]:
    """Tasks for a registered environment (`llm_marl_envs.registry`), one per seed of `split`.

    Task ids are `<prefix or env name>/<split>/<seed>`; give a prefix to mix variants of one
    environment (e.g. `mode="planner"` and `mode="mas"`) in one rollout.
    """
    from llm_marl_envs.registry import get, make_raw

    name = get(env).name  # unknown names fail here, with the list of environments
    kwargs = dict(env_kwargs or {})
    return [
        Task(task_id=f"{prefix or name}/{split}/{int(seed)}", make_env=partial(make_raw, name, **kwargs), seed=int(seed),
             options={**dict(options or {}), "split": split})
        for seed in seeds
    ]


def resolve_sigma(sigma: Any) -> Callable[[str], str | None]:
    """σ: role -> adapter name. A mapping, a callable, an object with `adapter_for(role)`, or None (base model)."""
    if sigma is None:
        return lambda role: None
    if isinstance(sigma, Mapping):
        table = dict(sigma)

        def lookup(role: str) -> str | None:
            if role not in table:
                raise ValueError(f"role {role!r} has no adapter in sigma {table}; add it to the role->adapter map")
            return table[role]

        return lookup
    if hasattr(sigma, "adapter_for"):
        return sigma.adapter_for
    if callable(sigma):
        return sigma
    raise ValueError(f"sigma must be a mapping, a callable or have adapter_for(role); got {type(sigma).__name__}")


@dataclass(frozen=True)
class RequestTag:
    """`GenerationRequest.tag` of rollout requests: who asked (engines return it untouched)."""

    index: int
    """Position among this wave's pending decision points."""
    task_id: str
    episode_id: str
    agent: str
    step: int


@dataclass
class Reply:
    text: str
    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str = "stop"
    sampled: bool = True
    reasoning: str = ""


@dataclass
class Outcome:
    branch: Branch
    """The branch after the step (a fork, or the stepped branch itself)."""
    sample: Sample


def is_done(env: Any) -> bool:
    agents = list(env.agents)
    return not agents or all(env.terminations[a] or env.truncations[a] for a in agents)


def _settle(env: Any) -> None:
    """Step dead agents (PettingZoo `step(None)`) until a live agent is selected or all have ended."""
    while not is_done(env):
        agent = env.agent_selection
        if not (env.terminations[agent] or env.truncations[agent]):
            return
        env.step(None)


class _Recorder:
    def __init__(self) -> None:
        self.samples: list[Sample] = []
        self.episodes: list[Episode] = []
        self.decisions = 0

    def finish(self, branch: Branch, cut: bool) -> Episode:
        infos = dict(branch.infos) if branch.error else {**branch.infos, **copy.deepcopy(dict(branch.env.infos))}
        returns = {a: 0.0 for a in branch.env.possible_agents}
        for sid in branch.path:
            s = self.samples[sid]
            returns[s.role] = returns.get(s.role, 0.0) + s.reward
        self.episodes.append(Episode(
            episode_id=branch.episode_id, task_id=branch.task.task_id, sample_ids=list(branch.path),
            final_infos=infos, returns=returns, success=any(bool(i.get("success")) for i in infos.values()),
            steps=branch.steps, cut=cut, error=branch.error, counterfactual=branch.counterfactual,
        ))
        return self.episodes[-1]


class Turn:
    """One decision point being expanded by a plan: the observation, its replies, and `step`."""

    def __init__(self, recorder: _Recorder, branch: Branch, agent: str, observation: dict[str, Any],
                 adapter: str | None, prompt_ids: list[int], replies: list[Reply]):
        self._rec = recorder
        self.branch = branch
        self.agent = agent
        self.observation = observation
        self.messages = copy.deepcopy(list(observation["messages"]))
        """The prompt, copied once and shared (read-only) by every candidate's Sample."""
        self.adapter = adapter
        self.prompt_ids = prompt_ids
        self.replies = replies
        self.decision_id = recorder.decisions
        recorder.decisions += 1
        self._consumed = False

    def snapshot(self) -> Branch:
        """An untouched copy of the branch as it is before this turn's step (for later replays)."""
        parent = self.branch
        return Branch(env=parent.env.fork(), task=parent.task, episode_id=parent.episode_id, path=list(parent.path),
                      steps=parent.steps, infos=dict(parent.infos), data=copy.deepcopy(parent.data),
                      counterfactual=parent.counterfactual, snapshots=dict(parent.snapshots))

    def step(self, index: int, *, fork: bool, episode_id: str | None = None) -> Outcome:
        """Apply reply `index` on a fork (`fork=True`) or on the branch itself; record its Sample.

        `episode_id` renames the line of play from this reply on (a plan that keeps several forks
        alive, like MHGPO's fork points, gives each its own episode).
        """
        if self._consumed:
            raise RuntimeError("this turn's branch was already stepped in place; further replies need fork=True")
        parent = self.branch
        if fork:
            child = self.snapshot()
        else:
            self._consumed = True
            child = parent
        if episode_id is not None:
            child.episode_id = episode_id
        env = child.env
        if env.agent_selection != self.agent:
            raise RuntimeError(f"expected {self.agent!r} to act, the environment selects {env.agent_selection!r}")
        reply = self.replies[index]
        try:
            env.step(reply.text)
            # Read the breakdown right after this reply's step, before any other agent moves.
            info = copy.deepcopy(dict(env.infos.get(self.agent, {})))
            reward = float(env.rewards.get(self.agent, info.get("reward", 0.0)))
        except Exception as exc:  # noqa: BLE001 -- an environment bug must cost one line of play, not the rollout
            child.error = f"{type(exc).__name__}: {str(exc)[:300]}"
            reward = ENV_ERROR_PENALTY
            info = {"reward": reward, "team_reward": 0.0, "local_reward": 0.0, "local_terms": {}, "mask": 1.0,
                    "penalty": ENV_ERROR_PENALTY, "parse_error": f"environment error: {child.error}", "env_error": child.error}
        sample = Sample(
            sample_id=len(self._rec.samples), task_id=parent.task.task_id, episode_id=child.episode_id,
            decision_id=self.decision_id, candidate=index, role=self.agent,
            turn=int(self.observation.get("turn", parent.steps)), step=parent.steps, adapter=self.adapter,
            messages=self.messages, text=reply.text, reasoning=reply.reasoning,
            prompt_ids=list(self.prompt_ids) if reply.sampled else [], response_ids=list(reply.token_ids),
            old_logprobs=list(reply.logprobs), finish_reason=reply.finish_reason,
            reward=reward, info=info,
            trainable=reply.sampled and child.counterfactual is None,
        )
        self._rec.samples.append(sample)
        child.path.append(sample.sample_id)
        child.steps += 1
        if child.error is None:
            child.infos.update(copy.deepcopy(dict(env.infos)))
            _settle(env)
        return Outcome(branch=child, sample=sample)


@contextlib.contextmanager
def _prefetched_runs(turns: list[tuple[Any, ...]], stats: dict[str, int]) -> Iterator[None]:
    """Run the tool calls (sandboxed programs, searches) every reply of this wave will make,
    concurrently, grouped by runtime (and by the options of `runtime.prefetched`, e.g. a sandbox's limits)."""
    jobs: dict[tuple[int, tuple[tuple[str, Any], ...]], tuple[Any, dict[str, Any], list[Any]]] = {}
    for branch, agent, _obs, _adapter, _prompt_ids, replies in turns:
        planned = getattr(getattr(branch.env, "unwrapped", branch.env), "planned_calls", None)
        if planned is None or branch.error is not None:
            continue
        for reply in replies:
            try:
                calls = planned(agent, reply.text)
            except Exception:  # noqa: BLE001 -- the step itself will meet (and record) the same failure
                continue
            for runtime, job, *rest in calls:
                options = dict(rest[0]) if rest else {}
                key = (id(runtime), tuple(sorted(options.items())))
                jobs.setdefault(key, (runtime, options, []))[2].append(job)
    with contextlib.ExitStack() as stack:
        for runtime, options, runtime_jobs in jobs.values():
            if len(runtime_jobs) > 1:  # one call gains nothing from running early
                with tool_wait():
                    stack.enter_context(runtime.prefetched(runtime_jobs, **options))
                stats["prefetched_calls"] += len(runtime_jobs)
        yield


class _Clock:
    """Where a rollout's wall time goes (`Rollout.timings`): engine calls, environment work (reset,
    observe, plan decisions, fork, step, `planned_calls`) and tool waits (`llm_marl_envs.core.clock`,
    the prefetched runs included), measured with `perf_counter` around each stretch, never per token."""

    def __init__(self) -> None:
        self.start, self.tool_start = time.perf_counter(), tool_seconds()
        self.generate_s = self.env_s = 0.0

    @contextlib.contextmanager
    def env(self) -> Iterator[None]:
        """Environment work; the tool waits inside it are counted as tool time instead."""
        t, tool = time.perf_counter(), tool_seconds()
        try:
            yield
        finally:
            self.env_s += (time.perf_counter() - t) - (tool_seconds() - tool)

    def timings(self) -> dict[str, float]:
        return {"generate_s": self.generate_s, "env_s": self.env_s, "tool_s": tool_seconds() - self.tool_start,
                "rollout_s": time.perf_counter() - self.start}


def _wave_sampling(sampling: SamplingParams, wave: int) -> SamplingParams:
    if sampling.seed is None:
        return sampling
    seed = int(np.random.SeedSequence([int(sampling.seed), wave]).generate_state(1)[0])
    return dataclasses.replace(sampling, seed=seed)


def rollout(tasks: list[Task], plan: SamplingPlan, engine: Engine, sigma: Sigma = None,
            sampling: SamplingParams | None = None, max_steps: int = 256,
            on_wave: Callable[[dict[str, int]], None] | None = None, prefetch: bool = True) -> Rollout:
    """Play every task to the end under `plan`, one `engine.generate` call per wave.

    `sigma` maps a role to its adapter (AT-GRPO's σ). `sampling` is used for every call; with a
    seed, wave w samples with a seed derived from (seed, w). A line of play that takes more than
    `max_steps` agent steps is stopped and recorded with `Episode.cut = True`. `on_wave` (progress
    display) is called after each wave with the counts so far: waves, completions, episodes, live.

    `prefetch`: make the tool calls (sandboxed programs, searches) that a wave's replies will make
    (`env.planned_calls`) all at once before the branches are stepped one after the other; each step
    then takes its own call's result (`Sandbox.prefetched`, `SearchRuntime.prefetched`). Samples
    and rewards are those of `prefetch=False` (for deterministic programs and search backends);
    only the wall time differs.

    When `engine.generate` raises, its error is raised with `.rollout_so_far` set: a Rollout of the lines of
    play that ended before it (the scores of an evaluation that the engine's failure cut short). Those of the
    failing wave whose requests were answered are stepped first, when the error's `.answered` lists the
    results of the requests answered (None for the others), as the api engine's does.
    """
    sampling = sampling or SamplingParams()
    adapter_of = resolve_sigma(sigma)
    ids = [t.task_id for t in tasks]
    if len(set(ids)) != len(ids):
        raise ValueError(f"task ids must be unique (they are the group keys' environment instance): {ids}")
    rec = _Recorder()
    clock = _Clock()
    stats = {"waves": 0, "prefetched_calls": 0, "engine_calls": 0, "requests": 0, "completions": 0, "fixed_replies": 0,
             "counterfactual_completions": 0, "counterfactual_fixed_replies": 0, "counterfactual_episodes": 0}
    live: list[Branch] = []
    with clock.env():
        for task in tasks:
            env = task.make_env()
            env.reset(seed=task.seed, options=dict(task.options))
            _settle(env)
            live.extend(plan.start(task, env))

    def ended(branch: Branch) -> bool:
        return branch.error is not None or is_done(branch.env) or branch.steps >= max_steps

    def finish(branch: Branch) -> Episode:
        return rec.finish(branch, cut=branch.error is not None or not is_done(branch.env))

    wave = 0
    while live:
        pending: list[tuple[Branch, str, dict[str, Any], str | None, Decision]] = []
        queue = list(live)
        with clock.env():
            while queue:
                branch = queue.pop(0)
                if ended(branch):
                    queue.extend(plan.finished(branch, finish(branch)))  # replays join this very wave
                    continue
                agent = branch.env.agent_selection
                obs = branch.env.observe(agent)
                if not isinstance(obs, Mapping) or "messages" not in obs:
                    raise ValueError(f"{type(branch.env).__name__}.observe must return {{'messages': [...], 'turn': int}}")
                decision = plan.decide(branch, agent, obs)
                pending.append((branch, agent, obs, None if decision.reference else adapter_of(agent), decision))
        if not pending:
            break
        requests = [
            GenerationRequest(messages=copy.deepcopy(list(obs["messages"])), adapter=adapter, n=d.n,
                              tag=RequestTag(i, b.task.task_id, b.episode_id, agent, b.steps), role=agent)
            for i, (b, agent, obs, adapter, d) in enumerate(pending) if d.replies is None
        ]
        by_index: dict[int, GenerationResult] = {}
        if requests:
            t = time.perf_counter()
            try:
                results = engine.generate(requests, _wave_sampling(sampling, wave))
            except Exception as exc:
                # What was played is kept: the lines this wave's answered requests end, then those that had ended.
                answered = getattr(exc, "answered", None) or []
                by_index = {req.tag.index: res for req, res in zip(requests, answered)
                            if res is not None and len(res.completions) == req.n}
                kept = [i for i, p in enumerate(pending) if p[4].replies is not None or i in by_index]
                with clock.env():
                    for branch in _step_wave(rec, plan, [pending[i] for i in kept], [by_index.get(i) for i in kept],
                                             stats, prefetch):
                        if ended(branch):
                            finish(branch)
                exc.rollout_so_far = _rollout(rec, clock, stats, wave)  # type: ignore[attr-defined]
                raise
            clock.generate_s += time.perf_counter() - t
            stats["engine_calls"] += 1
            if len(results) != len(requests):
                raise RuntimeError(f"{type(engine).__name__}.generate returned {len(results)} results for {len(requests)} requests")
            for req, res in zip(requests, results):
                if len(res.completions) != req.n:
                    raise RuntimeError(f"{type(engine).__name__}.generate returned {len(res.completions)} completions, asked for n={req.n}")
                by_index[req.tag.index] = res
            stats["requests"] += len(requests)
            stats["completions"] += sum(r.n for r in requests)
            stats["counterfactual_completions"] += sum(d.n for b, _, _, _, d in pending
                                                       if d.replies is None and b.counterfactual is not None)
        with clock.env():
            live = _step_wave(rec, plan, pending, [by_index.get(i) for i in range(len(pending))], stats, prefetch)
        wave += 1
        if on_wave is not None:
            on_wave({"waves": wave, "completions": stats["completions"], "episodes": len(rec.episodes), "live": len(live)})
    if on_wave is not None:  # the last wave's lines were recorded as finished after its report
        on_wave({"waves": wave, "completions": stats["completions"], "episodes": len(rec.episodes), "live": 0})
    return _rollout(rec, clock, stats, wave)


def _step_wave(rec: _Recorder, plan: SamplingPlan, pending: list[tuple[Branch, str, dict[str, Any], str | None, Decision]],
               results: list[GenerationResult | None], stats: dict[str, int], prefetch: bool) -> list[Branch]:
    """Apply a wave's replies (`results[i]`: the engine's answer to `pending[i]`, None for a plan's fixed replies);
    the live branches after."""
    turns = []
    for (branch, agent, obs, adapter, decision), res in zip(pending, results):
        if decision.replies is None:
            replies = [Reply(c.text, list(c.token_ids), list(c.logprobs), c.finish_reason, reasoning=c.reasoning)
                       for c in res.completions]
            prompt_ids = list(res.prompt_ids)
        else:
            replies = [Reply(text, [], [], "fixed", sampled=False) for text in decision.replies]
            prompt_ids = []
            stats["fixed_replies"] += len(replies)
            if branch.counterfactual is not None:
                stats["counterfactual_fixed_replies"] += len(replies)
        turns.append((branch, agent, obs, adapter, prompt_ids, replies))
    live: list[Branch] = []
    with _prefetched_runs(turns if prefetch else [], stats):
        for branch, agent, obs, adapter, prompt_ids, replies in turns:
            live.extend(plan.expand(Turn(rec, branch, agent, obs, adapter, prompt_ids, replies)))
    return live


def _rollout(rec: _Recorder, clock: _Clock, stats: dict[str, int], wave: int) -> Rollout:
    stats = dict(stats)
    stats["waves"] = wave
    stats["samples"] = len(rec.samples)
    stats["episodes"] = len(rec.episodes)
    stats["cut_episodes"] = sum(ep.cut for ep in rec.episodes)
    stats["env_errors"] = sum(ep.error is not None for ep in rec.episodes)
    stats["counterfactual_episodes"] = sum(ep.counterfactual is not None for ep in rec.episodes)
    return Rollout(samples=rec.samples, episodes=rec.episodes, stats=stats, timings=clock.timings())
