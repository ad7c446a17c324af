"""The live web backend (ddgs): driven by a recorded response (no network), and its fail-fast path."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

from llm_marl_envs.search import BackendUnavailable, SearchRuntime, ToolInputError, make_backend
from llm_marl_envs.search.live import LiveBackend, preflight

RECORDED = json.loads((Path(__file__).parent / "fixtures" / "search" / "ddgs_text_response.json").read_text())


class RecordedDDGS:
    """Stands in for `ddgs.DDGS`: answers `text` and `extract` from the recorded response."""

    def __init__(self, fail: Exception | None = None):
        self.fail = fail
        self.calls: list[tuple] = []

    def text(self, query, **kwargs):
        self.calls.append(("text", query, kwargs))
        if self.fail:
            raise self.fail
        return RECORDED["text"][: kwargs.get("max_results", 10)]

    def extract(self, url, fmt="text_markdown"):
        self.calls.append(("extract", url, fmt))
        if self.fail:
            raise self.fail
        if url != RECORDED["extract"]["url"]:
            from ddgs.exceptions import DDGSException

            raise DDGSException(f"Failed to fetch {url}: HTTP 404")
        return RECORDED["extract"]


def test_search_and_fetch_from_a_recorded_response():
    client = RecordedDDGS()
    backend = LiveBackend(client=client)
    hits = backend.search(RECORDED["query"], 2)
    assert [h.title for h in hits] == [r["title"] for r in RECORDED["text"][:2]]
    assert hits[0].url == RECORDED["text"][0]["href"] and hits[0].snippet == RECORDED["text"][0]["body"]
    assert client.calls[0] == ("text", RECORDED["query"], {"region": "us-en", "safesearch": "moderate", "max_results": 2,
                                                          "backend": "auto"})
    page = backend.fetch(hits[0].url)
    assert page.startswith("Specification\n\nModel Context Protocol (MCP) is an open protocol")
    assert client.calls[-1] == ("extract", hits[0].url, "text_plain")
    with pytest.raises(ToolInputError, match="HTTP 404"):
        backend.fetch("https://example.org/missing")
    with pytest.raises(ToolInputError, match="http"):
        backend.fetch("wiki://mini-wiki/Paper")


def test_backend_failures_are_reported_as_unavailable_not_as_agent_errors():
    from ddgs.exceptions import DDGSException

    backend = LiveBackend(client=RecordedDDGS(fail=DDGSException("DNSError: error resolving DNS")))
    with pytest.raises(BackendUnavailable, match="live web search is unavailable.*backend='bm25'"):
        backend.search("anything")
    assert LiveBackend(client=RecordedDDGS(fail=DDGSException("No results found."))).search("anything") == []


def test_runtime_turns_live_failures_into_server_errors(monkeypatch):
    from ddgs.exceptions import DDGSException

    rt = SearchRuntime({"backend": "bm25", "corpus": {"kind": "mini-wiki"}}, "direct")
    monkeypatch.setattr(rt, "_backend", LiveBackend(client=RecordedDDGS(fail=DDGSException("timed out"))))
    result = rt.search("anything")
    assert result.status == "server_error" and "unavailable" in result.error
    monkeypatch.setattr(rt, "_backend", LiveBackend(client=RecordedDDGS()))
    assert rt.search(RECORDED["query"], 3).hits[0].title == RECORDED["text"][0]["title"]
    # Through the MCP server too: the server marks the backend's fault, the runtime reports server_error.
    with SearchRuntime({"backend": "bm25", "corpus": {"kind": "mini-wiki"}}, "inprocess") as mcp_rt:
        mcp_rt._backend = LiveBackend(client=RecordedDDGS(fail=DDGSException("timed out")))
        failed = mcp_rt.search("anything")
        assert failed.status == "server_error" and failed.error.startswith("BackendUnavailable: live web search is unavailable")
        assert mcp_rt.fetch("https://example.org/missing").status == "server_error"


def test_fails_fast_with_a_clear_message_without_network(monkeypatch):
    def unreachable(*args, **kwargs):
        raise OSError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(socket, "create_connection", unreachable)
    start = time.monotonic()
    with pytest.raises(BackendUnavailable, match=r"cannot reach duckduckgo.com:443.*backend='bm25'"):
        make_backend({"backend": "live"})
    with pytest.raises(BackendUnavailable, match="cannot reach"):
        SearchRuntime({"backend": "live"}, "subprocess")  # checked before any server is started
    assert time.monotonic() - start < 5


def test_a_hanging_network_is_cut_short(monkeypatch):
    def hang(*args, **kwargs):
        time.sleep(30)
        raise OSError("timed out")  # what a real connect does after hanging (the probe thread outlives the test)

    monkeypatch.setattr(socket, "create_connection", hang)
    start = time.monotonic()
    with pytest.raises(BackendUnavailable, match="no answer within"):
        preflight(timeout=0.5)
    assert time.monotonic() - start < 3


def test_real_probe_on_this_machine_is_quick():
    """Without monkeypatching: on a machine without web access this fails within seconds."""
    start = time.monotonic()
    try:
        preflight(timeout=2.0)
    except BackendUnavailable as e:
        assert "backend='bm25'" in str(e)
    else:
        pytest.skip("this machine can reach the web; the offline path is covered above")
    assert time.monotonic() - start < 5
