"""Credit, group keys and advantages of each algorithm, computed by hand on scripted engines."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from functools import partial

import pytest
import torch

from envs import delegation
from llm_marl.advantage import AdvantageConfig, group_advantages
from llm_marl.algorithms import ALGORITHMS, assign_advantages, get
from llm_marl.engines.base import SamplingParams
from llm_marl.rollout import Task, batches_by_adapter, rollout
from llm_marl_envs import plan_path_v2
from llm_marl_envs.plan_path.generator import PlanPathInstance
from llm_marl_envs.plan_path.rules import Grid

try:
    from llm_marl.engines.scripted import ScriptedEngine
except ImportError:  # the engines land in parallel; same constructor
    from envs.fake_engine import ScriptedEngine

EPS = 1e-6
# A . # .
# . . # G      start (0,0), goal (1,3): shortest path D D R R R U, d0 = 4
# . . . .
INSTANCE = PlanPathInstance(Grid(3, 4, frozenset({(0, 2), (1, 2)})), (0, 0), (1, 3), 6)


class Counting:
    """Wraps an engine and records every generate call."""

    def __init__(self, inner):
        self.inner = inner
        self.calls = []

    def generate(self, requests, sampling):
        self.calls.append(list(requests))
        return self.inner.generate(requests, sampling)


def code(moves: str) -> str:
    return f"```python\nprint('{moves}')\n```"


def role_and_turn(request):
    system = request.messages[0]["content"]
    role = "tool" if "programming" in system else "planner"
    user = request.messages[-1]["content"]
    turn = next(t for t in range(4) if f"Turn {t + 1} of" in user)
    return role, turn


def pair_adv(winner: float, loser: float) -> tuple[float, float]:
    """Eq. 1 for K = 2 with the sample std: ±(d/2) / (|d|/√2 + eps)."""
    d = winner - loser
    a = (d / 2) / (abs(d) / math.sqrt(2) + EPS)
    return a, -a


def plan_path_task(task_id: str, mode: str = "mas", max_turns: int = 2) -> Task:
    return Task(task_id, partial(plan_path_v2.raw_env, mode=mode, max_turns=max_turns), seed=0, options={"instance": INSTANCE})


# ---------------------------------------------------------------------------- AT-GRPO
# (role, turn) -> K = 2 candidate replies and their Eq. 4 credits (α = 1): α·r_team + m·r_loc.
# Tool r_loc = .1 fmt + .4 exec + .5 shape; planner r_loc = .2 fmt + .4 leg + .4 sp (appendix A.1.4).
TREE = {
    ("tool", 0): [(code("[U]"), 0.0 + 0.6),            # fmt, no exec (off grid), shape kept
                  (code("[D, D, R]"), 0.25 + 1.0)],    # d 4 -> 3: team 1/4
    ("planner", 0): [("#### [D, D, R]", 0.25 + 1.0),   # applied: (0,0) -> (2,1)
                     ("#### [R, R, D]", 0.25 + 0.6)],  # second R hits the wall: not legal
    ("tool", 1): [(code("[R, R, U]"), 1.0 + 1.0),      # from (2,1) reaches the goal
                  ("I would go right.", 0.0 + 0.0)],   # no code: mask 0
    ("planner", 1): [("#### [R]", 0.25 + 1.0),
                     ("#### [R, R, U]", 1.0 + 1.0)],   # goal: success
}
WINNER = {("tool", 0): 1, ("planner", 0): 0, ("tool", 1): 0, ("planner", 1): 1}


def tree_reply(request, k):
    return TREE[role_and_turn(request)][k][0]


@pytest.fixture(scope="module")
def at_grpo_run():
    algo = get("at-grpo")
    config = algo.config_cls(K=2, alpha=1.0)
    engine = Counting(ScriptedEngine(tree_reply))
    tasks = [plan_path_task("pp-a"), plan_path_task("pp-b")]
    out = rollout(tasks, algo.sampling_plan(config), engine, sigma={"tool": "tool", "planner": "planner"},
                  sampling=SamplingParams(temperature=1.0, max_new_tokens=64, seed=0))
    stats = assign_advantages(out, algo, config, AdvantageConfig(scale="std", eps=EPS))
    return out, stats, engine


def test_at_grpo_groups_hold_k_candidates_from_one_identical_prompt(at_grpo_run):
    out, stats, _ = at_grpo_run
    groups = defaultdict(list)
    for s in out.samples:
        groups[s.group_key].append(s)
    # 2 tasks x 2 turns x 2 agents, never merged across tasks.
    assert sorted(groups) == sorted((t, r, k) for t in ("pp-a", "pp-b") for r in ("tool", "planner") for k in (0, 1))
    for key, members in groups.items():
        assert len(members) == 2
        assert len({s.decision_id for s in members}) == 1
        assert members[0].messages == members[1].messages and members[0].prompt_ids == members[1].prompt_ids
        assert members[0].text != members[1].text
        assert sorted(s.candidate for s in members) == [0, 1]
    assert stats["advantage/groups"] == 8 and stats["advantage/singleton_groups"] == 0
    assert stats["advantage/zero_std_groups"] == 0


def test_at_grpo_exact_credits_and_advantages(at_grpo_run):
    out, _, _ = at_grpo_run
    for s in out.samples:
        key = (s.role, s.turn)
        assert s.credit == pytest.approx(TREE[key][s.candidate][1])
        win = WINNER[key]
        a_win, a_lose = pair_adv(TREE[key][win][1], TREE[key][1 - win][1])
        assert s.advantage == pytest.approx(a_win if s.candidate == win else a_lose, abs=1e-6)
        assert s.selected == (s.candidate == win)
        assert s.adapter == s.role


def test_at_grpo_continuation_follows_the_argmax(at_grpo_run):
    out, _, engine = at_grpo_run
    assert len(out.episodes) == 2 and all(ep.success for ep in out.episodes)
    for ep in out.episodes:
        path = [out.samples[i] for i in ep.sample_ids]
        assert [(s.role, s.turn, s.candidate) for s in path] == [
            ("tool", 0, 1), ("planner", 0, 0), ("tool", 1, 0), ("planner", 1, 1)]
        assert all(s.selected for s in path)
        # Later prompts show the selected candidates' effects, not the losers'.
        assert "Tool proposed action list: [D, D, R]" in path[1].messages[-1]["content"]
        assert "Current position: (2, 1)" in path[2].messages[-1]["content"]
        assert "Tool proposed action list: [R, R, U]" in path[3].messages[-1]["content"]
        assert ep.returns["planner"] == pytest.approx(0.5 * 0.25 + 0.5 * 1.0 + 1.0)
    # One engine call per agent turn; both tasks' requests in the same call, each with n = K.
    assert len(engine.calls) == out.stats["waves"] == 4
    for call in engine.calls:
        assert len(call) == 2 and all(r.n == 2 for r in call)
        assert {r.tag.task_id for r in call} == {"pp-a", "pp-b"}


def test_at_grpo_alpha_and_env_reward_options():
    at = get("at-grpo")
    sample = type("S", (), {})()
    sample.info = {"team_reward": 0.25, "local_reward": 0.6, "mask": 1.0, "penalty": 0.0, "reward": 0.425}
    sample.reward = 0.425
    assert at.credit(sample, None, at.config_cls(alpha=2.0)) == pytest.approx(2 * 0.25 + 0.6)
    assert at.credit(sample, None, at.config_cls(reward="env")) == pytest.approx(0.425)
    sample.info = {**sample.info, "mask": 0.0}
    assert at.credit(sample, None, at.config_cls()) == pytest.approx(0.25)
    with pytest.raises(ValueError, match="K >= 2"):
        at.config_cls(K=1)


def test_per_policy_batches_route_by_adapter(at_grpo_run):
    out, _, _ = at_grpo_run
    batches = batches_by_adapter(out.samples)
    assert set(batches) == {"tool", "planner"}
    assert all(s.role == "tool" for s in batches["tool"]) and len(batches["tool"]) == 8
    assert all(s.role == "planner" for s in batches["planner"]) and len(batches["planner"]) == 8


# ---------------------------------------------------------------------------- MATPO
MATPO_SCRIPT = {
    # episode -> planner replies in order, worker replies in order
    "q/g0": (["<delegate>add 2 and 3</delegate>", "\\boxed{5}"], ["<summary>2 + 3 = 5</summary>"]),
    "q/g1": (["<delegate>add them</delegate>", "\\boxed{6}"], ["it is 6"]),   # invalid summary, wrong answer
    "q/g2": (["\\boxed{5}"], []),                                            # answers at once
    "r/g0": (["\\boxed{1}"], []), "r/g1": (["\\boxed{1}"], []), "r/g2": (["\\boxed{1}"], []),  # all equal
}
# r(τ) = 0.9·acc + 0.1·fmt, fmt = 0.5·fmt_p + 0.5·fmt_w (fmt_p alone without workers)
MATPO_R = {"q/g0": 0.9 + 0.1 * 1.0, "q/g1": 0.0 + 0.1 * 0.5, "q/g2": 0.9 + 0.1 * 1.0,
           "r/g0": 1.0, "r/g1": 1.0, "r/g2": 1.0}


def matpo_reply(request, k):
    tag = request.tag
    planner, worker = MATPO_SCRIPT[tag.episode_id]
    # Steps alternate planner, worker, planner: the planner's j-th reply is at step 2j.
    return planner[tag.step // 2] if tag.agent == "planner" else worker[tag.step // 2]


def test_matpo_g3_broadcasts_the_rollout_advantage_to_workers():
    algo = get("matpo")
    config = algo.config_cls(G=3)
    engine = Counting(ScriptedEngine(matpo_reply))
    tasks = [Task("q", partial(delegation.raw_env, max_turns=3), options={"instance": delegation.Question("What is 2 + 3?", "5")}),
             Task("r", partial(delegation.raw_env, max_turns=3), options={"instance": delegation.Question("What is 0 + 1?", "1")})]
    out = rollout(tasks, algo.sampling_plan(config), engine, sigma={"planner": "shared", "worker_0": "shared"})
    stats = assign_advantages(out, algo, config, AdvantageConfig(eps=EPS))

    eps = out.episodes_by_id()
    assert sorted(eps) == sorted(MATPO_SCRIPT)
    assert [out.samples[i].role for i in eps["q/g0"].sample_ids] == ["planner", "worker_0", "planner"]
    assert eps["q/g0"].final_infos["planner"]["reward"] == pytest.approx(MATPO_R["q/g0"])
    # Advantage over the planner's G = 3 rollouts (one member each), not over the 7 samples.
    r = [MATPO_R[f"q/g{i}"] for i in range(3)]
    mean, std = statistics.mean(r), statistics.stdev(r)
    expected = {f"q/g{i}": (r[i] - mean) / (std + EPS) for i in range(3)}
    for s in out.samples:
        assert s.credit == pytest.approx(MATPO_R[s.episode_id])
        assert s.group_key == s.task_id
        if s.task_id == "q":
            assert s.advantage == pytest.approx(expected[s.episode_id], abs=1e-6)
        else:
            assert s.advantage == 0.0  # zero-variance group: counted, not passed through
    workers = [s for s in out.samples if s.role == "worker_0"]
    assert len(workers) == 2 and workers[0].advantage > 0 > workers[1].advantage
    assert stats["advantage/members"] == 6 and stats["advantage/groups"] == 2
    assert stats["advantage/zero_std_groups"] == 1 and stats["advantage/zeroed_samples"] == 3
    # Waves: all 6 planners; the 2 workers; the 2 planners' answers.
    assert [len(c) for c in engine.calls] == [6, 2, 2]


# ---------------------------------------------------------------------------- GRPO
GRPO_SCRIPT = {
    "pp/g0": ["#### [D, D, R, R, R, U]"],                 # solved at once: r = 1
    "pp/g1": ["#### [D, D, R]", "#### [R, R, U]"],       # 0.5·.25 + 0.5·1, then the goal: 1
    "pp/g2": ["no answer", "still no answer"],           # 0, 0
}
GRPO_STEP_R = {"pp/g0": [1.0], "pp/g1": [0.625, 1.0], "pp/g2": [0.0, 0.0]}


@pytest.mark.parametrize("return_kind", ["mean", "sum"])
def test_grpo_groups_are_tasks_and_episode_credit_is_broadcast(return_kind):
    algo = get("grpo")
    config = algo.config_cls(G=3, return_kind=return_kind)
    assert algo.env_kwargs(config, "plan_path") == {"mode": "planner"}
    engine = Counting(ScriptedEngine(lambda req, k: GRPO_SCRIPT[req.tag.episode_id][req.tag.step]))
    tasks = [plan_path_task("pp", mode=algo.env_kwargs(config, "plan_path")["mode"])]
    out = rollout(tasks, algo.sampling_plan(config), engine, sigma=lambda role: None)
    stats = assign_advantages(out, algo, config, AdvantageConfig(eps=EPS))

    agg = statistics.mean if return_kind == "mean" else sum
    R = {ep: agg(rs) for ep, rs in GRPO_STEP_R.items()}
    mean, std = statistics.mean(R.values()), statistics.stdev(R.values())
    assert len(out.samples) == 5 and {s.role for s in out.samples} == {"planner"}
    for s in out.samples:
        assert s.group_key == "pp"
        assert s.credit == pytest.approx(R[s.episode_id])
        assert s.advantage == pytest.approx((R[s.episode_id] - mean) / (std + EPS), abs=1e-6)
    assert [s.reward for s in out.samples if s.episode_id == "pp/g1"] == pytest.approx(GRPO_STEP_R["pp/g1"])
    assert stats["advantage/groups"] == 1 and stats["advantage/members"] == 3
    assert [len(c) for c in engine.calls] == [3, 2]


class NanRewardPlanPath(plan_path_v2.raw_env):
    """An environment bug: every step's reward is NaN (its infos stay finite)."""

    def step(self, action):
        agent = self.agent_selection
        super().step(action)
        self.rewards[agent] = float("nan")


