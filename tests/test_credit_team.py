"""`--credit shapley` on mass_v4 with scripted agents: coalition replays, exact and Monte Carlo Shapley
credits by hand, message-level shares, and the failure route's preference pairs."""

from __future__ import annotations

import pytest
import torch

from llm_marl.algorithms import assign_advantages, get
from llm_marl.credit.shapley import permutation_coalitions
from llm_marl.credit.team import CreditConfig, assign_shapley, permutations, preference_pairs, shapley_plan
from llm_marl.engines.base import SamplingParams
from llm_marl.engines.scripted import ScriptedEngine
from llm_marl.rollout import make_tasks, rollout
from llm_marl.rollout.replay import episode_value
from llm_marl_envs.mass import prompts

MATPO = get("matpo")
ROLES = ("rewriter", "reranker", "answerer")


def engine_for(task, bad_reranker_on: str | None = None) -> ScriptedEngine:
    """The answerer knows the answer when it is shown a passage; the reranker shows it one (unless it is
    ablated, or misbehaves on line `bad_reranker_on`); the rewriter's query is the question itself, which
    the environment also uses when the rewriter is ablated, so the rewriter never matters (a dummy)."""
    env = task.make_env()
    env.reset(seed=task.seed, options=dict(task.options))
    gold = env.instance.answer

    def reply(request, k):
        system = request.messages[0]["content"]
        if system == prompts.REWRITER_SYSTEM:
            return "### " + request.messages[-1]["content"].removeprefix("Original question is ") + " ###"
        if "identify and output the IDs" in system:
            return "none of them" if bad_reranker_on and request.tag.episode_id.endswith(bad_reranker_on) else "Document0"
        return gold if "Document 0" in request.messages[-1]["content"] else "unknown"

    return ScriptedEngine(reply)


def play(config: CreditConfig, bad_reranker_on: str | None = None, G: int = 2):
    tasks = make_tasks("mass", seeds=[0], split="train")
    algo_config = MATPO.config_cls(G=G)
    out = rollout(tasks, shapley_plan(MATPO.sampling_plan(algo_config), config), engine_for(tasks[0], bad_reranker_on),
                  sigma=None, sampling=SamplingParams(seed=0))
    return out, algo_config


def test_exact_shapley_credit_of_a_known_game():
    """v(S) = 1 iff reranker and answerer are both present: φ = (0, 1/2, 1/2)."""
    config = CreditConfig(credit="shapley", credit_level="agent")
    out, algo_config = play(config)
    real = out.real_episodes
    assert len(real) == 2 and all(episode_value(out, ep) == 1.0 for ep in real)
    replays = [ep for ep in out.episodes if ep.counterfactual is not None]
    assert len(replays) == 2 * (2**3 - 1)
    for ep in replays:
        expected = 0.0 if ep.counterfactual.absent & {"reranker", "answerer"} else 1.0
        assert episode_value(out, ep) == expected, ep.episode_id
        masked = [out.samples[s] for s in ep.sample_ids if out.samples[s].role in ep.counterfactual.absent]
        assert [s.text for s in masked] == [""] * len(ep.counterfactual.absent)  # mass: a masked role passes nothing on
    stats = assign_advantages(out, MATPO, algo_config, credit=lambda r: assign_shapley(r, config))
    credits = {s.role: s.credit for s in out.samples if s.trainable}
    assert credits == pytest.approx({"rewriter": 0.0, "reranker": 0.5, "answerer": 0.5})
    assert stats["credit/replays"] == 14.0
    assert (stats["credit/ratio/rewriter"], stats["credit/ratio/reranker"]) == pytest.approx((0.0, 0.5))  # Eq. 4


def test_message_level_credit_conserves_each_agents_value():
    config = CreditConfig(credit="shapley", credit_level="message", judge="info")
    out, algo_config = play(config)
    assign_advantages(out, MATPO, algo_config, credit=lambda r: assign_shapley(r, config))
    for ep in out.real_episodes:
        total = sum(out.samples[s].credit for s in ep.sample_ids)
        assert total == pytest.approx(1.0)  # Σ_{i,t} r_{i,t} = v(N) - v(∅) = 1 (Eq. 10)


def test_monte_carlo_replays_only_the_coalitions_its_permutations_visit():
    config = CreditConfig(credit="shapley", shapley_estimator="mc", shapley_permutations=1, credit_level="agent")
    out, algo_config = play(config)
    for ep in out.real_episodes:
        perms = permutations(ep.episode_id, list(ROLES), config)
        visited = permutation_coalitions(perms)
        assert len(visited) == 4  # n + 1 prefixes of one permutation
        replays = [r for r in out.episodes if r.counterfactual is not None and r.counterfactual.of == ep.episode_id]
        assert {frozenset(ROLES) - r.counterfactual.absent for r in replays} == set(visited) - {frozenset(ROLES)}
    assign_advantages(out, MATPO, algo_config, credit=lambda r: assign_shapley(r, config))
    # One permutation: each agent gets its marginal value at its position; they still sum to v(N) - v(∅).
    for ep in out.real_episodes:
        assert sum({out.samples[s].role: out.samples[s].credit for s in ep.sample_ids}.values()) == pytest.approx(1.0)


