"""The MCP search server and `SearchRuntime`: a real server subprocess, one shared session,
concurrent calls, crashes and timeouts turned into error results, restarts, and the in-process mode."""

from __future__ import annotations

import asyncio
import copy
import gc
import logging
import os
import signal
import sys
import threading
import time

import pytest

from agents.oracle.deep_search import DeepSearchOracle
from llm_marl_envs import deep_search_v3
from llm_marl_envs.search import BM25Backend, SearchRuntime, mini_wiki_spec, shared_runtime
from llm_marl_envs.search.miniwiki import build
from llm_marl_envs.search.server import build_server
from tests.support.processes import wait_until_dead

SPEC = mini_wiki_spec()
QUERY = "Who directed The Copper Compass?"


@pytest.fixture(scope="module")
def server_runtime():
    with SearchRuntime(SPEC, "subprocess", call_timeout_s=20.0) as rt:
        yield rt


def test_server_lists_its_tools_in_process():
    from mcp import Client

    async def main():
        async with Client(build_server(BM25Backend(build().corpus))) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            bad = await client.call_tool("fetch", {"url": "wiki://mini-wiki/Nowhere"})
            return tools, bad

    tools, bad = asyncio.run(main())
    assert set(tools) == {"search", "fetch", "ping"}
    assert tools["search"].input_schema["required"] == ["query"]
    assert bad.is_error and "unknown URL" in bad.content[0].text


def test_inprocess_transport_matches_direct():
    direct = SearchRuntime(SPEC, "direct")
    with SearchRuntime(SPEC, "inprocess") as rt:
        assert rt.search(QUERY, 3).hits == direct.search(QUERY, 3).hits
        page = rt.fetch(direct.search(QUERY, 1).hits[0].url)
        assert page.ok and page.page.startswith("The Copper Compass\n\n")
        assert rt.fetch("wiki://mini-wiki/Nowhere").status == "tool_error"
        assert rt.server_pid is None


def test_subprocess_server_answers_and_reports_tool_errors(server_runtime):
    rt = server_runtime
    result = rt.search(QUERY, 3)
    assert result.ok and result.hits[0].title == "The Copper Compass"
    assert rt.server_pid not in (None, os.getpid()) and os.path.exists(f"/proc/{rt.server_pid}")
    assert result.hits == SearchRuntime(SPEC, "direct").search(QUERY, 3).hits
    missing = rt.fetch("wiki://mini-wiki/Nowhere")
    assert missing.status == "tool_error" and "no page titled 'Nowhere'" in missing.error
    assert rt.call("search", {"query": ""}).status == "tool_error"  # checked before it is sent
    assert rt.search(QUERY).ok, "a tool error leaves the session usable"