def test_a_non_finite_environment_reward_is_refused_naming_the_task_and_step():
    algo = get("grpo")
    config = algo.config_cls(G=3)
    engine = ScriptedEngine(lambda req, k: GRPO_SCRIPT["pp/" + req.tag.episode_id.rsplit("/", 1)[1]][req.tag.step])
    tasks = [Task("plan_path/train/7", partial(NanRewardPlanPath, mode="planner", max_turns=2), seed=0,
                  options={"instance": INSTANCE})]
    out = rollout(tasks, algo.sampling_plan(config), engine, sigma=lambda role: None)
    with pytest.raises(ValueError, match=r"grpo: credit of sample 0 \(planner on plan_path/train/7\) is nan: the environment "
                                         r"returned non-finite values at planner's step 0 on plan_path/train/7/g0 \(reward nan\);"
                                         r".*; and 2 more\. An environment's rewards and infos must be finite numbers"):
        assign_advantages(out, algo, config)


class NanLocalRewardPlanPath(plan_path_v2.raw_env):
    """An environment bug in a value GRPO's credit (the step rewards) does not read: every local_reward info is NaN."""

    def step(self, action):
        agent = self.agent_selection
        super().step(action)
        self.infos[agent]["local_reward"] = float("nan")


@pytest.mark.parametrize("env_cls, algo_id, field", [(NanLocalRewardPlanPath, "grpo", "local_reward"),
                                                     (NanRewardPlanPath, "at-grpo", "reward")])
