"""Retrieval backends behind one interface: `search(query, k) -> [Hit]` and `fetch(url) -> str`.

- `BM25Backend`: BM25 (bm25s, Lucene variant, k1=1.5, b=0.75) over a `Corpus`, the offline
  default. The index is built once and cached on disk under `$LLM_MARL_CACHE/bm25/<corpus hash>`
  (default `~/.cache/llm-marl`); later processes, the MCP server subprocess included, load it.
- `LiveBackend` (`search.live`): DuckDuckGo & co. through `ddgs`, opt-in.

Errors an agent can cause (an unknown URL, an empty query) raise `ToolInputError`; they become
error observations. A backend that cannot work at all raises `BackendUnavailable` with the fix.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

from .corpus import Corpus, title_from_url
from .text import snippet, tokenize

MAX_K = 20
"""Most results one search returns."""
MAX_PAGE_CHARS = 8_000
"""Longest page text `fetch` returns (longer pages are cut, with a marker)."""
MAX_QUERY_CHARS = 1_000
"""Longest search query accepted (a search engine reads a few dozen words)."""
MAX_URL_CHARS = 2_048
"""Longest URL accepted (the de facto limit of browsers and servers)."""
# Characters a tool argument may not hold: lone surrogates cannot be encoded as UTF-8 (one such
# query once killed the shared MCP session of every concurrent call), and control characters
# other than tab and newlines are never part of a query or a URL.
_UNSENDABLE = re.compile("[\ud800-\udfff\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class ToolInputError(ValueError):
    """The agent's arguments are wrong (unknown URL, empty query): reported back to the agent."""


class BackendUnavailable(RuntimeError, ValueError):
    """The backend cannot run here (missing package, no network); the message names the fix. Also a
    ValueError, the error of an option that cannot work (`backend="live"` offline): the commands that
    build an environment report those in one line, where a RuntimeError would end in a traceback."""


@dataclass(frozen=True)
class Hit:
    title: str
    url: str
    snippet: str

    def to_json(self) -> dict[str, str]:
        return asdict(self)


class SearchBackend(Protocol):
    name: str

    def search(self, query: str, k: int = 10) -> list[Hit]: ...

    def fetch(self, url: str) -> str: ...


def cache_root() -> Path:
    """`$LLM_MARL_CACHE`, default `~/.cache/llm-marl`."""
    return Path(os.environ.get("LLM_MARL_CACHE") or Path.home() / ".cache" / "llm-marl").expanduser()


def check_k(k: object) -> int:
    if isinstance(k, bool) or not isinstance(k, int):
        raise ToolInputError(f"k must be an integer between 1 and {MAX_K}, got {k!r}")
    if not 1 <= k <= MAX_K:
        raise ToolInputError(f"k must be between 1 and {MAX_K}, got {k}")
    return k


def check_text(value: object, name: str, max_chars: int) -> str:
    """`value` stripped, when it is a tool argument that can travel: a non-empty string of at most
    `max_chars` characters, encodable as UTF-8, without control characters. ToolInputError (the
    agent's mistake) otherwise; the message never repeats the offending character itself."""
    if not isinstance(value, str) or not value.strip():
        raise ToolInputError(f"{name} must be a non-empty string")
    text = value.strip()
    if len(text) > max_chars:
        raise ToolInputError(f"{name} is {len(text)} characters long; the limit is {max_chars}")
    bad = _UNSENDABLE.search(text)
    if bad is not None:
        raise ToolInputError(f"{name} contains the character {ascii(bad.group())} at position {bad.start()}, "
                             "which is not text (a lone surrogate or a control character)")
    return text


def check_query(query: object) -> str:
    return check_text(query, "query", MAX_QUERY_CHARS)


def check_url(url: object) -> str:
    return check_text(url, "url", MAX_URL_CHARS)


