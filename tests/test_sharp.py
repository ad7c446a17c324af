"""SHARP on deep_search_v3 with scripted agents: the paper's case studies F.1 (a useful worker) and F.2
(a harmful worker), credits and advantages by hand, replays in the ordinary engine waves,
sparsification, and the clear error without delegation."""

from __future__ import annotations

import re

import pytest

from agents.oracle.deep_search import tool_call
from llm_marl.algorithms import assign_advantages, get
from llm_marl.algorithms.sharp import Config, agent_rewards, check_env
from llm_marl.engines.base import SamplingParams
from llm_marl.engines.scripted import ScriptedEngine
from llm_marl.rollout import make_tasks, rollout
from llm_marl_envs import deep_search_v3, mass_v4
from llm_marl_envs.core.base import MASKED

EPS = 1e-6
SHARP = get("sharp")
WRONG = "No formal party"
SUMMARY = ("## Conclusion\n**{value}**\n\n## Supporting Information\n- page\n\n## Observations\nread it\n\n"
           "## Contribution to Main Task\nthe answer")


def gold_of(task) -> str:
    env = task.make_env()
    env.reset(seed=task.seed, options=dict(task.options))
    return env.instance.answer


def case_study_engine(gold: str | dict[str, str], tokenizer=None) -> ScriptedEngine:
    """Line g0 is F.1: the worker finds the answer, without it the planner guesses wrong.
    Line g1 is F.2: the worker reports a wrong answer (after two invalid calls and a valid one), without it
    the planner's own answer is right."""

    def reply(request, k):
        answer = gold if isinstance(gold, str) else gold[request.tag.task_id]
        line = re.search(r"/(g\d)", request.tag.episode_id).group(1)
        replay = "/without:" in request.tag.episode_id
        chat = request.messages
        if request.tag.agent == "planner":
            last = chat[-1]["content"]
            if "## Conclusion" not in last:
                return "I will delegate.\n" + tool_call("browsing_agent", "search_and_browse", {"subtask": "find it"})
            if MASKED in last:  # the worker was ablated: the planner answers from its prior
                assert replay
                return "\\boxed{" + ("Somewhere" if line == "g0" else answer) + "}"
            return "\\boxed{" + re.search(r"\*\*(.+?)\*\*", last).group(1) + "}"
        done = sum(m["role"] == "assistant" for m in chat)
        calls = [tool_call("llm-marl-search", "search", {"query": "find it"})]
        if line == "g1":
            calls = [tool_call("llm-marl-search", "bogus", {})] * 2 + calls
        if done < len(calls):
            return calls[done]
        return SUMMARY.format(value=answer if line == "g0" else WRONG)

    return ScriptedEngine(reply, tokenizer)


def run_case_studies(p: float = 1.0):
    tasks = make_tasks("deep_search", seeds=[3], split="train", env_kwargs={"max_calls": 2})
    gold = gold_of(tasks[0])
    config = Config(G=2, sparsify_p=p)
    engine = case_study_engine(gold)
    out = rollout(tasks, SHARP.sampling_plan(config), engine, sigma=None, sampling=SamplingParams(seed=0))
    stats = assign_advantages(out, SHARP, config)
    return out, engine, stats, config


def pair(a: float, b: float) -> tuple[float, float]:
    """Eq. 14 for two members, sample std: ±(d/2) / (|d|/√2 + δ)."""
    d = a - b
    s = abs(d) / 2**0.5
    return (d / 2) / (s + EPS), (-d / 2) / (s + EPS)


def test_case_studies_f1_useful_and_f2_harmful_worker():
    out, engine, stats, config = run_case_studies()
    real = {ep.episode_id.rsplit("/", 1)[-1]: ep for ep in out.real_episodes}
    assert real["g0"].success and not real["g1"].success
    f1 = agent_rewards(out, real["g0"], config)
    f2 = agent_rewards(out, real["g1"], config)
    # F.1: with the worker the answer is right, without it wrong: credit +1 (Eq. 11); planner λ·max(1, 0).
    assert f1["worker_0"] == pytest.approx({"b": 1.0, "mc": 1.0, "tool": 1.0, "credit": 1.0, "total": 0.9 + 0.9 + 0.1})
    assert f1["planner"]["mc"] == 1.0 and f1["planner"]["total"] == pytest.approx(0.9 + 0.9 + 0.1)
    # F.2: the worker turns a right answer wrong: credit -1; its tool score is 1 valid of 3 calls (Eq. 9);
    # the planner's Eq. 13 credit clips the negative worker credit at 0.
    assert f2["worker_0"] == pytest.approx({"b": 0.0, "mc": -1.0, "tool": 1 / 3, "credit": -1.0, "total": -0.9 + 0.1 / 3})
    assert f2["planner"] == pytest.approx({"b": 0.0, "mc": 0.0, "tool": 1.0, "credit": float("nan"), "total": 0.1}, nan_ok=True)
    # Eq. 14: one member per (trajectory, agent); groups are agent identities over the G trajectories.
    for role, (a, b) in {"worker_0": (1.9, -0.9 + 0.1 / 3), "planner": (1.9, 0.1)}.items():
        adv = {s.episode_id.rsplit("/", 1)[-1]: s.advantage for s in out.samples if s.trainable and s.role == role}
        assert (adv["g0"], adv["g1"]) == pytest.approx(pair(a, b), abs=1e-6)
        assert [s.credit for s in out.samples if s.trainable and s.role == role and s.episode_id.endswith("g0")] == pytest.approx(
            [a] * (2 if role == "planner" else 2))  # planner: delegate + answer; worker_0: one call + summary
    assert stats["advantage/members"] == 4