def test_a_non_finite_reward_no_credit_reads_is_left_out_of_the_metrics_counted_and_named(env_cls, algo_id, field):
    """GRPO reads the step rewards, not local_reward; AT-GRPO (Eq. 4) reads team_reward and local_reward, not the step
    reward. The step trains, and its metrics stay finite: a NaN mean would hide the step on every plot."""
    from llm_marl.trainer import nonfinite_messages, step_metrics

    algo = get(algo_id)
    if algo_id == "grpo":
        config = algo.config_cls(G=3)
        engine = ScriptedEngine(lambda req, k: GRPO_SCRIPT["pp/" + req.tag.episode_id.rsplit("/", 1)[1]][req.tag.step])
        mode, sigma = "planner", (lambda role: None)
    else:
        config, engine, mode, sigma = algo.config_cls(K=2, alpha=1.0), ScriptedEngine(tree_reply), "mas", {"tool": "tool", "planner": "planner"}
    tasks = [Task("plan_path/train/7", partial(env_cls, mode=mode, max_turns=2), seed=0, options={"instance": INSTANCE})]
    out = rollout(tasks, algo.sampling_plan(config), engine, sigma=sigma, sampling=SamplingParams(temperature=1.0, seed=0))
    metrics = step_metrics(out)
    metrics.update(assign_advantages(out, algo, config))  # no credit reads the NaN: no error
    assert all(math.isfinite(v) for v in metrics.values())
    played = defaultdict(int)
    for s in out.samples:
        played[s.role] += 1
    for role, steps in played.items():
        assert metrics[f"reward/nonfinite/{role}"] == steps
        assert f"reward/{field}/{role}" not in metrics  # no finite value to average
        assert metrics[f"reward/team_reward/{role}"] == pytest.approx(
            statistics.mean(s.info["team_reward"] for s in out.samples if s.role == role))
    (message,) = nonfinite_messages(out)
    assert message.startswith("the environment returned non-finite values, which no credit reads, at ")
    assert "'s step 0 on plan_path/train/7" in message and f"({field} nan)" in message
    assert "reward/nonfinite/<role> counts the steps left out" in message


