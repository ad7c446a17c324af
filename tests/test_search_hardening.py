"""Search tools under hostile input (issue 11 #8): arguments are checked before they leave the
environment (types, lengths, encodable text) and the agent is blamed for them; a backend that
answers garbage is the backend's fault (server_error), never an exception out of `env.step`."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from agents.oracle.deep_search import tool_call
from llm_marl_envs import deep_search_v3
from llm_marl_envs.search import SearchRuntime, ToolInputError, mini_wiki_spec
from llm_marl_envs.search.backends import MAX_QUERY_CHARS, MAX_URL_CHARS, Hit
from llm_marl_envs.search.miniwiki import build
from llm_marl_envs.search.tools import check_arguments

SPEC = mini_wiki_spec()
QUERY = "Who directed The Copper Compass?"


@pytest.mark.parametrize("tool,args,message", [
    ("search", {"query": "\ud800"}, r"'\\ud800' at position 0.*lone surrogate"),
    ("search", {"query": "film \udfff noir"}, "lone surrogate"),
    ("search", {"query": "film\x00"}, "control character"),
    ("search", {"query": "x" * (MAX_QUERY_CHARS + 1)}, f"the limit is {MAX_QUERY_CHARS}"),
    ("search", {"query": 3}, "non-empty string"),
    ("search", {"query": "x", "\ud800": 1}, r"unknown argument\(s\) '\\ud800'"),
    ("fetch", {"url": "wiki://mini-wiki/" + "x" * MAX_URL_CHARS}, f"the limit is {MAX_URL_CHARS}"),
    ("fetch", {"url": "wiki://\ud800"}, "lone surrogate"),
    ("fetch", {"url": ["wiki://a"]}, "non-empty string"),
])
def test_unsendable_arguments_are_the_agents_error(tool, args, message):
    with pytest.raises(ToolInputError, match=message) as caught:
        check_arguments(tool, args)
    str(caught.value).encode("utf-8")  # the error shown to the agent is itself text


def test_an_unencodable_query_spares_the_shared_session():
    """Over the subprocess transport one `\\ud800` query used to kill the MCP session under every
    concurrent call (server_error for all, nobody blamed). It is refused before it is sent."""
    with SearchRuntime(SPEC, "subprocess", call_timeout_s=20.0) as rt:
        assert rt.search(QUERY, 1).ok
        pid, starts = rt.server_pid, rt.starts
        results: dict[int, object] = {}
        barrier = threading.Barrier(4)

        def call(i: int) -> None:
            barrier.wait()
            results[i] = rt.search("\ud800" if i == 0 else QUERY, 2)

        threads = [threading.Thread(target=call, args=(i,)) for i in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)
        assert results[0].status == "tool_error" and "lone surrogate" in results[0].error
        assert all(results[i].ok for i in (1, 2, 3))
        assert (rt.server_pid, rt.starts) == (pid, starts), "the session survived"


def _worker_env(**kw):
    q = build().sample_question(np.random.default_rng(0), 2)
    env = deep_search_v3.raw_env(**kw)
    env.reset(seed=0, options={"instance": q})
    env.step(tool_call("browsing_agent", "search_and_browse", {"subtask": q.hops[0].resolved}))
    assert env.agent_selection == "worker_0"
    return env


@pytest.mark.parametrize("arguments", [
    '{"query": "\\ud800"}',  # a lone surrogate escape: json.loads makes it a str that is not text
    '{"query": "' + "film " * 300 + '"}',  # over the query limit
    '{"query": "film", "k": 21}',
])
def test_a_worker_is_blamed_for_unsendable_arguments(arguments):
    env = _worker_env()
    reply = ("<use_mcp_tool>\n<server_name>llm-marl-search</server_name>\n<tool_name>search</tool_name>\n"
             f"<arguments>{arguments}</arguments>\n</use_mcp_tool>")
    env.step(reply)
    record = env.infos["worker_0"]["call"]
    assert not record["valid"] and record["error"]
    assert env.rewards["worker_0"] == 0.0 and env.infos["worker_0"]["local_terms"] == {"fmt": 0.0}
    shown = env.observe("worker_0")["messages"][-1]["content"]
    shown.encode("utf-8")  # no lone surrogate reaches an observation


def test_a_planner_is_blamed_for_a_subtask_that_is_not_text():
    q = build().sample_question(np.random.default_rng(0), 2)
    env = deep_search_v3.raw_env()
    env.reset(seed=0, options={"instance": q})
    env.step("<use_mcp_tool>\n<server_name>browsing_agent</server_name>\n<tool_name>search_and_browse</tool_name>\n"
             '<arguments>{"subtask": "\\udfff"}</arguments>\n</use_mcp_tool>')
    info = env.infos["planner"]
    assert env.agent_selection == "planner" and "lone surrogate" in info["parse_error"]
    assert info["local_terms"] == {"fmt": 0.0}


class BrokenBackend:
    """A backend that answers `value` to every call."""

    name = "broken"

    def __init__(self, value):
        self.value = value

    def search(self, query, k=10):
        return self.value

    def fetch(self, url):
        return self.value


@pytest.mark.parametrize("value", [
    None, "a page instead of a list", 7, [{"title": "t"}], [{"title": "t", "url": "", "snippet": "s"}],
    [{"title": 1, "url": "u", "snippet": "s"}], ["row"], [None],
])
@pytest.mark.parametrize("transport", ["direct", "inprocess"])
def test_a_backend_answering_garbage_is_a_server_error(value, transport):
    with SearchRuntime(SPEC, transport) as rt:
        rt._backend = BrokenBackend(value)
        for tool, args in (("search", {"query": "film"}), ("fetch", {"url": "https://example.org/"})):
            if tool == "fetch" and isinstance(value, str):
                continue  # a string is a page
            result = rt.call(tool, args)
            assert result.status == "server_error", (tool, value)


@pytest.mark.parametrize("value", [None, "not a list", [{"title": "t"}]])
def test_env_step_survives_a_broken_backend(value):
    env = _worker_env()
    real = env.runtime.backend
    env.runtime._backend = BrokenBackend(value)
    try:
        env.step(tool_call("llm-marl-search", "search", {"query": "film"}))
    finally:
        env.runtime._backend = real  # the runtime is shared by every environment of this process
    record = env.infos["worker_0"]["call"]
    assert record["status"] == "server_error" and record["valid"], "the backend's fault, not the worker's"


def test_backend_results_are_capped_and_made_encodable():
    hits = [Hit(f"t{i}", f"u{i}", "snippet \ud800") for i in range(30)]
    with SearchRuntime(SPEC, "direct") as rt:
        rt._backend = BrokenBackend(hits)
        result = rt.search("film", 3)
        assert result.ok and [h.title for h in result.hits] == ["t0", "t1", "t2"]
        assert result.hits[0].snippet == "snippet ?"
        rt._backend = BrokenBackend("page \udfff" + "x" * 20_000)
        page = rt.fetch("https://example.org/").page
        page.encode("utf-8")
        assert page.endswith("[... page truncated]")
