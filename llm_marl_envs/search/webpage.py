"""Fetching a web page for an agent, without letting the agent reach what it must not (SSRF).

An agent's `fetch(url)` would otherwise read the machine it runs on: `http://127.0.0.1:8000/`, a
cloud metadata service (`169.254.169.254`), hosts on the private network, `file://` URLs. So:

- only `http` and `https` URLs are fetched;
- the host is resolved first and every address it resolves to must be public (not loopback,
  private, link-local, multicast, reserved or unspecified, including IPv4 addresses embedded in
  IPv6 ones); the connection then goes to the address that was checked, never to a second
  lookup, so a name that resolves differently the next time (DNS rebinding) cannot slip through;
- redirects are followed by hand (at most `MAX_REDIRECTS`) and every hop is checked the same way;
- no proxy from the environment is used (it would resolve names itself, unchecked);
- bodies are read up to `MAX_BYTES` within one deadline, and only text pages are kept (HTML is
  turned into plain text with the standard library's parser).

A refused target or an HTTP error is the agent's mistake (`ToolInputError`); a network failure is
not (`BackendUnavailable`, raised by the caller with the fix).
"""

from __future__ import annotations

import http.client
import ipaddress
import re
import socket
import ssl
import time
import zlib
from collections.abc import Callable
from html.parser import HTMLParser
from urllib.parse import quote, urljoin, urlsplit

from .backends import ToolInputError

MAX_REDIRECTS = 5
MAX_BYTES = 2_000_000
"""Most bytes read from one page (more is cut: `fetch` shows 8,000 characters anyway)."""
_REDIRECTS = (301, 302, 303, 307, 308)
_USER_AGENT = "Mozilla/5.0 (compatible; llm-marl-fetch/1.0)"

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], list[str]]
Connector = Callable[[str, int, float], socket.socket]


class FetchRefused(ToolInputError):
    """The URL points where an agent may not go (a non-public address or a non-http(s) scheme)."""


class NetworkError(OSError):
    """The page could not be fetched for a reason that is not the agent's (DNS, connection, timeout)."""


