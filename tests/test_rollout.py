"""The rollout driver: wave batching, fork discipline, independence of parallel episodes, plan extension."""

from __future__ import annotations

import copy
import itertools
from functools import partial

import pytest

from envs import delegation
from llm_marl.engines.base import SamplingParams
from llm_marl.rollout import (Decision, Parallel, Task, collate, make_tasks, parallel, resolve_sigma, rollout, tree)
from llm_marl_envs import plan_path_v2
from llm_marl_envs.plan_path.generator import PlanPathInstance
from llm_marl_envs.plan_path.rules import Grid

try:
    from llm_marl.engines.scripted import ScriptedEngine
except ImportError:  # the engines land in parallel; same constructor
    from envs.fake_engine import ScriptedEngine

INSTANCE = PlanPathInstance(Grid(3, 4, frozenset({(0, 2), (1, 2)})), (0, 0), (1, 3), 6)
SIGMA = {"tool": "tool-lora", "planner": "planner-lora"}


class Counting:
    def __init__(self, inner):
        self.inner = inner
        self.calls = []
        self.seeds = []

    def generate(self, requests, sampling):
        self.calls.append(list(requests))
        self.seeds.append(sampling.seed)
        return self.inner.generate(requests, sampling)


def engine(reply_fn=lambda req, k: "hello"):
    return Counting(ScriptedEngine(reply_fn))


def plan_path_task(task_id, mode="mas", max_turns=2):
    return Task(task_id, partial(plan_path_v2.raw_env, mode=mode, max_turns=max_turns), seed=0, options={"instance": INSTANCE})


def snapshot(env):
    """Everything the contract exposes about the state."""
    return (env.agent_selection, list(env.agents), copy.deepcopy(env.infos), dict(env.rewards), dict(env.terminations),
            dict(env.truncations), {a: env.observe(a) for a in env.possible_agents})


def test_one_engine_call_per_wave_across_envs_branches_and_roles():
    eng = engine()
    tasks = (make_tasks("plan_path", seeds=[0, 1], env_kwargs={"max_turns": 2, "height": 6, "width": 6})
             + make_tasks("plan_path", seeds=[0], env_kwargs={"mode": "planner", "max_turns": 2, "height": 6, "width": 6},
                          prefix="plan_path-single"))
    out = rollout(tasks, parallel(2), eng, sigma=SIGMA)
    # mas: tool, planner, tool, planner; single planner: planner, planner. Garbage text never ends early.
    assert out.stats["waves"] == out.stats["engine_calls"] == len(eng.calls) == 4
    assert [len(c) for c in eng.calls] == [6, 6, 4, 4]
    first = eng.calls[0]
    assert {r.tag.task_id for r in first} == {t.task_id for t in tasks}
    assert {(r.tag.agent, r.adapter) for r in first} == {("tool", "tool-lora"), ("planner", "planner-lora")}
    assert all(r.n == 1 for c in eng.calls for r in c)
    assert len(out.samples) == 4 * 4 + 2 * 2 and len(out.episodes) == 6
    assert all(not ep.success and not ep.cut for ep in out.episodes)


def test_forks_never_mutate_the_original():
    env = plan_path_v2.raw_env(mode="mas", max_turns=2)
    env.reset(seed=0, options={"instance": INSTANCE})
    before = snapshot(env)
    f = env.fork()
    f.step("```python\nprint('[D, D, R]')\n```")
    f.step("#### [D, D, R]")
    assert snapshot(env) == before
    assert "Current position: (2, 1)" in f.observe("tool")["messages"][-1]["content"]
    g = env.fork()
    assert snapshot(g) == before

    d = delegation.raw_env()
    d.reset(seed=3)
    before = snapshot(d)
    fd = d.fork()
    fd.step("<delegate>x</delegate>")
    fd.step("<summary>y</summary>")
    assert snapshot(d) == before and fd.agent_selection == "planner"