def test_registry_ids_and_errors():
    assert set(ALGORITHMS) == {"grpo", "at-grpo", "matpo", "mhgpo", "sharp"}
    assert get("AT_GRPO").id == "at-grpo"
    with pytest.raises(ValueError, match="available: grpo, at-grpo, matpo, mhgpo, sharp"):
        get("ppo")
    with pytest.raises(ValueError, match="G >= 2"):
        get("matpo").config_cls(G=1)
    assert get("at-grpo").env_kwargs(get("at-grpo").config_cls(), "plan_path") == {}
    assert get("grpo").env_kwargs(get("grpo").config_cls(variant="tool"), "plan_path") == {"mode": "tool"}
    with pytest.raises(ValueError, match="no variant 'solo'"):
        get("grpo").env_kwargs(get("grpo").config_cls(variant="solo"), "plan_path")


def test_group_advantages_counts_singletons_and_flat_groups():
    rewards = torch.tensor([1.0, 0.0, 0.5, 0.5, 0.3, 2.0, 4.0])
    groups = ["a", "a", "flat", "flat", "one", ("t", 1), ("t", 1)]
    adv, stats = group_advantages(rewards, groups, eps=0.0)
    s = 1 / math.sqrt(2)
    assert adv.tolist() == pytest.approx([s, -s, 0, 0, 0, -s, s])
    assert stats["groups"] == 4 and stats["singleton_groups"] == 1 and stats["zero_std_groups"] == 1
    assert stats["zeroed_samples"] == 3 and stats["frac_zero_std"] == 0.25
    adv, _ = group_advantages(rewards, groups, scale="none")
    assert adv.tolist() == pytest.approx([0.5, -0.5, 0, 0, 0, -1.0, 1.0])
    with pytest.raises(ValueError, match="finite"):
        group_advantages(torch.tensor([math.nan, 1.0]), [0, 0])