def test_failure_route_pairs_the_first_error_with_a_better_reply_to_the_same_prompt():
    out, _ = play(CreditConfig(credit="shapley"), bad_reranker_on="g1")
    values = {ep.episode_id.rsplit("/", 1)[-1]: episode_value(out, ep) for ep in out.real_episodes}
    assert values == {"g0": 1.0, "g1": 0.0}
    pairs, stats = preference_pairs(out)
    assert stats == {"dpo/failed_episodes": 1.0, "dpo/pairs": 1.0, "dpo/judge_calls": 2.0}  # ⌈log2(3 + 1)⌉ prefix checks
    (pair,) = pairs
    assert pair.agent == "reranker" and pair.meta["t"] == 2
    assert pair.rejected.text == "none of them" and pair.chosen.text == "Document0"
    assert pair.chosen.messages == pair.rejected.messages  # y+ and y- answer one prompt


def test_config_errors():
    from llm_marl.config import RunConfig
    from llm_marl.trainer import TrainConfig

    with pytest.raises(ValueError, match="sharp computes its own"):
        TrainConfig(run=RunConfig(algo="sharp", env="deep_search"), credit=CreditConfig(credit="shapley"))
    with pytest.raises(ValueError, match="lost the argmax"):
        TrainConfig(run=RunConfig(algo="at-grpo"), credit=CreditConfig(credit="shapley"))
    with pytest.raises(ValueError, match="--shapley-permutations"):
        CreditConfig(shapley_permutations=0)


class _LabelServer:
    """An OpenAI-compatible endpoint that labels a message by a keyword in it."""

    def __init__(self):
        import json
        import threading
        from http.server import BaseHTTPRequestHandler, HTTPServer

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server API)
                prompt = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["messages"][0]["content"]
                message = prompt.split('Message of agent "', 1)[1].split("\n\nDoes this message", 1)[0]
                word = "ALIGNED" if "search" in message else "COUNTER" if "undo" in message else "maybe?"
                reply = json.dumps({"choices": [{"message": {"role": "assistant", "content": word}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args):
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"


def test_llm_judge_labels_messages_and_falls_back_to_neutral():
    from llm_marl.credit.llm_judge import LLMJudge
    from llm_marl.credit.message import Message, message_rewards
    from llm_marl_envs.search.judge import JudgeConfig

    server = _LabelServer()
    try:
        judge = LLMJudge(JudgeConfig(base_url=server.url, model="m"))
        messages = [Message("a", 0, "search the wiki"), Message("b", 1, "hello"), Message("a", 2, "undo that")]
        out = message_rewards(messages, {"a": 0.6, "b": 0.4}, judge, conserve=False)
        assert out.labels == [1, 0, -1] and judge.calls == 3 and len(judge.errors) == 1  # "maybe?" is unreadable
        assert out.rewards == pytest.approx([0.3, 0.0, -0.3])  # Eq. 9: s·|s|/S·φ with S_a = 2; b: uniform fallback, s = 0
    finally:
        server.server.shutdown()
        server.server.server_close()
    dead = LLMJudge(JudgeConfig(base_url="http://127.0.0.1:9/v1", timeout_s=2))
    assert dead(messages[:1], messages[1]) == 0 and "judge failed" in dead.errors[0]
    with pytest.raises(ValueError, match="--judge-url"):
        CreditConfig(judge="api")


@pytest.mark.parametrize("baseline", ["reference", "noop"])
def test_baselines_for_absent_agents(baseline):
    config = CreditConfig(credit="shapley", shapley_baseline=baseline)
    tasks = make_tasks("mass", seeds=[0], split="train")
    engine = engine_for(tasks[0])
    sigma = {role: "shared" for role in ROLES}
    out = rollout(tasks, shapley_plan(MATPO.sampling_plan(MATPO.config_cls(G=2)), config), engine, sigma=sigma,
                  sampling=SamplingParams(seed=0))
    replays = {ep.episode_id: ep for ep in out.episodes if ep.counterfactual is not None}
    requests = [r for call in engine.calls for r in call if r.tag.episode_id in replays]
    for r in requests:
        absent = replays[r.tag.episode_id].counterfactual.absent
        # reference: an absent agent is sampled from the frozen base model (no adapter); present agents keep theirs.
        assert r.adapter == (None if r.tag.agent in absent else "shared")
    if baseline == "reference":
        assert any(r.adapter is None for r in requests) and out.stats["counterfactual_fixed_replies"] == 0
    else:  # noop: the environment's no-op reply, applied without sampling
        assert not any(r.tag.agent in replays[r.tag.episode_id].counterfactual.absent for r in requests)
        assert out.stats["counterfactual_fixed_replies"] > 0


def test_shapley_groups_compare_an_agent_only_with_itself():
    """matpo's group is the query; with --credit shapley each group holds one agent's φ over the query's
    rollouts: rewriter (φ 0), reranker and answerer (φ ½) are never normalised against each other."""
    config = CreditConfig(credit="shapley", credit_level="agent")
    out, algo_config = play(config, bad_reranker_on="g1", G=3)
    assign_advantages(out, MATPO, algo_config, credit=lambda r: assign_shapley(r, config))
    groups: dict = {}
    for s in out.samples:
        if s.trainable:
            groups.setdefault(s.group_key, set()).add(s.role)
    assert groups and all(len(roles) == 1 for roles in groups.values())
    assert len(groups) == len(ROLES)
    from llm_marl.advantage import group_advantages

    for role in ROLES:
        mine = [s for s in out.samples if s.trainable and s.role == role]
        alone, _ = group_advantages(torch.tensor([s.credit for s in mine]), [0] * len(mine))
        assert [s.advantage for s in mine] == pytest.approx(alone.tolist(), abs=1e-6)
