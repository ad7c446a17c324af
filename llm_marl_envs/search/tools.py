"""The search tools as agents see them: names, JSON schemas, results and their text rendering.

The MCP server (`search.server`) and the direct transport both call `run_tool`, so an agent gets
the same answer whichever way the call travelled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .backends import MAX_K, Hit, SearchBackend, ToolInputError, check_k, check_query

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
    extra = sorted(set(arguments) - set(schema["properties"]))
    if extra:
        raise ToolInputError(f"unknown argument(s) {', '.join(extra)} for tool {tool}")
    if tool == "search":
        return {"query": check_query(arguments["query"]), "k": check_k(arguments.get("k", DEFAULT_K))}
    url = arguments["url"]
    if not isinstance(url, str) or not url.strip():
        raise ToolInputError("url must be a non-empty string")
    return {"url": url.strip()}


def run_tool(backend: SearchBackend, tool: str, arguments: dict[str, Any]) -> list[Hit] | str:
    """Execute one call on a backend (ToolInputError for the agent's mistakes)."""
    args = check_arguments(tool, arguments)
    if tool == "search":
        return backend.search(args["query"], args["k"])
    return backend.fetch(args["url"])
