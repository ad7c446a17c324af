"""Parsers for deep-search replies: `<use_mcp_tool>` calls, `\\boxed{}` answers, summary headings.

Model output is untrusted: regular expressions and `json.loads` only; a failure is a value
(`ToolCall.error`, None), never an exception. Every parser is linear in the length of the reply
(a worker reply of 16,000 newlines or a planner reply of 4,000 `\\boxed{` once took a minute).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..core.text import first_tagged, tag_spans
from .prompts import SUMMARY_HEADINGS

_TOOL_TAG = "use_mcp_tool"
_OPEN = re.compile(r"<use_mcp_tool>", re.I)
_FIELDS = ("server_name", "tool_name", "arguments")
# A heading line: `## Conclusion`, `### **Observations**:`... The indent is `[^\S\n]*`, not `\s*`: a
# `\s*` after `^` crosses newlines, so every line of a blank run rescanned the rest of the run
# (quadratic). Matching from the last line start finds the same headings. The possessive `*+`
# keep `\s*\**\s*` from backtracking over long runs; the heading starts with a letter, so the
# maximal run is the only one that can match.
_HEADING = {h: re.compile(rf"^[^\S\n]*#{{1,6}}\s*+\**+\s*+{re.escape(h)}", re.I | re.M) for h in SUMMARY_HEADINGS}
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
    blocks = tag_spans(text, _TOOL_TAG)
    first = next(blocks, None)
    if first is None:
        return ToolCall("", "", None, "unterminated <use_mcp_tool> block (missing </use_mcp_tool>)")
    body = text[first[0]:first[1]]
    fields = {name: first_tagged(body, name) for name in _FIELDS}
    fields = {name: None if value is None else value.strip() for name, value in fields.items()}
    server, tool = fields["server_name"] or "", fields["tool_name"] or ""
    missing = [n for n, v in fields.items() if v is None]
    extra = sum(1 for _ in blocks)
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
    if not _is_text(arguments):
        return ToolCall(server, tool, None, "<arguments> escapes a lone surrogate (such as \\ud800), which is not text", extra)
    return ToolCall(server, tool, arguments, None, extra)


def _is_text(value: Any) -> bool:
    """Whether decoded JSON holds only encodable text: `json.loads` turns `\\ud800` into a lone
    surrogate, which no tokenizer, JSON-RPC session or log file can encode."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except (UnicodeEncodeError, ValueError, RecursionError):
        return False
    return True


_BOXED = "\\boxed{"


def _closing_braces(text: str) -> dict[int, int]:
    """The index of each `{` whose brace closes -> the index of its `}` (one pass)."""
    closing: dict[int, int] = {}
    open_at: list[int] = []
    for j, ch in enumerate(text):
        if ch == "{":
            open_at.append(j)
        elif ch == "}" and open_at:
            closing[open_at.pop()] = j
    return closing


def extract_boxed(text: str) -> str | None:
    """Content of the last `\\boxed{...}` whose braces close (nested braces allowed); None when there
    is none. One pass pairs every brace, instead of scanning to the end from each `\\boxed{`."""
    if _BOXED not in text:
        return None
    closing = _closing_braces(text)
    start = text.rfind(_BOXED)
    while start >= 0:
        brace = start + len(_BOXED) - 1
        if brace in closing:
            return text[brace + 1:closing[brace]].strip()
        start = text.rfind(_BOXED, 0, start)
    return None


# LaTeX commands that only set text in a font: a model trained on math boxes a name as
# `\\boxed{\\text{Paris}}`. Their argument is the answer.
_TEXT_COMMAND = re.compile(r"\\(?:text(?:bf|it|rm|sf|tt|normal|up|sl|sc)?|math(?:rm|bf|it|sf|tt|normal)|emph|mbox)\s*\{")


def unwrap_text_commands(answer: str) -> str:
    """`answer` without its LaTeX text wrappers: `\\text{Paris}` -> `Paris`, `\\textbf{\\text{New}} York`
    -> `New York` (`\\text`, `\\textbf`, `\\textit`, `\\mathrm`, `\\mathbf`, `\\emph`, ... at any depth).
    A wrapper whose brace does not close is left as it is. One pass pairs every brace (linear)."""
    if "\\" not in answer:
        return answer
    closing = _closing_braces(answer)
    drop: list[tuple[int, int]] = []  # [start, end) spans to delete: a command with its `{`, and its `}`
    for m in _TEXT_COMMAND.finditer(answer):
        brace = m.end() - 1
        if brace in closing:
            drop += [(m.start(), m.end()), (closing[brace], closing[brace] + 1)]
    if not drop:
        return answer
    drop.sort()
    out, at = [], 0
    for start, end in drop:
        out.append(answer[at:start])
        at = end
    out.append(answer[at:])
    return " ".join("".join(out).split())


def missing_headings(text: str) -> list[str]:
    """Summary headings (`## Conclusion`, ...) absent from `text`."""
    return [h for h, pattern in _HEADING.items() if not pattern.search(text)]