class Spy:
    """Proxy that logs which environment object is stepped; forks are new spies."""

    serial = itertools.count()

    def __init__(self, env, log):
        self._env, self._log, self.id = env, log, next(Spy.serial)

    def __getattr__(self, name):
        return getattr(self._env, name)

    def step(self, action):
        self._log.append(self.id)
        self._env.step(action)

    def fork(self):
        return Spy(self._env.fork(), self._log)


def test_tree_steps_only_forks_and_each_fork_once():
    log, roots = [], []

    def make():
        roots.append(Spy(plan_path_v2.raw_env(mode="planner", max_turns=3), log))
        return roots[-1]

    answers = itertools.cycle(["#### [D]", "#### [U]", "#### [R]"])
    out = rollout([Task("t", make, seed=0, options={"instance": INSTANCE})], tree(3), engine(lambda req, k: next(answers)))
    assert len(out.samples) == 9 and out.stats["waves"] == 3
    assert roots[0].id not in log
    assert sorted(log) == sorted(set(log))  # 9 forks, each stepped once
    assert snapshot(roots[0]._env)[0] == "planner" and roots[0]._env.infos["planner"]["turn"] == 0


def test_parallel_episodes_are_independent():
    script = {"t/g0": ["#### [D, D, R, R, R, U]"], "t/g1": ["#### [D, D, R]", "#### [U]"], "t/g2": ["#### [R]", "#### [D]"]}
    eng = engine(lambda req, k: script[req.tag.episode_id][req.tag.step])
    out = rollout([plan_path_task("t", mode="planner")], parallel(3), eng)
    eps = out.episodes_by_id()
    assert eps["t/g0"].success and len(eps["t/g0"].sample_ids) == 1
    assert not eps["t/g1"].success and not eps["t/g2"].success
    second = {out.samples[ep.sample_ids[1]].episode_id: out.samples[ep.sample_ids[1]] for ep in eps.values() if ep.steps == 2}
    assert "Current position: (2, 1)" in second["t/g1"].messages[-1]["content"]
    assert "Current position: (0, 1)" in second["t/g2"].messages[-1]["content"]
    # All G episodes start from one identical prompt; only the unfinished ones get a second wave.
    firsts = [out.samples[ep.sample_ids[0]] for ep in eps.values()]
    assert all(s.messages == firsts[0].messages for s in firsts)
    assert [len(c) for c in eng.calls] == [3, 2]
    assert eps["t/g1"].returns["planner"] == pytest.approx(sum(out.samples[i].reward for i in eps["t/g1"].sample_ids))


class FixedPlanner(Parallel):
    """A plan written outside the driver: the planner's replies are fixed (a replay), the tool samples."""

    def decide(self, branch, agent, observation):
        return Decision(replies=("#### [D, D, R]",)) if agent == "planner" else Decision(n=1)


def test_a_new_plan_needs_no_driver_change():
    eng = engine(lambda req, k: "```python\nprint('[R]')\n```")
    out = rollout([plan_path_task("t")], FixedPlanner(1), eng, sigma=SIGMA)
    assert all(r.tag.agent == "tool" for c in eng.calls for r in c) and len(eng.calls) == 2
    planner = [s for s in out.samples if s.role == "planner"]
    assert len(planner) == 2 and not any(s.trainable for s in planner)
    assert all(s.prompt_ids == [] and s.response_ids == [] for s in planner)
    assert out.stats["fixed_replies"] == 2 and out.stats["engine_calls"] == 2


class ForkAt(Parallel):
    """MHGPO-style fork point written outside the driver: G replies at `agent`'s first turn, all go on."""

    def __init__(self, agent, G):
        super().__init__(1)
        self.agent, self.fork_G = agent, G

    def decide(self, branch, agent, observation):
        return Decision(n=self.fork_G) if agent == self.agent and not branch.data.get("forked") else Decision(n=1)

    def expand(self, turn):
        if len(turn.replies) == 1:
            return super().expand(turn)
        outs = [turn.step(c, fork=True, episode_id=f"{turn.branch.episode_id}/f{c}") for c in range(len(turn.replies))]
        for o in outs:
            o.branch.data["forked"] = True
        return [o.branch for o in outs]


