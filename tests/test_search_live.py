"""The live web backend (ddgs): driven by a recorded response (no network), its fail-fast path, and
page fetching that refuses non-public targets (SSRF, issue 11 #9) with local servers only."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from agents.oracle.deep_search import tool_call
from llm_marl_envs import deep_search_v3
from llm_marl_envs.search import BackendUnavailable, SearchRuntime, ToolInputError, make_backend, mini_wiki_spec
from llm_marl_envs.search.live import LiveBackend, preflight
from llm_marl_envs.search.miniwiki import build
from llm_marl_envs.search.webpage import FetchRefused, NetworkError, PageFetcher, html_text, resolve

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
        raise AssertionError("pages are fetched by search.webpage.PageFetcher, never by ddgs (it follows any URL)")


# ------------------------------------------------------------------ a local web server, and a fake DNS
class Site(BaseHTTPRequestHandler):
    """Pages of the local server. `hits` counts the requests it answered."""

    hits: list[str] = []
    redirect_to: dict[str, str] = {}

    def do_GET(self):  # noqa: N802 (http.server's name)
        Site.hits.append(self.path)
        if self.path in Site.redirect_to:
            self.send_response(302)
            self.send_header("Location", Site.redirect_to[self.path])
            self.end_headers()
            return
        pages = {"/secret": ("text/plain", "TOP SECRET"),
                 "/page": ("text/html; charset=utf-8", RECORDED["extract"]["content"].replace("\n\n", "<p>")),
                 "/binary": ("application/octet-stream", "\x00\x01")}
        if self.path not in pages:
            self.send_response(404)
            self.end_headers()
            return
        kind, body = pages[self.path]
        data = ("<html><head><title>t</title><script>var x = 1;</script></head><body>" + body + "</body></html>"
                if kind.startswith("text/html") else body).encode()
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def site():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Site)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture
def hits():
    Site.hits.clear()
    Site.redirect_to.clear()
    return Site.hits


FAKE_DNS = {
    "public.example": ["93.184.216.34"], "other.example": ["2606:2800:220:1::34"],
    "internal.example": ["10.0.0.5"], "metadata.example": ["169.254.169.254"], "mixed.example": ["93.184.216.34", "192.168.1.7"],
    "mapped.example": ["::ffff:127.0.0.1"], "sixtofour.example": ["2002:7f00:1::1"], "multicast.example": ["224.0.0.251"],
    "reserved.example": ["240.0.0.1"], "zero.example": ["0.0.0.0"], "cgnat.example": ["100.64.0.1"], "ula.example": ["fd00::1"],
}


def faked(port: int) -> PageFetcher:
    """A fetcher whose DNS is FAKE_DNS and whose public hosts are played by the local server."""
    def resolver(host, _port):
        if ":" in host or host.replace(".", "").isdigit():
            return [host]  # an address literal, as getaddrinfo returns it
        if host not in FAKE_DNS:
            raise NetworkError(f"cannot resolve {host!r}")
        return FAKE_DNS[host]

    def connector(ip, _port, timeout):
        assert ip in ("93.184.216.34", "2606:2800:220:1::34"), f"connected to the refused address {ip}"
        return socket.create_connection(("127.0.0.1", port), timeout=timeout)

    return PageFetcher(timeout=5.0, resolver=resolver, connector=connector)


def test_search_and_fetch_from_a_recorded_response(site, hits):
    client = RecordedDDGS()
    backend = LiveBackend(client=client, fetcher=faked(site))
    hits_ = backend.search(RECORDED["query"], 2)
    assert [h.title for h in hits_] == [r["title"] for r in RECORDED["text"][:2]]
    assert hits_[0].url == RECORDED["text"][0]["href"] and hits_[0].snippet == RECORDED["text"][0]["body"]
    assert client.calls[0] == ("text", RECORDED["query"], {"region": "us-en", "safesearch": "moderate", "max_results": 2,
                                                          "backend": "auto"})
    page = backend.fetch("http://public.example/page")
    assert page.startswith("Specification\nModel Context Protocol (MCP) is an open protocol") and "var x" not in page
    with pytest.raises(ToolInputError, match="HTTP 404"):
        backend.fetch("http://public.example/missing")
    with pytest.raises(ToolInputError, match="not text"):
        backend.fetch("http://public.example/binary")
    with pytest.raises(ToolInputError, match="http"):
        backend.fetch("wiki://mini-wiki/Paper")
    with pytest.raises(ToolInputError, match="HTTP 404"):
        backend.fetch("http://public.example/caf\u00e9 au lait?q=a b")  # encoded, not an exception
    assert hits == ["/page", "/missing", "/binary", "/caf%C3%A9%20au%20lait?q=a%20b"]


# ------------------------------------------------------------------ SSRF (issue 11 #9)
def test_a_real_client_does_not_fetch_loopback(site, hits):
    """The finding as reported: LiveBackend.fetch with the real ddgs client fetched 127.0.0.1 and
    returned the page to the agent."""
    from ddgs import DDGS

    backend = LiveBackend(client=DDGS(timeout=5), check=False)
    for url in (f"http://127.0.0.1:{site}/secret", f"http://localhost:{site}/secret", f"http://2130706433:{site}/secret",
                f"http://[::1]:{site}/secret", f"http://evil@127.0.0.1:{site}/secret"):
        with pytest.raises(ToolInputError, match="loopback"):
            backend.fetch(url)
    assert hits == [], "the local server was never asked"


@pytest.mark.parametrize("host,reason", [
    ("internal.example", "10.0.0.5, a private address"), ("metadata.example", "169.254.169.254, a link-local address"),
    ("mixed.example", "192.168.1.7, a private address"), ("mapped.example", "127.0.0.1, a loopback address"),
    ("sixtofour.example", "127.0.0.1, a loopback address"), ("multicast.example", "a multicast address"),
    ("reserved.example", "a reserved address"), ("zero.example", "0.0.0.0"), ("cgnat.example", "not a public address"),
    ("ula.example", "fd00::1, a private address"),
])
def test_non_public_targets_are_refused_after_resolution(site, hits, host, reason):
    with pytest.raises(FetchRefused, match=reason.replace(".", r"\.")):
        faked(site).fetch(f"http://{host}/secret")
    assert hits == []


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://public.example/x", "gopher://public.example/", "wiki://x",
                                 "http:///nohost", "http://public.example:99999/"])
def test_only_http_urls_to_a_host_are_fetched(site, hits, url):
    with pytest.raises(FetchRefused):
        faked(site).fetch(url)
    assert hits == []


@pytest.mark.parametrize("target,reason", [
    ("http://127.0.0.1:{port}/secret", "loopback"), ("http://metadata.example/latest", "link-local"),
    ("file:///etc/passwd", "only http"), ("/loop", "redirects"),
])
def test_every_redirect_hop_is_checked(site, hits, target, reason):
    Site.redirect_to.update({"/go": target.format(port=site), "/loop": "/loop"})
    with pytest.raises(ToolInputError, match=reason):
        faked(site).fetch("http://public.example/go")
    assert "/secret" not in hits and hits[0] == "/go"


def test_redirects_to_public_hosts_are_followed(site, hits):
    Site.redirect_to.update({"/go": "http://[2606:2800:220:1::34]/page", "/old": "/go"})
    page = faked(site).fetch("http://public.example/old")
    assert page.startswith("Specification") and hits == ["/old", "/go", "/page"]


def test_resolution_failures_are_network_errors_not_the_agents():
    with pytest.raises(NetworkError):
        resolve("name.invalid", 80)  # RFC 6761: never resolves, answered locally
    backend = LiveBackend(client=RecordedDDGS(), fetcher=PageFetcher(resolver=lambda h, p: (_ for _ in ()).throw(NetworkError("no DNS"))))
    with pytest.raises(BackendUnavailable, match="no DNS"):
        backend.fetch("https://example.org/")


def test_a_worker_fetching_loopback_is_refused_and_blamed(site, hits):
    rt = SearchRuntime(mini_wiki_spec(), "direct")
    rt._backend = LiveBackend(client=RecordedDDGS(), fetcher=PageFetcher(timeout=5.0))
    q = build().sample_question(np.random.default_rng(0), 2)
    env = deep_search_v3.raw_env(runtime=rt)
    env.reset(seed=0, options={"instance": q})
    env.step(tool_call("browsing_agent", "search_and_browse", {"subtask": "read the admin page"}))
    env.step(tool_call("llm-marl-search", "fetch", {"url": f"http://127.0.0.1:{site}/secret"}))
    record = env.infos["worker_0"]["call"]
    assert record["status"] == "tool_error" and not record["valid"] and "loopback" in record["error"]
    assert "TOP SECRET" not in env.observe("worker_0")["messages"][-1]["content"] and hits == []


def test_html_text_keeps_visible_text_only():
    html = "<html><head><title>T</title><style>p{}</style></head><body><h1>A &amp; B</h1><p>one\n two</p>" \
           "<script>alert(1)</script><ul><li>x</li><li>y</li></ul></body></html>"
    assert html_text(html) == "A & B\none two\nx\ny"


def test_backend_failures_are_reported_as_unavailable_not_as_agent_errors():
    from ddgs.exceptions import DDGSException

    backend = LiveBackend(client=RecordedDDGS(fail=DDGSException("DNSError: error resolving DNS")))
    with pytest.raises(BackendUnavailable, match="live web search is unavailable.*backend='bm25'"):
        backend.search("anything")
    assert LiveBackend(client=RecordedDDGS(fail=DDGSException("No results found."))).search("anything") == []


def test_runtime_turns_live_failures_into_server_errors(monkeypatch):
    from ddgs.exceptions import DDGSException

    rt = SearchRuntime({"backend": "bm25", "corpus": {"kind": "mini-wiki"}}, "direct")
    offline = PageFetcher(resolver=lambda host, port: (_ for _ in ()).throw(NetworkError(f"cannot resolve {host!r}")))
    monkeypatch.setattr(rt, "_backend", LiveBackend(client=RecordedDDGS(fail=DDGSException("timed out")), fetcher=offline))
    result = rt.search("anything")
    assert result.status == "server_error" and "unavailable" in result.error
    monkeypatch.setattr(rt, "_backend", LiveBackend(client=RecordedDDGS(), fetcher=offline))
    assert rt.search(RECORDED["query"], 3).hits[0].title == RECORDED["text"][0]["title"]
    # Through the MCP server too: the server marks the backend's fault, the runtime reports server_error.
    with SearchRuntime({"backend": "bm25", "corpus": {"kind": "mini-wiki"}}, "inprocess") as mcp_rt:
        mcp_rt._backend = LiveBackend(client=RecordedDDGS(fail=DDGSException("timed out")), fetcher=offline)
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
