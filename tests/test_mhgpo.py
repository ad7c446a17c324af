"""MHGPO on mass_v4 with a scripted engine: Eq. 4 reward back-propagation, Eq. 5 groups for IS, FoF
and RR (with the batch-level regrouping of outputs before the fork point), all computed by hand."""

from __future__ import annotations

import collections
import math

import pytest

from llm_marl.algorithms import assign_advantages, get
from llm_marl.algorithms.mhgpo import Config, ForkOn
from llm_marl.engines.base import SamplingParams
from llm_marl.engines.scripted import ScriptedEngine
from llm_marl.rollout import make_tasks, rollout
from llm_marl_envs import mass_v4
from llm_marl_envs.mass import prompts
from llm_marl_envs.search.text import token_f1

EPS = 1e-6
MHGPO = get("mhgpo")


def role_of(request) -> str:
    system = request.messages[0]["content"]
    if system == prompts.REWRITER_SYSTEM:
        return "rewriter"
    return "reranker" if "identify and output the IDs" in system else "answerer"


def golds(task) -> tuple[str, ...]:
    env = task.make_env()
    env.reset(seed=task.seed, options=dict(task.options))
    return env.instance.golds


def partial(gold: str) -> str:
    return f"{gold} perhaps maybe"


def run(tasks, config: Config, script):
    """script(role, episode_id, k, gold) -> reply; returns (rollout, engine)."""
    gold_of = {t.task_id: golds(t)[0] for t in tasks}

    def reply(req, k):
        text = script(role_of(req), req.tag.episode_id, k, gold_of[req.tag.task_id])
        # Rewriter templates use the question itself ({q}), so retrieval finds passages.
        return text.replace("{q}", req.messages[-1]["content"].removeprefix("Original question is ")) if text else text

    engine = ScriptedEngine(reply)
    out = rollout(tasks, MHGPO.sampling_plan(config), engine, sigma=None, sampling=SamplingParams(seed=0))
    stats = assign_advantages(out, MHGPO, config)
    return out, engine, stats, gold_of


def by(out, role, trainable=True):
    return sorted((s for s in out.samples if s.role == role and s.trainable == trainable), key=lambda s: s.episode_id)


def zscore(values):
    m, sd = statistics_mean_std(values)
    return [(v - m) / (sd + EPS) for v in values]


def statistics_mean_std(values):
    import statistics

    return statistics.mean(values), statistics.stdev(values)


@pytest.fixture(scope="module")
def tasks():
    return make_tasks("mass", seeds=[0, 1], split="train")


# ------------------------------------------------------------------------------------------ FoF
def fof_script(role, episode_id, k, gold):
    if role == "rewriter":
        return ["### {q} ###", "### {q}; director? ###", ""][k]  # the third breaks the output rule: -0.5
    line = episode_id.rsplit("/", 1)[-1]
    if role == "reranker":
        return "Document0,Document0" if line == "g1" else "Document0,Document1"  # g1 repeats an id: -1
    return {"g0": gold, "g1": partial(gold), "g2": "nobody"}[line]


def test_fof_back_propagates_and_groups_heterogeneously(tasks):
    config = Config(G=3, sampling="fof")
    out, engine, stats, gold = run(tasks[:1], config, fof_script)
    fp = token_f1(partial(gold[tasks[0].task_id]), (gold[tasks[0].task_id],))
    assert 0 < fp < 1
    # n·G replies: G rewriter replies from one request, then G one-to-one lines.
    assert [sum(r.n for r in call) for call in engine.calls] == [3, 3, 3]
    f1 = [1.0, fp, 0.0]
    expected = {"rewriter": [1.0, fp, 0.0 - 0.5], "reranker": [1.0, fp - 1.0, 0.0], "answerer": f1}
    for role, credits in expected.items():
        samples = by(out, role)
        assert [s.credit for s in samples] == pytest.approx(credits)
        assert {s.group_key for s in samples} == {(tasks[0].task_id, "rewriter", role, 0)}
        assert [s.advantage for s in samples] == pytest.approx(zscore(credits), abs=1e-6)
    # The fork agent's group is homogeneous (one prompt), the later agents' are heterogeneous.
    assert len({str(s.messages) for s in by(out, "rewriter")}) == 1
    assert len({str(s.messages) for s in by(out, "reranker")}) >= 2
    assert stats["advantage/groups"] == 3


# ------------------------------------------------------------------------------------------ RR
def rr_script(role, episode_id, k, gold):
    task = episode_id.split("/")[2]
    if role == "rewriter":
        return "### {q} ###" if task == "0" else ""  # task 1's rewriter is penalised
    if role == "reranker":
        return "Document0,Document1"
    line = episode_id.rsplit("/", 1)[-1]
    answers = {("0", "g0"): gold, ("0", "g1"): "nobody", ("1", "g0"): partial(gold), ("1", "g1"): gold}
    return answers[(task, line)]