def test_fork_point_plan_keeps_every_fork():
    eng = engine(lambda req, k: "#### [D]" if req.tag.agent == "planner" else "```python\nprint('[D]')\n```")
    out = rollout([plan_path_task("t")], ForkAt("planner", 2), eng)
    assert [[r.n for r in c] for c in eng.calls] == [[1], [2], [1, 1], [1, 1]]
    eps = out.episodes_by_id()
    assert sorted(eps) == ["t/g0/f0", "t/g0/f1"]
    shared = out.samples[eps["t/g0/f0"].sample_ids[0]]
    assert shared.role == "tool" and all(ep.sample_ids[0] == shared.sample_id for ep in eps.values())
    assert all(len(ep.sample_ids) == 4 for ep in eps.values())


def test_max_steps_cuts_the_episode():
    eng = engine(lambda req, k: "<delegate>x</delegate>" if req.tag.agent == "planner" else "<summary>y</summary>")
    out = rollout([Task("d", partial(delegation.raw_env, max_turns=3), seed=1)], parallel(1), eng, max_steps=2)
    (ep,) = out.episodes
    assert ep.cut and ep.steps == 2 and out.stats["cut_episodes"] == 1


def test_wave_seeds_are_derived_and_reproducible():
    seeds = []
    for _ in range(2):
        eng = engine()
        rollout([plan_path_task("t", mode="planner")], parallel(2), eng, sampling=SamplingParams(seed=7))
        seeds.append(eng.seeds)
    assert seeds[0] == seeds[1] and len(set(seeds[0])) == 2
    eng = engine()
    rollout([plan_path_task("t", mode="planner")], parallel(2), eng)
    assert eng.seeds == [None, None]


def test_sigma_forms_and_user_errors():
    assert resolve_sigma(None)("tool") is None
    assert resolve_sigma(lambda r: r.upper())("tool") == "TOOL"

    class Policies:
        def adapter_for(self, role):
            return "shared"

    assert resolve_sigma(Policies())("planner") == "shared"
    with pytest.raises(ValueError, match="role 'tool' has no adapter"):
        rollout([plan_path_task("t")], parallel(1), engine(), sigma={"planner": "p"})
    with pytest.raises(ValueError, match="unique"):
        rollout([plan_path_task("t"), plan_path_task("t")], parallel(1), engine())
    with pytest.raises(ValueError, match="unknown environment"):
        make_tasks("no_such_env", seeds=[0])
    with pytest.raises(ValueError, match="G >= 1"):
        parallel(0)


def test_collate_pads_and_segments_by_episode():
    script = {"t/g0": ["#### [D, D, R, R, R, U]"], "t/g1": ["#### [D]", "#### [D]"]}
    out = rollout([plan_path_task("t", mode="planner")], parallel(2), engine(lambda req, k: script[req.tag.episode_id][req.tag.step]))
    batch = collate(out.samples, segment="episode")
    lengths = [len(s.response_ids) for s in out.samples]
    assert batch["response_ids"].shape == (3, max(lengths))
    assert batch["response_mask"].sum(dim=1).tolist() == lengths
    assert batch["segment_ids"].tolist() == [0, 1, 1]
    assert collate(out.samples)["segment_ids"].tolist() == [0, 1, 2]


# ---------------------------------------------------------------------------- a reply that breaks the environment
def _fragile_plan_path(**kwargs):
    """Plan-Path whose step raises on one reply, as an environment with a bug would."""
    from llm_marl_envs.plan_path.env import raw_env

    class Fragile(raw_env):
        def _play(self, agent, reply):
            if "POISON" in reply:
                raise RecursionError("maximum recursion depth exceeded")
            return super()._play(agent, reply)

    return Fragile(**kwargs)