def test_replays_are_masked_untrained_and_share_the_rollout_waves():
    out, engine, _, _ = run_case_studies()
    replays = [ep for ep in out.episodes if ep.counterfactual is not None]
    assert sorted(ep.counterfactual.of.rsplit("/", 1)[-1] for ep in replays) == ["g0", "g1"]
    assert all(ep.counterfactual.absent == frozenset({"worker_0"}) for ep in replays)
    for ep in replays:
        masked = [out.samples[s] for s in ep.sample_ids if out.samples[s].role == "worker_0"]
        assert [s.text for s in masked] == [deep_search_v3.raw_env().masked_reply("worker_0")]
        prefix = ep.sample_ids[: ep.sample_ids.index(masked[0].sample_id)]
        assert prefix == out.episode(ep.counterfactual.of).sample_ids[: len(prefix)]  # the original trace up to the mask
    assert not any(s.trainable for ep in replays for s in (out.samples[i] for i in ep.sample_ids[1:]))
    # One fixed (masked) reply and one regenerated planner answer per replay.
    assert out.stats["counterfactual_episodes"] == 2
    assert out.stats["counterfactual_fixed_replies"] == 2 and out.stats["counterfactual_completions"] == 2
    # A replay starts at the worker's first turn and runs alongside the original lines: shared engine calls.
    mixed = [call for call in engine.calls if {("/without:" in r.tag.episode_id) for r in call} == {True, False}]
    assert mixed


@pytest.mark.parametrize("p,replays", [(0.0, 0), (1.0, 2)])
def test_sparsification_p_sets_the_number_of_replays(p, replays):
    out, _, _, config = run_case_studies(p)
    assert out.stats["counterfactual_episodes"] == replays
    if p == 0.0:  # workers left out get null marginal credit, and so does the planner
        for ep in out.real_episodes:
            table = agent_rewards(out, ep, config)
            assert table["worker_0"]["mc"] == 0.0 and table["planner"]["mc"] == 0.0


def test_sharp_without_delegation_is_a_clear_error():
    with pytest.raises(ValueError, match="planner that delegates"):
        check_env(mass_v4.raw_env(), Config())
    with pytest.raises(ValueError, match="mode='mas'"):
        check_env(deep_search_v3.raw_env(mode="single"), Config())
    check_env(deep_search_v3.raw_env(), Config())
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        Config(sparsify_p=1.5)


def two_worker_engine(gold: str) -> ScriptedEngine:
    """One trajectory, two workers, one helpful (reports the answer) and one harmful (reports a wrong one).
    The planner delegates twice, then answers with the last summary it can read. Line g0: helpful then
    harmful (the answer ends wrong); line g1: harmful then helpful (it ends right)."""

    def reply(request, k):
        line = re.search(r"/(g\d)", request.tag.episode_id).group(1)
        chat = request.messages
        if request.tag.agent == "planner":
            summaries = [m["content"] for m in chat if m["role"] == "user" and "## Conclusion" in m["content"]]
            if len(summaries) < 2:
                return tool_call("browsing_agent", "search_and_browse", {"subtask": f"hop {len(summaries) + 1}"})
            readable = [re.search(r"\*\*(.+?)\*\*", s).group(1) for s in summaries if MASKED not in s]
            return "\\boxed{" + readable[-1] + "}"
        if not any(m["role"] == "assistant" for m in chat):
            return tool_call("llm-marl-search", "search", {"query": "find it"})
        helpful = (request.tag.agent == "worker_0") == (line == "g0")
        return SUMMARY.format(value=gold if helpful else WRONG)

    return ScriptedEngine(reply)


def test_one_trajectory_with_a_helpful_and_a_harmful_worker():
    """With a binary R_acc, credits can only point against the outcome that happened: when the harmful
    worker has the last word (R = 0) it gets -1 and the helpful one 0; when the helpful one has it (R = 1)
    it gets +1 and the harmful one 0. The planner's Eq. 13 credit averages the positive parts."""
    tasks = make_tasks("deep_search", seeds=[3], split="train", env_kwargs={"max_calls": 2})
    config = Config(G=2)
    out = rollout(tasks, SHARP.sampling_plan(config), two_worker_engine(gold_of(tasks[0])), sigma=None,
                  sampling=SamplingParams(seed=0))
    assign_advantages(out, SHARP, config)
    real = {ep.episode_id.rsplit("/", 1)[-1]: ep for ep in out.real_episodes}
    g0, g1 = agent_rewards(out, real["g0"], config), agent_rewards(out, real["g1"], config)
    assert [g0[m]["credit"] for m in ("worker_0", "worker_1")] == [0.0, -1.0]
    assert [g1[m]["credit"] for m in ("worker_0", "worker_1")] == [0.0, 1.0]
    assert (g0["planner"]["mc"], g1["planner"]["mc"]) == (0.0, 0.5)
    expected = {"g0": {"worker_0": 0.1, "worker_1": -0.8, "planner": 0.1},
                "g1": {"worker_0": 1.0, "worker_1": 1.9, "planner": 0.9 + 0.45 + 0.1}}
    for line, table in expected.items():
        for role, value in table.items():
            (credit,) = {s.credit for s in out.samples if s.trainable and s.role == role and s.episode_id.endswith(line)}
            assert credit == pytest.approx(value)  # one value, shared by all of the agent's replies
    assert out.stats["counterfactual_episodes"] == 4  # one replay per worker per trajectory
