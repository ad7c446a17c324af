"""The live web backend: search through `ddgs` (the maintained DuckDuckGo/metasearch client) and
page fetching through `search.webpage.PageFetcher`, which refuses loopback, private, link-local
and other non-public targets after DNS resolution, at every redirect hop (agents choose the URLs:
`DDGS.extract` fetched `http://127.0.0.1/` and returned the page). Opt-in (`backend="live"`);
offline BM25 is the default.

It fails fast: constructing it (or a runtime for it) first probes the network with a short
timeout and raises `BackendUnavailable` naming the fix, instead of letting every tool call wait.
Tests drive it with a recorded response through the `client` argument and a `fetcher` whose name
resolution is faked (no network needed).
"""

from __future__ import annotations

import socket
import threading
from typing import Any

from .backends import MAX_PAGE_CHARS, BackendUnavailable, Hit, ToolInputError, check_k, check_query, check_url, cut_page
from .webpage import NetworkError, PageFetcher

PROBE_HOST = "duckduckgo.com"


def _unavailable(reason: str) -> BackendUnavailable:
    return BackendUnavailable(
        f"live web search is unavailable: {reason}. Use the offline backend (backend='bm25', the default) or give "
        "this machine network access (a proxy for searches can be set with DDGS_PROXY; pages are fetched directly)")


def preflight(timeout: float = 3.0, probe_host: str = PROBE_HOST) -> None:
    """Raise BackendUnavailable within about `timeout` seconds when `probe_host:443` is unreachable."""
    try:
        import ddgs  # noqa: F401, PLC0415
    except ImportError as e:
        raise BackendUnavailable("the live backend needs the `ddgs` package: pip install 'llm-marl[search]'") from e
    outcome: dict[str, Any] = {}

    def probe() -> None:
        try:
            socket.create_connection((probe_host, 443), timeout=timeout).close()
            outcome["ok"] = True
        except OSError as e:  # DNS failure, refused, unreachable, timeout
            outcome["error"] = f"{type(e).__name__}: {e}"

    # DNS resolution ignores the socket timeout: bound the whole probe from outside.
    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout + 1.0)
    if not outcome.get("ok"):
        raise _unavailable(f"cannot reach {probe_host}:443 ({outcome.get('error', f'no answer within {timeout:g} s')})")


class LiveBackend:
    """Web search through `ddgs` (`DDGS.text`); page text through `search.webpage.PageFetcher`."""

    name = "live"

    def __init__(self, timeout: float = 10.0, region: str = "us-en", safesearch: str = "moderate", engines: str = "auto",
                 client: Any = None, check: bool = True, probe_host: str = PROBE_HOST, fetcher: PageFetcher | None = None):
        self.region, self.safesearch, self.engines = region, safesearch, engines
        self.fetcher = fetcher if fetcher is not None else PageFetcher(timeout=float(timeout))
        if client is None:
            if check:
                preflight(min(float(timeout), 5.0), probe_host)
            from ddgs import DDGS  # noqa: PLC0415

            client = DDGS(timeout=int(max(1, timeout)))
        self.client = client

    def __deepcopy__(self, memo: dict) -> LiveBackend:
        return self

    @staticmethod
    def _error_types() -> tuple[type[BaseException], ...]:
        try:
            from ddgs.exceptions import DDGSException  # noqa: PLC0415
        except ImportError:
            return (OSError,)
        return (DDGSException, OSError)

    def search(self, query: str, k: int = 10) -> list[Hit]:
        query, k = check_query(query), check_k(k)
        try:
            rows = self.client.text(query, region=self.region, safesearch=self.safesearch, max_results=k, backend=self.engines)
        except self._error_types() as e:
            if "no results" in str(e).lower():
                return []
            raise _unavailable(f"search failed ({type(e).__name__}: {e})") from None
        hits = []
        for row in rows or []:
            url = str(row.get("href") or row.get("url") or "")
            if url:
                hits.append(Hit(str(row.get("title", "")).strip(), url, " ".join(str(row.get("body", "")).split())))
        return hits[:k]

    def fetch(self, url: str) -> str:
        url = check_url(url)
        if not url.lower().startswith(("http://", "https://")):
            raise ToolInputError(f"url must be an http(s) URL from a search result, got {url!r}")
        try:
            page = self.fetcher.fetch(url)  # ToolInputError: a refused target or an HTTP error status
        except NetworkError as e:
            raise _unavailable(f"fetch failed ({e})") from None
        return cut_page(page.strip(), MAX_PAGE_CHARS)