def test_a_tree_rollout_with_one_poisoned_candidate_completes():
    """One of K tool candidates makes the environment raise: that candidate is penalised and its fork
    dropped, another continues, and every other task plays to the end (issue 11, finding 6)."""
    from agents.oracle import make_oracle
    from llm_marl.rollout import Task, tree
    from llm_marl.rollout.driver import ENV_ERROR_PENALTY

    quick = {"height": 4, "width": 4, "wall_density": 0.15, "min_path_length": 2, "max_path_length": 4, "max_turns": 2}
    tasks = [Task(f"t{i}", lambda: _fragile_plan_path(**quick), seed=i, options={"split": "train"}) for i in range(3)]
    oracle = make_oracle("plan_path", program="answer")

    def reply(request, k):
        if request.tag.task_id == "t1" and request.tag.agent == "tool" and k == 0:
            return "POISON"
        return oracle.act(request.tag.agent, {"messages": request.messages})

    out = rollout(tasks, tree(3), ScriptedEngine(reply), sampling=SamplingParams(seed=0))
    poisoned = [s for s in out.samples if s.text == "POISON"]
    assert len(poisoned) == 1 and poisoned[0].reward == ENV_ERROR_PENALTY and not poisoned[0].selected
    assert poisoned[0].info["env_error"].startswith("RecursionError") and "environment error" in poisoned[0].info["parse_error"]
    assert sorted(ep.task_id for ep in out.episodes) == ["t0", "t1", "t2"]
    assert all(ep.success and ep.error is None for ep in out.episodes)
    assert out.stats["env_errors"] == 0


def test_a_line_of_play_whose_environment_raises_ends_and_the_others_go_on():
    from llm_marl.rollout import Task

    quick = {"height": 4, "width": 4, "wall_density": 0.15, "min_path_length": 2, "max_path_length": 4, "max_turns": 2}
    tasks = [Task(f"t{i}", lambda: _fragile_plan_path(mode="planner", **quick), seed=i, options={"split": "train"})
             for i in range(2)]
    out = rollout(tasks, parallel(2), ScriptedEngine(lambda r, k: "POISON" if r.tag.episode_id == "t0/g1" else "#### [U]"),
                  sampling=SamplingParams(seed=0))
    broken = [ep for ep in out.episodes if ep.error]
    assert [ep.episode_id for ep in broken] == ["t0/g1"] and broken[0].cut and broken[0].steps == 1
    assert out.stats["env_errors"] == 1
    assert {ep.episode_id for ep in out.episodes} == {"t0/g0", "t0/g1", "t1/g0", "t1/g1"}
    assert all(ep.steps == 2 or ep.success for ep in out.episodes if not ep.error)


def _tool_or_planner_reply(req, k):
    """Tool programs that differ by candidate (one fails, one never compiles); planner move lists."""
    if req.tag.agent == "tool":
        programs = ["print('[R, R]')", "print('[D]')", "raise SystemExit(3)", "print('[R'", "print('[U, R]')"]
        return f"```python\n{programs[(k + req.tag.step) % len(programs)]}\n```"
    return ["#### [R, R, D]", "#### [D, R]", "no answer", "#### [R]"][(k + req.tag.step) % 4]