def _import_bm25s():
    # Where JAX is installed, importing bm25s runs a JAX top-k, which starts JAX on the GPU, and JAX takes
    # 75 % of a GPU's memory for itself from then on (the trainer's CUDA tests ran out of memory on a GPU
    # machine with JAX). So JAX starts on the CPU for this import, unless it was imported before or
    # JAX_PLATFORMS says where it runs; rank() uses bm25s's numpy top-k either way.
    keep_jax_on_cpu = "jax" not in sys.modules and "JAX_PLATFORMS" not in os.environ
    if keep_jax_on_cpu:
        os.environ["JAX_PLATFORMS"] = "cpu"
    try:
        import bm25s  # noqa: PLC0415
    except ImportError as e:
        raise BackendUnavailable("the BM25 backend needs the `bm25s` package: pip install 'llm-marl[search]'") from e
    finally:
        if keep_jax_on_cpu:
            os.environ.pop("JAX_PLATFORMS", None)
    return bm25s


_BUILD_LOCK = threading.Lock()


class BM25Backend:
    """BM25 over a corpus; documents are indexed as title (twice, as a field boost) plus text."""

    name = "bm25"

    def __init__(self, corpus: Corpus, cache_dir: str | Path | None = None, snippet_chars: int = 240):
        if not corpus.documents:
            raise ValueError(f"corpus {corpus.name!r} has no documents")
        self.corpus = corpus
        self.snippet_chars = int(snippet_chars)
        self.index_dir = Path(cache_dir) if cache_dir is not None else cache_root() / "bm25" / corpus.corpus_hash[:32]
        self.built = False
        """True when this process built the index (False: loaded from the disk cache)."""
        self.retriever = self._load_or_build()

    def __deepcopy__(self, memo: dict) -> BM25Backend:
        return self

    def _load_or_build(self):
        bm25s = _import_bm25s()
        marker = self.index_dir / "params.index.json"
        with _BUILD_LOCK:
            if marker.exists():
                try:
                    return bm25s.BM25.load(str(self.index_dir), show_progress=False)
                except Exception:  # a corrupt cache entry is rebuilt, never trusted
                    shutil.rmtree(self.index_dir, ignore_errors=True)
            tokens = [tokenize(f"{d.title} {d.title} {d.text}") for d in self.corpus.documents]
            retriever = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
            retriever.index(tokens, show_progress=False)
            self._save(retriever)
            self.built = True
            return retriever

    def _save(self, retriever) -> None:
        # Build in a temporary folder and rename: concurrent processes never see half an index.
        # An unwritable cache only costs a rebuild next time.
        try:
            self.index_dir.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=".bm25-", dir=self.index_dir.parent))
        except OSError:
            return
        try:
            retriever.save(str(tmp), show_progress=False)
            try:
                tmp.rename(self.index_dir)
            except OSError:  # another process won the race: its index is identical
                shutil.rmtree(tmp, ignore_errors=True)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)

    def rank(self, query: str, k: int) -> list[tuple[int, float]]:
        """(document index, score) of the top `k` documents with a positive score."""
        tokens = [t for t in tokenize(query) if t in self.retriever.vocab_dict]
        if not tokens:
            return []
        k = min(k, len(self.corpus.documents))
        docs, scores = self.retriever.retrieve([tokens], k=k, show_progress=False, n_threads=0, backend_selection="numpy")
        return [(int(i), float(s)) for i, s in zip(docs[0], scores[0]) if s > 0]

    def search(self, query: str, k: int = 10) -> list[Hit]:
        query, k = check_query(query), check_k(k)
        out = []
        for i, _ in self.rank(query, k):
            d = self.corpus.documents[i]
            out.append(Hit(d.title, d.url, snippet(d.text, query, self.snippet_chars)))
        return out

    def fetch(self, url: str) -> str:
        url = check_url(url)
        doc = self.corpus.by_url.get(url)
        if doc is None:
            title = title_from_url(url)
            page = self.corpus.by_title.get(title) if title else None
            if page is not None:  # the right title in a URL written otherwise (an unescaped "'", "ã" or space)
                hint = f" (the page titled {title!r} is at {page.url}: use the URL as search results give it)"
            else:
                hint = f" (no page titled {title!r})" if title else " (pages of this corpus have wiki:// URLs from search results)"
            raise ToolInputError(f"unknown URL {url!r}{hint}")
        return cut_page(doc.page())


def cut_page(text: str, limit: int = MAX_PAGE_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + "\n[... page truncated]"
