"""The MCP server exposing `search` and `fetch` (package `mcp` 2.x, `MCPServer`, stdio transport).

Run as a subprocess by `SearchRuntime(transport="subprocess")`:

    python -m llm_marl_envs.search.server --spec '{"backend": "bm25", "corpus": {"kind": "mini-wiki", "seed": 0}}'

or in-process for tests (`build_server(backend)` handed to `mcp.Client`). Tools:

- `search(query: str, k: int = 5)` -> list of {title, url, snippet}
- `fetch(url: str)` -> page text
- `ping()` -> {pid, backend, documents, built}: health check; the runtime reads the server's pid from
  it; `built` is true when this server built its BM25 index instead of loading the cached one.

An agent's mistake (empty query, unknown URL) is a `ToolError`: the client gets `is_error=True`
with the message, and the server keeps running.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from .backends import SearchBackend, ToolInputError
from .tools import DEFAULT_K, SERVER_FAULT, SERVER_NAME, TOOL_SCHEMAS, run_tool


def build_server(backend: SearchBackend):
    """An `MCPServer` whose tools call `backend`."""
    from mcp.server.mcpserver import MCPServer  # noqa: PLC0415
    from mcp.server.mcpserver.exceptions import ToolError  # noqa: PLC0415

    server = MCPServer(SERVER_NAME, log_level="WARNING")

    def call(tool: str, arguments: dict[str, Any]):
        try:
            return run_tool(backend, tool, arguments)
        except ToolInputError as e:
            raise ToolError(str(e)) from None
        except Exception as e:  # the backend's fault (no network...): marked so the agent is not blamed
            raise ToolError(f"{SERVER_FAULT} {type(e).__name__}: {e}") from None

    @server.tool(description=TOOL_SCHEMAS["search"]["description"])
    def search(query: str, k: int = DEFAULT_K) -> list[dict[str, str]]:
        return [h.to_json() for h in call("search", {"query": query, "k": k})]

    @server.tool(description=TOOL_SCHEMAS["fetch"]["description"])
    def fetch(url: str) -> str:
        return call("fetch", {"url": url})

    @server.tool(description="Health check: the server's process id and backend.")
    def ping() -> dict[str, Any]:
        corpus = getattr(backend, "corpus", None)
        return {"pid": os.getpid(), "backend": backend.name, "documents": len(corpus.documents) if corpus else None,
                "built": bool(getattr(backend, "built", False))}

    return server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="llm-marl search MCP server (stdio)")
    parser.add_argument("--spec", required=True, help="backend spec as JSON (see llm_marl_envs.search)")
    args = parser.parse_args(argv)
    from . import make_backend  # noqa: PLC0415

    try:
        backend = make_backend(json.loads(args.spec))
    except Exception as e:  # the parent sees the failed start; the reason goes to the server log
        print(f"llm-marl search server: cannot start: {e}", file=sys.stderr)
        raise SystemExit(2) from e
    build_server(backend).run("stdio")


if __name__ == "__main__":
    main()