@pytest.mark.parametrize("plan", [tree(K=4), parallel(3)], ids=["tree", "parallel"])
def test_prefetched_sandbox_runs_give_the_same_rollout(plan):
    """The programs of a wave run at once before the branches are stepped; nothing observable changes."""
    from llm_marl_envs.sandbox import Sandbox

    with Sandbox(workers=2) as sandbox:
        def run(prefetch):
            tasks = (make_tasks("plan_path", seeds=[0, 1], env_kwargs={"max_turns": 2, "height": 5, "width": 5,
                                                                       "min_path_length": 3, "sandbox": sandbox})
                     + make_tasks("sudoku", seeds=[0], env_kwargs={"max_turns": 1, "sandbox": sandbox}))
            return rollout(tasks, plan, engine(_tool_or_planner_reply), sigma=SIGMA,
                           sampling=SamplingParams(seed=0), prefetch=prefetch)

        before, after = run(False), run(True)
    assert before.stats["prefetched_calls"] == 0 and after.stats["prefetched_calls"] > 0
    fields = lambda s: (s.sample_id, s.episode_id, s.decision_id, s.candidate, s.role, s.step, s.text, s.reward, s.info,
                        s.messages)
    assert [fields(s) for s in after.samples] == [fields(s) for s in before.samples]
    assert [(e.episode_id, e.returns, e.success, e.final_infos) for e in after.episodes] == \
        [(e.episode_id, e.returns, e.success, e.final_infos) for e in before.episodes]
    statuses = {s.info.get("tool_status") for s in after.samples if s.role == "tool"}
    assert {"ok", "error"} <= statuses


@pytest.mark.parametrize("transport", ["direct", "subprocess"])
def test_prefetched_search_calls_give_the_same_rollout(transport):
    """Deep search (single agent): the searches and fetches of a wave are made at once, results unchanged."""
    from agents.oracle.deep_search import tool_call
    from llm_marl_envs.search.tools import SERVER_NAME

    queries = ["river", "director of the film", "capital city", "born in"]

    def reply(req, k):
        i = k + req.tag.step
        if i % 5 == 4:
            return "\\boxed{unknown}"
        if i % 3 == 2:
            return tool_call(SERVER_NAME, "fetch", {"url": "https://nowhere.invalid/page"})
        return tool_call(SERVER_NAME, "search", {"query": queries[i % len(queries)], "k": 3})

    def run(prefetch):
        tasks = make_tasks("deep_search", seeds=[0, 1], env_kwargs={"mode": "single", "max_single_turns": 3,
                                                                    "transport": transport})
        return rollout(tasks, tree(K=2), engine(reply), sigma={"planner": "p"}, sampling=SamplingParams(seed=0),
                       prefetch=prefetch)

    before, after = run(False), run(True)
    assert before.stats["prefetched_calls"] == 0 and after.stats["prefetched_calls"] > 0
    fields = lambda s: (s.sample_id, s.episode_id, s.candidate, s.text, s.reward, s.info, s.messages)
    assert [fields(s) for s in after.samples] == [fields(s) for s in before.samples]
    assert [(e.episode_id, e.returns, e.final_infos) for e in after.episodes] == \
        [(e.episode_id, e.returns, e.final_infos) for e in before.episodes]


@pytest.mark.parametrize("mode", ["mas", "single"])
def test_prefetched_mass_retrievals_give_the_same_rollout(mode):
    """MASS: the rewriter's retrievals (several searches per reply) and the single agent's searches."""
    def reply(req, k):
        i = k + req.tag.step
        if req.tag.agent == "rewriter":
            return ["river of the city", "director\nfilm studio", "capital\nborn in\nriver"][i % 3]
        if req.tag.agent == "reranker":
            return ["Document0,Document3", "Document1", "Document9,Document2"][i % 3]
        if mode == "single" and i % 3 != 2:
            return f"<search> {['river', 'director of the film', 'capital city'][i % 3]} </search>"
        return "<answer> unknown </answer>"

    def run(prefetch):
        kwargs = {"transport": "subprocess", **({"mode": "single", "max_single_turns": 3} if mode == "single" else {})}
        tasks = make_tasks("mass", seeds=[0, 1], env_kwargs=kwargs)
        return rollout(tasks, tree(K=2), engine(reply), sampling=SamplingParams(seed=0), prefetch=prefetch)

    before, after = run(False), run(True)
    assert before.stats["prefetched_calls"] == 0 and after.stats["prefetched_calls"] > 0
    fields = lambda s: (s.sample_id, s.episode_id, s.candidate, s.text, s.reward, s.info, s.messages)
    assert [fields(s) for s in after.samples] == [fields(s) for s in before.samples]