def test_one_session_serves_concurrent_callers(server_runtime):
    rt = server_runtime
    assert rt.search(QUERY).ok  # the server runs (also when this test runs first)
    pid, starts = rt.server_pid, rt.starts
    titles = [d.title for d in build().corpus.documents[:24]]
    results: dict[str, str] = {}

    def worker(chunk):
        for t in chunk:
            results[t] = rt.search(t, 1).hits[0].title

    threads = [threading.Thread(target=worker, args=(titles[i::4],)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(30)
    assert results == {t: t for t in titles}
    many = rt.call_many([("search", {"query": t, "k": 1}) for t in titles[:8]] + [("fetch", {"url": "bad"})])
    assert [r.hits[0].title for r in many[:8]] == titles[:8] and many[8].status == "tool_error"
    assert (rt.server_pid, rt.starts) == (pid, starts), "no new server per call"


def test_killing_the_server_mid_episode_gives_an_error_observation_then_recovers(server_runtime):
    rt = server_runtime
    env = deep_search_v3.raw_env(transport="subprocess", runtime=rt, hops=2)
    oracle = DeepSearchOracle()
    env.reset(seed=11, options={"split": "test"})
    env.step(oracle.act("planner", env.observe("planner")))  # delegate hop 1
    env.step(oracle.act("worker_0", env.observe("worker_0")))  # worker_0 searches: OK
    assert env.infos["worker_0"]["call"]["status"] == "ok"
    old_pid, restarts = rt.server_pid, rt.restarts
    os.kill(old_pid, signal.SIGKILL)
    start = time.monotonic()
    env.step(oracle.act("worker_0", env.observe("worker_0")))  # worker_0 fetches: the server is dead
    assert time.monotonic() - start < 10, "a crash must not hang the episode"
    record = env.infos["worker_0"]["call"]
    assert record["status"] == "server_error" and record["valid"], "a crash is not the agent's fault"
    last = env.observe("worker_0")["messages"][-1]["content"]
    assert last.startswith("Error (server_error) from tool fetch:") and "restarted" in last
    # The next call starts a new server and succeeds; the oracle finishes the episode.
    while env.agent_selection != "planner" or not (env.terminations["planner"] or env.truncations["planner"]):
        agent = env.agent_selection
        env.step(oracle.act(agent, env.observe(agent)))
        if agent == "worker_0" and "call" in env.infos["worker_0"]:
            assert env.infos["worker_0"]["call"]["status"] == "ok"
    assert env.success
    assert rt.restarts == restarts + 1 and rt.server_pid not in (None, old_pid)
    wait_until_dead(old_pid)


def test_a_crash_under_concurrent_calls_restarts_the_server_once(server_runtime):
    rt = server_runtime
    assert rt.search(QUERY).ok
    pid, restarts = rt.server_pid, rt.restarts
    out: list = []
    caller = threading.Thread(target=lambda: out.extend(rt.call_many([("search", {"query": f"film {i}"}) for i in range(40)])))
    caller.start()
    os.kill(pid, signal.SIGKILL)
    caller.join(30)
    assert not caller.is_alive() and len(out) == 40
    assert {r.status for r in out} <= {"ok", "server_error"}
    assert all(r.ok for r in rt.call_many([("search", {"query": f"film {i}"}) for i in range(8)]))
    assert rt.restarts == restarts + 1 and rt.server_pid != pid


def test_timeouts_become_errors_and_restart_the_server(server_runtime):
    rt = server_runtime
    assert rt.search(QUERY).ok
    pid, restarts = rt.server_pid, rt.restarts
    rt.call_timeout_s = 1e-4  # no server answers this fast
    start = time.monotonic()
    result = rt.search(QUERY)
    assert result.status == "timeout" and "restarted" in result.error and time.monotonic() - start < 2
    rt.call_timeout_s = 20.0
    assert rt.search(QUERY).ok and rt.server_pid != pid and rt.restarts == restarts + 1


def test_a_server_that_cannot_start_fails_fast_with_its_reason(tmp_path):
    spec = {"backend": "bm25", "corpus": {"kind": "musique", "path": str(tmp_path / "missing.jsonl")}}
    with SearchRuntime(spec, "subprocess", start_timeout_s=30.0, log_path=tmp_path / "server.log") as rt:
        start = time.monotonic()
        first = rt.search(QUERY)
        assert first.status == "server_error" and "did not start" in first.error and "not found" in first.error
        again = rt.search(QUERY)  # within the retry window: answered at once with the same reason
        assert again.status == "server_error" and again.error == first.error
        assert time.monotonic() - start < 25


def test_the_server_loads_the_index_the_runtime_built_before_its_start(tmp_path, monkeypatch):
    """The server built the BM25 index inside its start timeout: a large corpus's build (HotpotQA's train
    set) outlasted it, so the server was killed while building, on every retry. The runtime now builds the
    index (outside the timeout) and the server, with a fresh cache, only loads it."""
    monkeypatch.setenv("LLM_MARL_CACHE", str(tmp_path))
    with SearchRuntime(SPEC, "subprocess", call_timeout_s=20.0) as rt:
        assert rt.search(QUERY).ok
        assert rt.server_info["built"] is False and rt.server_info["documents"] == len(build().corpus.documents)
    assert list((tmp_path / "bm25").iterdir())


def test_a_server_too_slow_to_start_leaves_no_unretrieved_exception(caplog):
    """A start that times out, then is cancelled, printed "Future exception was never retrieved" when
    the runtime's start future was collected (the session set an exception nobody awaited)."""
    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client

    rt = SearchRuntime(SPEC, "subprocess", start_timeout_s=0.2)
    hung = StdioServerParameters(command=sys.executable, args=["-c", "import time; time.sleep(30)"])
    rt._target = lambda: stdio_client(hung)  # a server that never answers
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        result = rt.search(QUERY)
        rt.close()
        gc.collect()
    assert result.status == "server_error" and "did not start" in result.error
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]


def test_runtimes_are_shared_by_environments_and_forks():
    assert shared_runtime(SPEC, "direct") is shared_runtime(SPEC, "direct")
    assert shared_runtime(SPEC, "direct") is not shared_runtime(SPEC, "inprocess")
    env = deep_search_v3.raw_env()
    env.reset(seed=0)
    child = env.fork()
    assert child.runtime is env.runtime and child.source is env.source
    assert copy.deepcopy(env.runtime) is env.runtime
    with pytest.raises(ValueError, match="unknown search transport"):
        SearchRuntime(SPEC, "carrier-pigeon")


def test_close_stops_the_server():
    rt = SearchRuntime(SPEC, "subprocess", call_timeout_s=20.0)  # its own: closing the module's would end it for later tests
    assert rt.search(QUERY).ok
    pid = rt.server_pid
    rt.close()
    rt.close()  # idempotent
    wait_until_dead(pid)
    with pytest.raises(RuntimeError, match="closed"):
        rt.search(QUERY)


@pytest.mark.parametrize("transport", ["subprocess", "inprocess"])
def test_close_leaves_no_descriptor_open(transport):
    """The session's pipes and the loop's own (its selector and wake-up sockets) are all closed,
    not left to the garbage collector."""
    before = set(os.listdir("/proc/self/fd"))
    rt = SearchRuntime(SPEC, transport, call_timeout_s=20.0)
    assert rt.search(QUERY).ok
    rt.close()
    left = {fd: os.readlink(f"/proc/self/fd/{fd}") for fd in set(os.listdir("/proc/self/fd")) - before
            if os.path.exists(f"/proc/self/fd/{fd}")}
    assert not left, f"open after close: {left}"
