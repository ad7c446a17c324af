"""The search tools as agents see them: names, JSON schemas, results and their text rendering.

The MCP server (`search.server`) and the direct transport both call `run_tool`, so an agent gets
the same answer whichever way the call travelled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .backends import MAX_K, Hit, SearchBackend, ToolInputError, check_k, check_query, check_url, cut_page

SERVER_NAME = "llm-marl-search"
"""The MCP server's name: what workers write in `<server_name>`."""
DEFAULT_K = 5

TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "search": {
        "description": "Search the document collection. Returns a ranked list of results, each with a title, a URL "
                       "and a short snippet of the page.",
        "input_schema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Search query string"},
                "k": {"type": "integer", "description": f"Number of results to return (1-{MAX_K}, default {DEFAULT_K})"},
            },
            "required": ["query"],
        },
    },
    "fetch": {
        "description": "Fetch a page by its URL (from a search result) and return its full text.",
        "input_schema": {
            "type": "object",
            "properties": {"url": {"type": "string", "description": "The URL of the page to fetch."}},
            "required": ["url"],
        },
    },
}
STATUSES = ("ok", "tool_error", "server_error", "timeout")
SERVER_FAULT = "[server fault]"
"""Prefix of MCP tool errors that are the backend's fault, not the agent's (status server_error)."""


@dataclass
class ToolResult:
    """What a tool call returned, ready to show to an agent."""

    tool: str
    arguments: dict[str, Any]
    status: str = "ok"
    """ok | tool_error (bad arguments, unknown URL: the agent's doing) | server_error (crash,
    unreachable backend: not the agent's doing) | timeout."""
    hits: list[Hit] = field(default_factory=list)
    page: str = ""
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def render(self) -> str:
        """The tool response text an agent reads."""
        if not self.ok:
            return f"Error ({self.status}) from tool {self.tool}: {self.error}"
        if self.tool == "search":
            query = self.arguments.get("query", "")
            if not self.hits:
                return f"No results for {query!r}."
            lines = [f"Search results for {query!r}:"]
            for i, h in enumerate(self.hits, 1):
                lines.append(f"{i}. {h.title}\n   URL: {h.url}\n   {h.snippet}")
            return "\n".join(lines)
        return self.page

    def to_json(self) -> dict[str, Any]:
        """JSON-friendly record for `infos` (hits as titles and URLs; pages by length)."""
        out: dict[str, Any] = {"tool": self.tool, "arguments": dict(self.arguments), "status": self.status}
        if self.tool == "search" and self.ok:
            out["results"] = [{"title": h.title, "url": h.url} for h in self.hits]
        if self.tool == "fetch" and self.ok:
            out["page_chars"] = len(self.page)
        if self.error:
            out["error"] = self.error
        return out


def check_arguments(tool: str, arguments: Any) -> dict[str, Any]:
    """Validate a call against TOOL_SCHEMAS; raise ToolInputError naming what is wrong."""
    if tool not in TOOL_SCHEMAS:
        raise ToolInputError(f"unknown tool {tool!r}; available: {', '.join(TOOL_SCHEMAS)}")
    if not isinstance(arguments, dict):
        raise ToolInputError("arguments must be a JSON object")
    schema = TOOL_SCHEMAS[tool]["input_schema"]
    missing = [p for p in schema["required"] if p not in arguments]
    if missing:
        raise ToolInputError(f"missing required argument(s) {', '.join(missing)} for tool {tool}")
    extra = sorted(set(arguments) - set(schema["properties"]), key=ascii)
    if extra:
        raise ToolInputError(f"unknown argument(s) {', '.join(map(ascii, extra))} for tool {tool}")
    if tool == "search":
        return {"query": check_query(arguments["query"]), "k": check_k(arguments.get("k", DEFAULT_K))}
    return {"url": check_url(arguments["url"])}


class MalformedResult(ValueError):
    """A backend answered something other than what the tool promises: the backend's fault, never
    the agent's (a server_error result, never an exception out of `env.step`)."""


def _text(value: str) -> str:
    # Pages from the web may hold lone surrogates; they could not be sent on, nor tokenized.
    return value.encode("utf-8", "replace").decode("utf-8")


def check_hits(value: Any, k: int = MAX_K) -> list[Hit]:
    """A search backend's answer as at most `k` hits; MalformedResult unless it is a list of hits
    or of {title, url, snippet} records with string fields and a URL."""
    if not isinstance(value, list):
        raise MalformedResult(f"search results must be a list, got {type(value).__name__}")
    hits = []
    for row in value[:k]:
        fields = (row.title, row.url, row.snippet) if isinstance(row, Hit) else (
            tuple(row.get(name) for name in ("title", "url", "snippet")) if isinstance(row, dict) else None)
        if fields is None or not all(isinstance(f, str) for f in fields) or not fields[1].strip():
            raise MalformedResult("each search result needs string title, url and snippet fields and a non-empty url")
        hits.append(Hit(*map(_text, fields)))
    return hits


def check_page(value: Any) -> str:
    """A fetch backend's answer as page text; MalformedResult unless it is a string."""
    if not isinstance(value, str):
        raise MalformedResult(f"a fetched page must be text, got {type(value).__name__}")
    return cut_page(_text(value))


def run_tool(backend: SearchBackend, tool: str, arguments: dict[str, Any]) -> list[Hit] | str:
    """Execute one call on a backend (ToolInputError for the agent's mistakes, MalformedResult for
    the backend's)."""
    args = check_arguments(tool, arguments)
    if tool == "search":
        return check_hits(backend.search(args["query"], args["k"]), args["k"])
    return check_page(backend.fetch(args["url"]))