# Code (coder + tester): one program per kind of outcome, one test per kind of verdict.
_CODER_REPLIES = [
    "```python\nprint('SMALL')\n```",                                          # wrong on big inputs
    "```python\nraise SystemExit(3)\n```",                                     # fails
    "```python\nprint('BIG'\n```",                                             # does not compile
    "```python\nwhile True:\n    pass\n```",                                  # runs out of time
    "I would loop over the input.",                                            # no code block
    "```python\nn = int(input())\nprint('BIG' if n >= 10 else 'SMALL')\n```",  # wrong on 10 only
    "```python\nn = int(input())\nprint('BIG' if n > 10 else 'SMALL')\n```",   # right
]
_TESTER_TESTS = [("12", "BIG"), ("4", "SMALL"), ("10", "BIG"), ("-3", "SMALL")]  # valid, valid, wrong output, valid


def _coder_or_tester_reply(req, k):
    """Replies that vary by task, parallel episode, candidate and step."""
    task, episode = int(req.tag.task_id[-1]), req.tag.episode_id
    i = k + 3 * task + req.tag.step + (2 * int(episode[-1]) if "/g" in episode else 0)
    if req.tag.agent == "coder":
        if i % 7 == 3 and (task, req.tag.step) != (1, 0):
            i += 1  # one timing-out program per rollout keeps the test short
        return _CODER_REPLIES[i % 7]
    if i % 5 == 4:
        return "No test this time."
    stdin, out = _TESTER_TESTS[i % len(_TESTER_TESTS)]
    return f"**Test Input:**\n```\n{stdin}\n```\n**Test Output:**\n```\n{out}\n```"