def _embedded(ip: Address) -> list[Address]:
    """IPv4 addresses carried inside an IPv6 one (mapped, 6to4, Teredo)."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return []
    found = [ip.ipv4_mapped, ip.sixtofour, *(ip.teredo or ())]
    return [a for a in found if a is not None]


# Most specific first: 169.254.0.0/16 is also "private" to the ipaddress module.
_CLASSES = (("a loopback", "is_loopback"), ("a link-local", "is_link_local"), ("a multicast", "is_multicast"),
            ("the unspecified", "is_unspecified"), ("a reserved", "is_reserved"), ("a private", "is_private"))


def refusal(ip: Address) -> str | None:
    """Why an agent may not connect to `ip` (None when it is a public address)."""
    for address in (*_embedded(ip), ip):
        for words, attribute in _CLASSES:
            if getattr(address, attribute):
                return f"{address}, {words} address"
        if not address.is_global:
            return f"{address}, not a public address"
    return None


def resolve(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (NetworkError when it does not resolve)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as e:
        raise NetworkError(f"cannot resolve {host!r} ({e})") from None
    return list(dict.fromkeys(info[4][0] for info in infos))


def connect(ip: str, port: int, timeout: float) -> socket.socket:
    return socket.create_connection((ip, port), timeout=timeout)


class _PinnedConnection(http.client.HTTPConnection):
    """HTTP(S) to `host` over a socket opened to the already checked address `ip`."""

    def __init__(self, host: str, port: int, ip: str, opener: Connector, timeout: float, tls: ssl.SSLContext | None):
        super().__init__(host, port, timeout=timeout)
        self._ip, self._opener, self._tls = ip, opener, tls

    def connect(self) -> None:
        sock = self._opener(self._ip, self.port, self.timeout)
        self.sock = self._tls.wrap_socket(sock, server_hostname=self.host) if self._tls is not None else sock


class PageFetcher:
    """`fetch(url) -> text` with the checks of the module docstring. `resolver` and `connector`
    are injectable so tests can play a public host on a local server."""

    def __init__(self, timeout: float = 10.0, resolver: Resolver = resolve, connector: Connector = connect):
        self.timeout = float(timeout)
        self.resolver = resolver
        self.connector = connector
        self.tls = ssl.create_default_context()

    def __deepcopy__(self, memo: dict) -> PageFetcher:
        return self

    def target(self, url: str) -> tuple[str, str, int, str]:
        """(scheme, host, port, checked address) of `url`, or FetchRefused."""
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as e:
            raise FetchRefused(f"malformed URL {url!r} ({e})") from None
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https"):
            raise FetchRefused(f"only http(s) URLs can be fetched, got {url!r}")
        host = parts.hostname
        if not host:
            raise FetchRefused(f"the URL {url!r} names no host")
        port = port or (443 if scheme == "https" else 80)
        addresses = self.resolver(host, port)
        if not addresses:
            raise NetworkError(f"{host!r} resolves to no address")
        for address in addresses:
            try:
                why = refusal(ipaddress.ip_address(address.split("%", 1)[0]))
            except ValueError:
                why = f"{address!r} is not an IP address"
            if why is not None:
                raise FetchRefused(f"refused to fetch {url!r}: {host} resolves to {why}")
        return scheme, host, port, addresses[0]

    def fetch(self, url: str) -> str:
        """The page's text. FetchRefused / ToolInputError for the agent's URL, NetworkError else."""
        deadline = time.monotonic() + self.timeout
        for _ in range(MAX_REDIRECTS + 1):
            scheme, host, port, ip = self.target(url)
            status, headers, body = self._get(url, scheme, host, port, ip, deadline)
            if status in _REDIRECTS and headers.get("location"):
                url = urljoin(url, headers["location"])
                continue
            if status != 200:
                raise ToolInputError(f"Failed to fetch {url}: HTTP {status}")
            return page_text(body, headers.get("content-type", ""), headers.get("content-encoding", ""))
        raise ToolInputError(f"more than {MAX_REDIRECTS} redirects fetching {url!r}")

    def _get(self, url: str, scheme: str, host: str, port: int, ip: str, deadline: float) -> tuple[int, dict[str, str], bytes]:
        parts = urlsplit(url)
        # Percent-encode what may not travel raw (spaces, non-ASCII); existing escapes are kept.
        path = quote((parts.path or "/") + (f"?{parts.query}" if parts.query else ""), safe="/?%:@!$&'()*+,;=~-._")
        conn = _PinnedConnection(host, port, ip, self.connector, max(0.1, deadline - time.monotonic()),
                                 self.tls if scheme == "https" else None)
        try:
            conn.request("GET", path, headers={"User-Agent": _USER_AGENT, "Accept-Encoding": "gzip, identity",
                                               "Accept": "text/html,text/plain;q=0.9,*/*;q=0.1"})
            response = conn.getresponse()
            headers = {k.lower(): v for k, v in response.getheaders()}
            body = bytearray()
            if response.status == 200:
                while len(body) <= MAX_BYTES:
                    if time.monotonic() > deadline:  # a server dripping bytes must not hold the episode
                        raise NetworkError(f"the page did not arrive within {self.timeout:g} s")
                    chunk = response.read(65_536)
                    if not chunk:
                        break
                    body += chunk
            return response.status, headers, bytes(body[:MAX_BYTES])
        except (OSError, http.client.HTTPException, ssl.SSLError) as e:
            if isinstance(e, NetworkError):
                raise
            raise NetworkError(f"fetching {url!r} failed ({type(e).__name__}: {e})") from None
        finally:
            conn.close()


def page_text(body: bytes, content_type: str, content_encoding: str = "") -> str:
    """The text of a response body: HTML as plain text, text/* as is; other types are refused."""
    if content_encoding.strip().lower() in ("gzip", "x-gzip", "deflate"):
        try:  # wbits 47: gzip or zlib header; max_length: a decompression bomb stops at the cap
            body = zlib.decompressobj(47).decompress(body, MAX_BYTES)
        except zlib.error as e:
            raise NetworkError(f"the page's {content_encoding} body is corrupt ({e})") from None
    kind, _, params = content_type.partition(";")
    kind = kind.strip().lower()
    charset = next((p.split("=", 1)[1].strip().strip('"') for p in params.split(";") if p.strip().lower().startswith("charset=")),
                   "utf-8")
    try:
        text = body.decode(charset, "replace")
    except LookupError:
        text = body.decode("utf-8", "replace")
    if kind in ("text/html", "application/xhtml+xml") or (not kind and text.lstrip()[:1] == "<"):
        return html_text(text)
    if kind.startswith("text/") or not kind:
        return text
    raise ToolInputError(f"the page is not text (content type {kind})")


_SPACE = re.compile(r"\s+")


class _TextParser(HTMLParser):
    """Visible text of an HTML document, one block element per line."""

    HIDDEN = frozenset({"script", "style", "noscript", "template", "svg", "head"})
    BLOCKS = frozenset({"p", "div", "br", "li", "ul", "ol", "tr", "table", "section", "article", "header", "footer",
                        "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote", "title", "dd", "dt", "hr"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.hidden = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in self.HIDDEN:
            self.hidden += 1
        elif tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self.HIDDEN:
            self.hidden = max(0, self.hidden - 1)
        elif tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.hidden:
            self.parts.append(_SPACE.sub(" ", data))  # a newline in HTML text is a space


def html_text(html: str) -> str:
    parser = _TextParser()
    parser.feed(html)
    parser.close()
    lines = (" ".join(line.split()) for line in "".join(parser.parts).split("\n"))
    return "\n".join(line for line in lines if line)
