"""deep_search_v3: parsers, MATPO rewards computed by hand, worker contexts and summaries, limits,
the oracle per hop count, a planner that never delegates, the judge, and SHARP-style worker masking."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents import run_episode
from agents.oracle.deep_search import DeepSearchOracle, tool_call
from llm_marl_envs import deep_search_v3
from llm_marl_envs.core.instances import split_of
from llm_marl_envs.deep_search.parse import extract_boxed, find_tool_call, missing_headings, unwrap_text_commands
from llm_marl_envs.search.judge import judge_prompt
from llm_marl_envs.search.miniwiki import build
from tests.support.drip import dripping_server

FIXTURES = Path(__file__).parent / "fixtures" / "search"
SUMMARY = ("## Conclusion:\n**{value}**\n\n## Supporting Information:\n- page\n\n## Observations:\nread it\n\n"
           "## Contribution to Main Task:\nnext hop")


def delegate(subtask: str) -> str:
    return "Plan.\n" + tool_call("browsing_agent", "search_and_browse", {"subtask": subtask})


def search(query: str) -> str:
    return tool_call("llm-marl-search", "search", {"query": query, "k": 3})


def question(hops: int = 2, seed: int = 0):
    return build().sample_question(np.random.default_rng(seed), hops)


def fresh(q=None, **kw):
    env = deep_search_v3.raw_env(**kw)
    env.reset(seed=0, options={"instance": q or question()})
    return env


def play(env, replies: list[tuple[str, str]]):
    """Step (agent, reply) pairs, checking whose turn it is; returns (reward, info) of each step."""
    out = []
    for agent, reply in replies:
        assert env.agent_selection == agent
        env.step(reply)
        out.append((env.rewards[agent], dict(env.infos[agent])))
    return out


# ---------------------------------------------------------------------------------------- parsers
@pytest.mark.parametrize(
    "text,server,tool,arguments,error",
    [
        (tool_call("s", "t", {"a": 1}), "s", "t", {"a": 1}, None),
        ("think\n<USE_MCP_TOOL><server_name> s </server_name><tool_name>t</tool_name><arguments>{}</arguments></USE_MCP_TOOL>",
         "s", "t", {}, None),
        ("<use_mcp_tool><server_name>s</server_name>", "", "", None, "unterminated"),
        ("<use_mcp_tool><server_name>s</server_name><arguments>{}</arguments></use_mcp_tool>", "s", "", None, "missing <tool_name>"),
        ("<use_mcp_tool><server_name>s</server_name><tool_name>t</tool_name><arguments>{'a': 1}</arguments></use_mcp_tool>",
         "s", "t", None, "not valid JSON"),
        ("<use_mcp_tool><server_name>s</server_name><tool_name>t</tool_name><arguments>[1]</arguments></use_mcp_tool>",
         "s", "t", None, "JSON object"),
    ],
)
def test_find_tool_call(text, server, tool, arguments, error):
    call = find_tool_call(text)
    assert (call.server, call.tool, call.arguments) == (server, tool, arguments)
    assert (call.error is None) if error is None else (error in call.error)


def test_tool_call_details():
    assert find_tool_call("no tool here \\boxed{x}") is None
    assert find_tool_call(tool_call("a", "b", {}) + tool_call("c", "d", {})).extra_blocks == 1
    assert extract_boxed("first \\boxed{a} then \\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"
    assert extract_boxed("\\boxed{ Kessling }") == "Kessling" and extract_boxed("\\boxed{open") is None
    assert extract_boxed("no box") is None
    assert missing_headings(SUMMARY) == []
    assert missing_headings("## Conclusion\n**x**\n### observations:") == ["Supporting Information", "Contribution to Main Task"]


@given(st.lists(st.sampled_from(list("<>/{}\\\"' abc:\n") + ["<use_mcp_tool>", "</use_mcp_tool>", "<arguments>",
                                                               "</arguments>", "\\boxed{", "## Conclusion"]),
                max_size=60).map("".join))
def test_parsers_never_raise(text):
    find_tool_call(text)
    extract_boxed(text)
    missing_headings(text)


# ---------------------------------------------------------------------------------------- rewards
def test_matpo_reward_by_hand():
    q = question()
    env = fresh(q)
    h1 = q.hops[0]
    steps = play(env, [
        ("planner", "<use_mcp_tool><server_name>browsing_agent</server_name><tool_name>search_and_browse</tool_name>"
                    "<arguments>{subtask: oops}</arguments></use_mcp_tool>"),   # invalid planner call
        ("planner", delegate(h1.resolved)),                                      # valid planner call
        ("worker_0", tool_call("llm-marl-search", "browse", {"q": 1})),          # invalid worker call
        ("worker_0", search(h1.resolved)),                                       # valid worker call
        ("worker_0", "I found it."),                                             # no call, no headings: summary requested
        ("worker_0", SUMMARY.format(value=h1.answer)),                          # the summary
        ("planner", f"\\boxed{{{q.answer}}}"),
    ])
    rewards = [round(r, 6) for r, _ in steps]
    # Intermediate steps: 0.1 x validity of the call; the summary steps: 0.1 x the worker's fmt (1/2).
    assert rewards[:6] == [0.0, 0.1, 0.0, 0.1, 0.05, 0.05]
    final = steps[-1][1]
    # fmt_p = 1/2, fmt_w = 1/2, fmt = 0.5; acc = 1: r = 0.9 * 1 + 0.1 * 0.5.
    assert (final["fmt_p"], final["fmt_w"], final["local_reward"], final["team_reward"]) == (0.5, 0.5, 0.5, 1.0)
    assert rewards[6] == pytest.approx(0.95) and final["reward"] == pytest.approx(0.95)
    assert (final["em"], final["f1"], final["acc"], final["answer"]) == (1.0, 1.0, 1.0, q.answer) and env.success
    assert steps[0][1]["parse_error"] and "not valid JSON" in steps[0][1]["parse_error"]
    worker = final["workers"][0]
    assert [c["status"] for c in worker["calls"]] == ["parse_error", "ok"] and [c["valid"] for c in worker["calls"]] == [False, True]
    assert worker["summary_valid"] and worker["subtask"] == h1.resolved and worker["summary"].startswith("## Conclusion")
    assert [c["valid"] for c in final["planner_calls"]] == [False, True]
    json.dumps(final)  # infos are JSON-friendly


@pytest.mark.parametrize("answer,acc", [("wrong guess", 0.0), (None, 1.0), ("", 0.0)])
def test_answering_without_delegating_earns_no_format_score(answer, acc):
    q = question()
    env = fresh(q)
    text = f"\\boxed{{{q.aliases[0] if answer is None and q.aliases else q.answer if answer is None else answer}}}"
    (reward, info), = play(env, [("planner", text)])
    # No tool call at all: fmt = 0 (SHARP Eq. 9), so r = 0.9 * acc.
    assert info["local_reward"] == 0.0 and reward == pytest.approx(0.9 * acc)
    assert (info["parse_error"] is not None) == (answer == "")


@pytest.mark.parametrize("wrapped", ["\\text{@}", "\\textbf{@}", "\\mathrm{@}", "\\textit{\\text{@}}", "\\emph {@}",
                                     "\\text{ @ }"])
def test_a_boxed_answer_in_latex_text_wrappers_scores_its_text(wrapped):
    """Models trained on math box a name as \\boxed{\\text{Paris}}: v1 normalised it to 'textparis' (acc 0)."""
    q = question()
    env = fresh(q)
    (reward, info), = play(env, [("planner", f"So it is \\boxed{{{wrapped.replace('@', q.answer)}}}.")])
    assert info["answer"] == q.answer and info["em"] == 1.0 and info["acc"] == 1.0 and reward == pytest.approx(0.9)
    (_, info), = play(fresh(q), [("planner", "\\boxed{\\text{}}")])
    assert info["parse_error"] == "empty \\boxed{} answer" and info["answer"] == ""


def test_unwrap_text_commands():
    assert unwrap_text_commands("\\text{New} \\textbf{York}") == "New York"
    assert unwrap_text_commands("\\mathbf{\\text{x}}^{2}") == "x^{2}"
    for kept in ["Paris", "x^{2}", "\\frac{1}{2}", "\\textcolor{red}{x}", "\\text{open", "\\texts{x}"]:
        assert unwrap_text_commands(kept) == kept
    deep = "\\text{" * 50_000 + "x" + "}" * 50_000  # one pass: linear in the answer
    assert unwrap_text_commands(deep) == "x"


def test_token_f1_is_reported():
    q = question(seed=3)
    env = fresh(q)
    (_, info), = play(env, [("planner", f"\\boxed{{{q.answer} and more words}}")])
    assert info["em"] == 0.0 and 0.0 < info["f1"] < 1.0


# ---------------------------------------------------------------------------------------- contexts and limits
def test_workers_get_fresh_contexts_and_the_planner_sees_only_summaries():
    q = question(3)
    env = fresh(q)
    play(env, [("planner", delegate(q.hops[0].resolved)), ("worker_0", search(q.hops[0].resolved))])
    worker_view = env.observe("worker_0")["messages"]
    assert q.question in worker_view[0]["content"], "the worker's system prompt recaps the main task"
    assert worker_view[1] == {"role": "user", "content": q.hops[0].resolved}
    assert worker_view[-1]["content"].startswith("Search results for")
    play(env, [("worker_0", SUMMARY.format(value=q.hops[0].answer))])
    planner_view = env.observe("planner")["messages"]
    assert planner_view[-1]["content"].startswith("## Conclusion") and "[Subtask calls left: 4]" in planner_view[-1]["content"]
    assert not any("Search results for" in m["content"] for m in planner_view)
    play(env, [("planner", delegate(q.hops[1].resolved))])
    fresh_view = env.observe("worker_1")["messages"]
    assert len(fresh_view) == 2 and fresh_view[1]["content"] == q.hops[1].resolved
    assert env.observe("worker_2")["messages"] == []  # not called yet


def test_worker_turn_limit_forces_the_summary():
    q = question()
    env = fresh(q, max_worker_turns=2)
    play(env, [("planner", delegate("anything")), ("worker_0", search("film")), ("worker_0", search("garden"))])
    last = env.observe("worker_0")["messages"][-1]["content"]
    assert last.startswith("Search results for 'garden'") and "[SYSTEM]" in last and "did not finish" in last
    (_, info), = play(env, [("worker_0", search("c"))])  # whatever it writes now is the summary
    assert env.agent_selection == "planner"
    assert info["worker"]["ran_out"] and not info["worker"]["summary_valid"] and "lacks heading" in info["parse_error"]
    assert len(info["worker"]["calls"]) == 2


def test_planner_turn_limit():
    q = question()
    env = fresh(q, max_calls=1)
    assert env.possible_agents == ["planner", "worker_0"]
    play(env, [("planner", delegate("x")), ("worker_0", SUMMARY.format(value="y"))])
    assert "[No subtask calls are left" in env.observe("planner")["messages"][-1]["content"]
    (reward, info), = play(env, [("planner", delegate("again"))])  # final turn: a call ends the episode
    assert all(env.truncations.values()) and info["acc"] == 0.0
    assert [c["valid"] for c in info["planner_calls"]] == [True, False]


def test_single_agent_variant_by_hand():
    q = question()
    env = fresh(q, mode="single", max_single_turns=4)
    assert env.possible_agents == ["planner"]
    assert "search_and_browse" not in env.observe("planner")["messages"][0]["content"]
    steps = play(env, [
        ("planner", search(q.hops[0].resolved)),
        ("planner", tool_call("llm-marl-search", "fetch", {"url": "wiki://mini-wiki/Nowhere"})),  # tool_error: invalid
    ])
    assert [r for r, _ in steps] == [pytest.approx(0.1), 0.0] and steps[1][1]["call"]["status"] == "tool_error"
    assert "final turn" not in env.observe("planner")["messages"][-1]["content"]
    play(env, [("planner", search("film"))])  # turn 3 of 4: still a search
    assert "[This is your final turn" in env.observe("planner")["messages"][-1]["content"]
    (reward, info), = play(env, [("planner", f"\\boxed{{{q.answer}}}")])
    # fmt = valid calls / calls = 2/3; r = 0.9 + 0.1 * 2/3.
    assert info["local_reward"] == pytest.approx(2 / 3) and reward == pytest.approx(0.9 + 0.1 * 2 / 3)


def test_a_single_agent_with_one_turn_is_offered_no_tools():
    """With max_single_turns=1 the only turn is the final one: v2's system prompt offered the search tools
    there, and a call ended the episode without an answer."""
    q = question()
    env = fresh(q, mode="single", max_single_turns=1)
    system = env.observe("planner")["messages"][0]["content"]
    assert "No tools are available" in system and "<use_mcp_tool>" not in system and "Tool name" not in system
    assert env.planned_calls("planner", search(q.question)) == []
    (reward, info), = play(env, [("planner", search(q.question))])  # a call on the final turn: invalid, not run
    assert all(env.truncations.values()) and info["acc"] == 0.0 and info["parse_error"] == "no \\boxed{} answer"
    assert [(c["valid"], c["error"]) for c in info["planner_calls"]] == [(False, "tool call on the final turn")]
    env = fresh(q, mode="single", max_single_turns=1)
    (reward, info), = play(env, [("planner", f"\\boxed{{{q.answer}}}")])
    assert env.success and reward == pytest.approx(0.9)
    assert "Tool name: search" in fresh(q, mode="single", max_single_turns=2).observe("planner")["messages"][0]["content"]


def test_dataset_questions(tmp_path):
    env = deep_search_v3.raw_env(dataset=str(FIXTURES / "musique_sample.jsonl"))
    # Records are assigned to splits by content hash, like generated questions.
    for q in env.source.questions:
        env.reset(seed=1, options={"split": split_of(q.key())})
        assert env.instance.key() in {x.key() for x in env.source.questions if split_of(x.key()) == split_of(q.key())}
    env.reset(seed=0, options={"instance": env.source.questions[1]})
    assert "Ivo Brandt taught" in env.observe("planner")["messages"][1]["content"]
    (reward, info), = play(env, [("planner", "\\boxed{Tessel}")])  # an alias
    assert info["acc"] == 1.0
    res = env.runtime.search("Where was Ivo Brandt born?", 1)
    assert res.hits[0].title == "Ivo Brandt"


def test_the_oracles_refuse_dataset_questions(capsys):
    """The search oracles know the mini-wiki's grammar only: on a MuSiQue question they answered "unknown"
    (deep search) or selected Document0 and answered nothing (MASS), every episode, without a word."""
    from agents.oracle import make_oracle
    from agents.oracle.mass import MASSOracle
    from llm_marl.cli import main
    from llm_marl_envs import mass_v4

    dataset = str(FIXTURES / "musique_sample.jsonl")
    for name in ("deep_search", "mass"):
        with pytest.raises(ValueError, match=f"the {name} oracle plays only mini-wiki questions .* dataset="):
            make_oracle(name, {"dataset": dataset})
    assert main(["play", "--env", "mass", "--quiet", "--env-arg", f"dataset={dataset}"]) == 2
    assert "plays only mini-wiki questions" in capsys.readouterr().err
    for env, oracle in ((deep_search_v3.raw_env(dataset=dataset), DeepSearchOracle()),
                        (deep_search_v3.raw_env(dataset=dataset, mode="single"), DeepSearchOracle()),
                        (mass_v4.raw_env(dataset=dataset), MASSOracle()), (mass_v4.raw_env(dataset=dataset, mode="single"), MASSOracle())):
        env.reset(seed=0, options={"instance": env.source.questions[0]})  # a record given to an oracle made without dataset=
        agent = env.agent_selection
        with pytest.raises(ValueError, match="plays only mini-wiki questions .*the question 'Where was the author"):
            oracle.act(agent, env.observe(agent))


def test_bad_arguments_raise():
    for kwargs, message in [({"mode": "solo"}, "mode"), ({"max_calls": 0}, "max_calls"), ({"hops": 7}, "hops"),
                            ({"backend": "google"}, "backend"), ({"transport": "fax"}, "transport"),
                            ({"backend": "live"}, "fictional mini-wiki"), ({"corpus_seed": -1}, "corpus_seed must be"),
                            ({"runtime": "direct"}, "runtime must be a SearchRuntime")]:
        with pytest.raises(ValueError, match=message):
            deep_search_v3.raw_env(**kwargs)


# ---------------------------------------------------------------------------------------- oracle and baselines
@pytest.mark.parametrize("mode", ["mas", "single"])
@pytest.mark.parametrize("hops", [2, 3, 4])
def test_oracle_reaches_95_percent_exact_match_per_hop_count(mode, hops):
    env = deep_search_v3.env(mode=mode, hops=hops)
    oracle = DeepSearchOracle()
    results = [run_episode(env, oracle, seed=seed, split="test") for seed in range(200)]
    assert sum(r.success for r in results) >= 0.95 * 200
    assert sum(sum(r.parse_errors.values()) for r in results) == 0


def test_a_planner_that_never_delegates_scores_near_zero():
    """The corpus is fictional: guessing (the most common training answer, a name from the question) fails."""
    wiki = build()
    train = [wiki.sample_question(np.random.default_rng(s)) for s in range(300)]
    answers = [q.answer for q in train]
    common = max(set(answers), key=answers.count)
    env = deep_search_v3.raw_env()
    total = 0.0
    hits = 0
    for seed in range(200):
        env.reset(seed=seed, options={"split": "test"})
        q = env.instance
        guess = common if seed % 2 else q.hops[0].support
        env.step(f"I know this one.\n\\boxed{{{guess}}}")
        total += env.rewards["planner"]
        hits += env.success
    assert hits <= 4 and total / 200 < 0.02


# ---------------------------------------------------------------------------------------- judge
class _Judge(BaseHTTPRequestHandler):
    verdict = "CORRECT"
    seen: list = []

    def do_POST(self):  # noqa: N802 (http.server API)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append((self.path, body, self.headers.get("Authorization")))
        reply = json.dumps({"choices": [{"message": {"role": "assistant", "content": self.verdict}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


def test_the_judge_is_shown_the_answers_aliases(monkeypatch):
    """v2's judge saw the answer alone, so a right answer given by an alias (which exact match accepts)
    could be judged wrong."""
    server = HTTPServer(("127.0.0.1", 0), _Judge)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        env = deep_search_v3.raw_env(dataset=str(FIXTURES / "musique_sample.jsonl"),
                                     judge={"base_url": f"http://127.0.0.1:{server.server_port}/v1"})
        q = env.source.questions[0]
        env.reset(seed=0, options={"instance": q})
        (reward, info), = play(env, [("planner", "\\boxed{the town of Kessling}")])
        prompt = _Judge.seen[-1][1]["messages"][0]["content"]
        assert "Ground-truth answer: Kessling (also given as: Kessling town)\nPredicted answer: the town of Kessling" in prompt
    finally:
        server.shutdown()
        server.server_close()
    assert "also given as" not in judge_prompt("Where?", "Kessling", "Varn", ("Kessling",))  # only other names


def test_optional_llm_judge(monkeypatch):
    server = HTTPServer(("127.0.0.1", 0), _Judge)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("JUDGE_KEY", "sk-test")
    try:
        q = question()
        url = f"http://127.0.0.1:{server.server_port}/v1"
        env = fresh(q, judge={"base_url": url, "model": "judge-model", "api_key_env": "JUDGE_KEY"})
        (reward, info), = play(env, [("planner", "\\boxed{\\text{a paraphrase the judge accepts}}")])
        assert info["em"] == 0.0 and info["acc"] == 1.0 and info["judge"] == {"correct": True, "error": None}
        path, body, auth = _Judge.seen[-1]
        assert path == "/v1/chat/completions" and body["model"] == "judge-model" and auth == "Bearer sk-test"
        assert q.answer in body["messages"][0]["content"]
        assert "a paraphrase the judge accepts" in body["messages"][0]["content"] and "\\text" not in body["messages"][0]["content"]
    finally:
        server.shutdown()
        server.server_close()
    env = fresh(q, judge={"base_url": "http://127.0.0.1:9/v1", "timeout_s": 2})  # nothing listens: fall back to EM
    (reward, info), = play(env, [("planner", "\\boxed{a paraphrase}")])
    assert info["acc"] == 0.0 and info["judge"]["correct"] is None and "judge failed" in info["judge"]["error"]


def test_an_answer_exact_match_accepts_is_not_judged():
    """v2 asked the judge about every answer, and its INCORRECT overruled exact match: the gold answer itself
    could score acc 0. Now the judge is asked only about an answer exact match rejects."""
    server = HTTPServer(("127.0.0.1", 0), _Judge)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Judge.verdict, _Judge.seen = "INCORRECT", []
    try:
        q = question()
        env = fresh(q, judge={"base_url": f"http://127.0.0.1:{server.server_port}/v1"})
        (reward, info), = play(env, [("planner", f"\\boxed{{{q.answer}}}")])
        assert info["em"] == info["acc"] == 1.0 and info["judge"] is None and _Judge.seen == []
        env = fresh(q, judge={"base_url": f"http://127.0.0.1:{server.server_port}/v1"})
        (reward, info), = play(env, [("planner", "\\boxed{a paraphrase}")])
        assert info["acc"] == 0.0 and info["judge"] == {"correct": False, "error": None} and len(_Judge.seen) == 1
    finally:
        _Judge.verdict = "CORRECT"
        server.shutdown()
        server.server_close()


def test_a_judge_that_answers_a_byte_at_a_time_falls_back_at_its_deadline():
    """The judge's timeout_s bounds each wait for a part of an answer: a server sending a byte every 0.1 s once held
    the episode's last step for ever. Past deadline_s the verdict falls back to exact match and says why."""
    q = question()
    with dripping_server() as url:
        env = fresh(q, judge={"base_url": url, "timeout_s": 0.5, "max_retries": 0, "deadline_s": 0.8})
        started = time.monotonic()
        (reward, info), = play(env, [("planner", "\\boxed{a paraphrase}")])
        assert time.monotonic() - started < 1.5
    assert info["acc"] == 0.0 and info["judge"]["correct"] is None
    assert "did not finish answering within 0.8 s (deadline_s)" in info["judge"]["error"]


