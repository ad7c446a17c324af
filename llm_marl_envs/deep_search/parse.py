"""Parsers for deep-search replies: `<use_mcp_tool>` calls, `\\boxed{}` answers, summary headings.

Model output is untrusted: regular expressions and `json.loads` only; a failure is a value
(`ToolCall.error`, None), never an exception.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from .prompts import SUMMARY_HEADINGS

_OPEN = re.compile(r"<use_mcp_tool>", re.I)
_BLOCK = re.compile(r"<use_mcp_tool>(.*?)</use_mcp_tool>", re.S | re.I)
_FIELD = {name: re.compile(rf"<{name}>(.*?)</{name}>", re.S | re.I) for name in ("server_name", "tool_name", "arguments")}
_HEADING = {h: re.compile(rf"^\s*#{{1,6}}\s*\**\s*{re.escape(h)}\s*\**\s*:?", re.I | re.M) for h in SUMMARY_HEADINGS}
MAX_ARGUMENT_CHARS = 4_000


@dataclass(frozen=True)
class ToolCall:
    """One `<use_mcp_tool>` block; `error` says why it is malformed (None when well-formed)."""

    server: str
    tool: str
    arguments: dict[str, Any] | None
    error: str | None = None
    extra_blocks: int = 0
    """Further `<use_mcp_tool>` blocks in the same reply (ignored: one tool per message)."""

    @property
    def well_formed(self) -> bool:
        return self.error is None

    def to_json(self) -> dict[str, Any]:
        return {"server": self.server, "tool": self.tool, "arguments": self.arguments, "error": self.error}


def find_tool_call(text: str) -> ToolCall | None:
    """The first tool call in `text`; None when the reply makes no tool-call attempt at all."""
    if not _OPEN.search(text):
        return None
    blocks = _BLOCK.findall(text)
    if not blocks:
        return ToolCall("", "", None, "unterminated <use_mcp_tool> block (missing </use_mcp_tool>)")
    body = blocks[0]
    fields = {}
    for name, pattern in _FIELD.items():
        m = pattern.search(body)
        fields[name] = m.group(1).strip() if m else None
    server, tool = fields["server_name"] or "", fields["tool_name"] or ""
    missing = [n for n, v in fields.items() if v is None]
    extra = len(blocks) - 1
    if missing:
        return ToolCall(server, tool, None, f"missing <{'>, <'.join(missing)}> in <use_mcp_tool>", extra)
    raw = fields["arguments"]
    if len(raw) > MAX_ARGUMENT_CHARS:
        return ToolCall(server, tool, None, f"arguments longer than {MAX_ARGUMENT_CHARS} characters", extra)
    try:
        arguments = json.loads(raw)
    except (json.JSONDecodeError, RecursionError) as e:
        msg = e.msg if isinstance(e, json.JSONDecodeError) else "nested too deeply"
        return ToolCall(server, tool, None, f"<arguments> is not valid JSON ({msg})", extra)
    if not isinstance(arguments, dict):
        return ToolCall(server, tool, None, "<arguments> must be a JSON object", extra)
    return ToolCall(server, tool, arguments, None, extra)


def extract_boxed(text: str) -> str | None:
    """Content of the last `\\boxed{...}` (nested braces allowed); None when there is none."""
    start = text.rfind("\\boxed{")
    while start >= 0:
        depth, i = 0, start + len("\\boxed")
        for j in range(i, len(text)):
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
                if depth == 0:
                    return text[i + 1:j].strip()
        start = text.rfind("\\boxed{", 0, start)
    return None


def missing_headings(text: str) -> list[str]:
    """Summary headings (`## Conclusion`, ...) absent from `text`."""
    return [h for h, pattern in _HEADING.items() if not pattern.search(text)]