def test_rr_forks_at_the_drawn_agent_and_regroups_singles_across_the_batch(tasks):
    config = Config(G=2, sampling="rr", fork_probs="0,1,0")  # every query forks at the reranker
    out, engine, stats, gold = run(tasks, config, rr_script)
    t0, t1 = (t.task_id for t in tasks)
    fp = token_f1(partial(gold[t1]), (gold[t1],))
    # Wave 1: one rewriter reply per query; wave 2: G reranker replies; wave 3: one answerer per line.
    assert [[r.n for r in call] for call in engine.calls] == [[1, 1], [2, 2], [1, 1, 1, 1]]
    rewriters = sorted(by(out, "rewriter"), key=lambda s: s.task_id)
    # Eq. 4: the rewriter's shared reward is the mean over its G successor lines.
    assert [s.credit for s in rewriters] == pytest.approx([(1.0 + 0.0) / 2, (fp + 1.0) / 2 - 0.5])
    assert [s.plan_info["phase"] for s in rewriters] == ["prefix", "prefix"]
    # Single outputs of the same agent and fork point form one group across the batch (Alg. 5).
    assert rewriters[0].group_key == rewriters[1].group_key == ("regrouped", "reranker", "rewriter", 0, 0)
    assert [s.advantage for s in rewriters] == pytest.approx(zscore([s.credit for s in rewriters]), abs=1e-6)
    for role, credits in {"reranker": {t0: [1.0, 0.0], t1: [fp, 1.0]}, "answerer": {t0: [1.0, 0.0], t1: [fp, 1.0]}}.items():
        for task, values in credits.items():
            samples = [s for s in by(out, role) if s.task_id == task]
            assert [s.credit for s in samples] == pytest.approx(values)
            assert {s.group_key for s in samples} == {(task, "reranker", role, 0)}
    assert stats["advantage/singleton_groups"] == 0


def test_rr_leftover_singles_join_the_last_group():
    tasks = make_tasks("mass", seeds=range(5), split="train")
    config = Config(G=2, sampling="rr", fork_probs="0,0,1")  # fork at the answerer: two agents before it
    out, _, stats, _ = run(tasks, config, lambda role, ep, k, gold: {"rewriter": "### {q} ###", "reranker": "Document0"}.get(role, gold if k else "x"))
    for role in ("rewriter", "reranker"):
        sizes = collections.Counter(s.group_key for s in by(out, role))
        assert sorted(sizes.values()) == [2, 3]  # 5 singles, G = 2: groups of 2 and 2 + the leftover
    assert stats["advantage/singleton_groups"] == 0


def test_rr_draws_fork_agents_with_the_given_probabilities():
    plan = ForkOn(Config(G=2, sampling="rr"))
    env = mass_v4.raw_env()
    tasks = make_tasks("mass", seeds=range(2000), split="train")
    counts = collections.Counter(plan.fork_agents(t, env)[0] for t in tasks)
    for role, p in zip(("rewriter", "reranker", "answerer"), (0.7, 0.1, 0.2)):
        assert counts[role] / len(tasks) == pytest.approx(p, abs=0.035)
    assert plan.fork_agents(tasks[0], env) == plan.fork_agents(tasks[0], env)  # seeded by the task: a resume repeats it
    with pytest.raises(ValueError, match="one per role"):
        ForkOn(Config(G=2, sampling="rr", fork_probs="0.5,0.5")).fork_agents(tasks[0], env)
    with pytest.raises(ValueError, match="sum to 1"):
        Config(sampling="rr", fork_probs="0.5,0.1,0.1")


# ------------------------------------------------------------------------------------------ IS
def test_is_keeps_only_the_homogeneous_groups_at_each_fork_point(tasks):
    config = Config(G=2, sampling="is")

    def script(role, episode_id, k, gold):
        if role == "rewriter":
            return "### {q} ###"
        if role == "reranker":
            return "Document0,Document1"
        # Line g0 reaches the answer; at the answerer's own fork point, its first reply does.
        return gold if episode_id.endswith("/g0") or (episode_id.endswith("fork:answerer") and k == 0) else "nobody"

    out, engine, stats, _ = run(tasks[:1], config, script)
    trained = [s for s in out.samples if s.trainable]
    assert len(trained) == 3 * 2  # n × G
    assert sum(r.n for call in engine.calls for r in call) == (2 + 2 + 2) + (1 + 2 + 2) + (1 + 1 + 2)
    for role in ("rewriter", "reranker", "answerer"):
        group = [s for s in trained if s.role == role]
        assert len({str(s.messages) for s in group}) == 1  # same input: homogeneous
        assert {s.plan_info["fork"] for s in group} == {role}
        # Each fork reply's shared reward is the F1 its own line reached: 1 on g0, 0 on g1.
        assert sorted(s.credit for s in group) == pytest.approx([0.0, 1.0])
        assert sorted(s.advantage for s in group) == pytest.approx(sorted(zscore([0.0, 1.0])), abs=1e-6)
    assert stats["advantage/groups"] == 3


def test_config_errors_name_the_fix():
    with pytest.raises(ValueError, match="--G 4"):
        Config(G=1)
    with pytest.raises(ValueError, match="comma-separated"):
        Config(sampling="rr", fork_probs="a,b")
    assert math.isclose(sum(Config().probabilities(["a", "b", "c"])), 1.0)