# ---------------------------------------------------------------------------------------- SHARP: mask one worker
def test_masking_one_worker_by_replay_changes_the_outcome():
    """SHARP Eq. 11 needs R_acc(τ) - R_acc(τ without worker m): fork at worker m's summary and replace it."""
    env = deep_search_v3.raw_env(hops=2)
    oracle = DeepSearchOracle()
    env.reset(seed=5, options={"split": "test"})
    forks = {}
    while not all(env.terminations.values()) and not all(env.truncations.values()):
        agent = env.agent_selection
        reply = oracle.act(agent, env.observe(agent))
        if agent == "worker_1" and "## Conclusion" in reply and "worker_1" not in forks:
            forks["worker_1"] = env.fork()
        env.step(reply)
    assert env.success
    masked = forks["worker_1"]
    masked.step(SUMMARY.format(value="(masked)"))
    masked.step(oracle.act("planner", masked.observe("planner")))
    assert not masked.success and masked.infos["planner"]["workers"][1]["summary"].startswith("## Conclusion:\n**(masked)**")
    assert masked.infos["planner"]["workers"][0] == env.infos["planner"]["workers"][0]


@pytest.mark.parametrize("judge,message", [({"base_url": 5}, "judge base_url must be text"),
                                           ({"base_url": "http://127.0.0.1:9/v1", "timeout_s": -1}, "judge timeout_s must be"),
                                           ({"base_url": "http://127.0.0.1:9/v1", "deadline_s": 0}, "judge deadline_s must be"),
                                           ({"base_url": "http://127.0.0.1:9/v1", "max_retries": "x"}, "judge max_retries must be")])
def test_a_judge_config_of_the_wrong_kind_is_refused_when_the_env_is_made(judge, message):
    """A base_url that is no text once raised AttributeError from the planner's final step, and a bad timeout or
    retry count made every verdict fall back to exact match without a word."""
    from llm_marl_envs.registry import make_raw

    with pytest.raises(ValueError, match=message):
        make_raw("deep_search", judge=judge)