@pytest.mark.parametrize("plan", [tree(K=3), parallel(2)], ids=["tree", "parallel"])
def test_prefetched_code_runs_give_the_same_rollout(plan):
    """Code: the coder's program on the golden and smoke inputs, and the tester's suite runs, reference
    run and mutation batches are run at once per wave; right, wrong, failing, non-compiling and
    timing-out programs score as they do without prefetching."""
    from llm_marl_envs import code_v4
    from llm_marl_envs.code import env as code_env
    from llm_marl_envs.code.env import CodeInstance
    from llm_marl_envs.code.problems import Problem, TestCase
    from llm_marl_envs.code.runner import HARNESS
    from llm_marl_envs.sandbox import Sandbox, SandboxLimits

    problem = Problem(
        id="threshold-prefetch", title="Threshold", statement="Read an integer n. Print BIG if n > 10, otherwise SMALL.",
        reference="n = int(input())\nprint('BIG' if n > 10 else 'SMALL')\n", split="train",
        examples=(TestCase("3\n", "SMALL\n"),),
        tests=tuple(TestCase(f"{n}\n", "BIG\n" if n > 10 else "SMALL\n") for n in (5, 9, 10, 11, 20)), source="unit")

    with Sandbox(SandboxLimits(wall_time_s=2.0, cpu_time_s=2.0, memory_mb=256, output_bytes=20_000), workers=2) as sandbox:
        ran, planned = set(), set()  # (code, stdin, limits) of the runs made without prefetching, and of those prefetched
        run, run_many, prefetched = sandbox.run, sandbox.run_many, sandbox.prefetched

        def recording_run(code, stdin="", limits=None):
            ran.add((code, stdin, limits or sandbox.limits))
            return run(code, stdin, limits)

        def recording_run_many(jobs, limits=None):
            ran.update((code, stdin, limits or sandbox.limits) for code, stdin in jobs)
            return run_many(jobs, limits)

        def recording_prefetched(jobs, limits=None):
            planned.update((code, stdin, limits or sandbox.limits) for code, stdin in jobs)
            return prefetched(jobs, limits)

        def play(prefetch):
            code_env._ANALYSES.clear()  # each run computes the mutation analysis and its kill sets itself
            sandbox.run, sandbox.run_many, sandbox.prefetched = (
                (run, run_many, recording_prefetched) if prefetch else (recording_run, recording_run_many, prefetched))
            tasks = [Task(f"code/{i}", partial(code_v4.raw_env, problems=[problem], max_turns=2, time_limit_s=0.5, sandbox=sandbox),
                          seed=i, options={"instance": CodeInstance(problem, i)}) for i in range(2)]
            return rollout(tasks, plan, engine(_coder_or_tester_reply), sigma={"coder": "c", "tester": "t"},
                           sampling=SamplingParams(seed=0), prefetch=prefetch)

        before, after = play(False), play(True)
    assert before.stats["prefetched_calls"] == 0 and after.stats["prefetched_calls"] > 0
    # Every prefetched run is one the steps make (same program, input and limits), the mutation batches included;
    # left to the steps: the mutation analysis (once per problem, at the first tester step) and waves of one run.
    assert planned <= ran and any(code == HARNESS for code, _, _ in planned)
    assert len(ran - planned) <= 3, (len(ran), len(planned))
    fields = lambda s: (s.sample_id, s.episode_id, s.decision_id, s.candidate, s.role, s.step, s.text, s.reward, s.info,
                        s.messages)
    assert [fields(s) for s in after.samples] == [fields(s) for s in before.samples]
    assert [(e.episode_id, e.returns, e.success, e.final_infos) for e in after.episodes] == \
        [(e.episode_id, e.returns, e.success, e.final_infos) for e in before.episodes]
    statuses = {s.info.get("code_status") for s in after.samples if s.role == "coder"}
    assert {"ok", "smoke_failed", "syntax_error", "no_code"} <= statuses
    assert {s.info.get("test_valid") for s in after.samples if s.role == "tester"} == {True, False}


def test_rollout_timings_split_its_wall_time():
    """Engine calls, environment work and tool waits are timed apart (`Rollout.timings`); never more than the rollout."""
    from llm_marl_envs.sandbox import Sandbox

    with Sandbox(workers=2) as sandbox:
        tasks = make_tasks("plan_path", seeds=[0, 1], env_kwargs={"max_turns": 2, "height": 5, "width": 5, "sandbox": sandbox})
        out = rollout(tasks, tree(K=2), engine(_tool_or_planner_reply), sigma=SIGMA, sampling=SamplingParams(seed=0))
    timings = out.timings
    assert set(timings) == {"generate_s", "env_s", "tool_s", "rollout_s"} and min(timings.values()) >= 0
    assert timings["generate_s"] + timings["env_s"] + timings["tool_s"] <= timings["rollout_s"]
    assert timings["tool_s"] > 0  # the tool's programs ran in the sandbox


def test_step_time_parts_add_up_to_the_step():
    from llm_marl.signal import step_line
    from llm_marl.step_time import PARTS, step_time_metrics

    metrics = step_time_metrics(10.0, {"generate_s": 6.0, "env_s": 0.25, "tool_s": 0.5, "rollout_s": 7.0}, credit_s=0.25, update_s=2.5)
    assert list(metrics) == [f"perf/{part}_s" for part in PARTS] and metrics["perf/other_s"] == 0.5
    assert sum(metrics.values()) == 10.0
    line = step_line(1, 2, {"perf/step_s": 10.0, **metrics})
    assert line.endswith("10.0 s (generate 6.0, env 0.2, tool 0.5, credit 0.2, update 2.5, other 0.5)")
    assert step_time_metrics(1.0, {}, credit_s=0.0, update_s=0.5)["perf/other_s"] == 0.5  # no rollout timings: all other
