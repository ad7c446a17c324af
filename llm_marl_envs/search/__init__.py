"""Search for the deep-search and MASS environments: corpora, retrieval backends, the MCP server.

    from llm_marl_envs.search import SearchRuntime, mini_wiki_spec
    with SearchRuntime(mini_wiki_spec(), transport="subprocess") as rt:   # a real MCP server process
        rt.search("Who directed The Copper Compass?", k=3).hits
        rt.fetch("wiki://mini-wiki/The_Copper_Compass").page

Pieces (each usable alone):

- corpora: `miniwiki` (seeded fictional multi-hop corpus, the offline default) and `loaders`
  (MuSiQue / HotpotQA files), all as `corpus.Corpus` records;
- backends with one interface, `search(query, k) -> [Hit(title, url, snippet)]` and
  `fetch(url) -> str`: `BM25Backend` (bm25s, index cached on disk) and `LiveBackend` (ddgs,
  opt-in, fails fast without network);
- `server`: an MCP server (package `mcp` 2.x, stdio) exposing `search` and `fetch`;
- `runtime.SearchRuntime`: one persistent MCP session (subprocess or in-process) shared by an
  environment, its forks and concurrent callers; crashes and timeouts become error results and
  the server is restarted.

A backend spec is a JSON-friendly dict, so the server subprocess can rebuild the same backend:
`{"backend": "bm25", "corpus": {"kind": "mini-wiki", "seed": 0, ...}}`,
`{"backend": "bm25", "corpus": {"kind": "musique", "path": "..."}}` or `{"backend": "live"}`;
`"snippet_chars"` (default 240) sets the length of BM25 result snippets.
"""

from __future__ import annotations

from typing import Any

from .backends import BackendUnavailable, BM25Backend, Hit, SearchBackend, ToolInputError, cache_root
from .corpus import Corpus, Document, Hop, Question
from .miniwiki import MiniWikiConfig
from .runtime import SearchRuntime, shared_runtime
from .tools import ToolResult


def mini_wiki_spec(config: MiniWikiConfig | None = None) -> dict[str, Any]:
    """The backend spec of BM25 over the mini-wiki of `config` (default config when None)."""
    return {"backend": "bm25", "corpus": (config or MiniWikiConfig()).spec()}


def load_corpus(spec: dict[str, Any]) -> Corpus:
    """Rebuild a corpus from its spec (`Corpus.spec`)."""
    kind = spec.get("kind")
    if kind == "mini-wiki":
        from .miniwiki import build

        fields = {k: v for k, v in spec.items() if k != "kind"}
        return build(MiniWikiConfig(**fields)).corpus
    if kind in ("musique", "hotpotqa"):
        from .loaders import load_dataset

        return load_dataset(spec["path"], kind, spec.get("limit"), spec.get("answerable_only", True))
    raise ValueError(f"unknown corpus kind {kind!r}; use mini-wiki, musique or hotpotqa")


def make_backend(spec: dict[str, Any]) -> SearchBackend:
    """The backend a spec describes (see the module docstring)."""
    kind = spec.get("backend", "bm25")
    if kind == "bm25":
        return BM25Backend(load_corpus(spec["corpus"]), snippet_chars=int(spec.get("snippet_chars", 240)))
    if kind == "live":
        from .live import LiveBackend

        return LiveBackend(**{k: v for k, v in spec.items() if k != "backend"})
    raise ValueError(f"unknown search backend {kind!r}; use 'bm25' (offline, default) or 'live' (ddgs, needs network)")


__all__ = [
    "BM25Backend", "BackendUnavailable", "Corpus", "Document", "Hit", "Hop", "MiniWikiConfig", "Question",
    "SearchBackend", "SearchRuntime", "ToolInputError", "ToolResult", "cache_root", "load_corpus",
    "make_backend", "mini_wiki_spec", "shared_runtime",
]
