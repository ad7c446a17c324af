"""Parsing the coder's program and the tester's test case (AT-GRPO A.2.2 formats), tolerantly.

Coder: the first ```python block (or the first unlabelled block), read by `core.text.extract_code`
as every environment's code block is: CRLF line endings (`\\r\\n`, the fence's too) are read as
newlines, and a block indented as a whole (inside a markdown list item: the fences and every line
indented alike) loses that common indentation (`textwrap.dedent`), which would otherwise be an
IndentationError.

Tester: `**Test Input:**` followed by the input and `**Test Output:**` followed by the expected
output. Accepted variations: any case, bold or not, the colon inside or outside the bold markers
(`**Test Input**:`), "Test Case Input", the text on the marker's line or below it, and the text
fenced in ``` blocks or not. When a reply holds several input/output pairs (drafts), the last pair
is the answer. Model output is only matched with regular expressions (never evaluated), in time linear
in the length of the reply.
"""

from __future__ import annotations

import re

from ..core.text import extract_code
from .problems import TestCase

MAX_TEST_CHARS = 5_000
"""Longest test input or output accepted; a longer one is a format error (a runaway generation)."""

_NAME = r"(?:unit[ \t]+)?test(?:[ \t]+case)?[ \t]+(?P<kind{n}>input|output)[ \t]*(?:\d+[ \t]*)?"
# Bold markers may sit anywhere ("**Test Input:**1 2 **Test Output:**3"); plain ones start a line
# and end with a colon, so prose such as "the test output is 3" is not a marker.
_MARKER = re.compile(
    r"(?:\*\*|__)[ \t]*" + _NAME.format(n=1) + r":?[ \t]*(?:\*\*|__)[ \t]*:?"
    + r"|^[ \t>#-]*" + _NAME.format(n=2) + r":",
    re.I | re.M,
)
_FENCE = re.compile(r"```[^\n`]*\n(.*?)(?:```|\Z)", re.S)


def parse_code(reply: str) -> tuple[str | None, str | None]:
    """(program, None) or (None, error): `core.text.extract_code`."""
    return extract_code(reply)


def _section_text(body: str) -> str:
    """The content of one section: the first fenced block if there is one, else the bare text."""
    body = body.lstrip(" \t")
    fenced = _FENCE.search(body)
    if fenced is not None and not body[: fenced.start()].strip("` \t\n"):
        text = fenced.group(1)
    else:
        text = body
        inline = re.fullmatch(r"\s*`([^`\n]*)`\s*", text)
        if inline:
            text = inline.group(1)
    return _trim_lines(text)


def _trim_lines(text: str) -> str:
    """`text` without its leading and trailing blank lines, each line right-stripped."""
    lines = text.split("\n")
    filled = [i for i, line in enumerate(lines) if line.strip()]
    if not filled:
        return ""
    return "\n".join(line.rstrip() for line in lines[filled[0]:filled[-1] + 1])


def parse_test(reply: str) -> tuple[TestCase | None, str | None]:
    """(TestCase, None) or (None, error). The input gets a trailing newline, like a typed stdin."""
    marks = list(_MARKER.finditer(reply))
    if not marks:
        return None, "no test case found: expected **Test Input:** ... **Test Output:** ..."
    sections: list[tuple[str, str]] = []
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(reply)
        sections.append(((mark.group("kind1") or mark.group("kind2")).lower(), reply[mark.end():end]))
    # The last input section that is followed by an output section.
    for j in range(len(sections) - 2, -1, -1):
        if sections[j][0] == "input" and sections[j + 1][0] == "output":
            test_input, test_output = _section_text(sections[j][1]), _section_text(_cut_output(sections[j + 1][1]))
            break
    else:
        return None, "a test case needs a **Test Input:** section followed by a **Test Output:** section"
    if not test_input.strip():
        return None, "the test input is empty"
    if not test_output.strip():
        return None, "the test output is empty"
    if len(test_input) > MAX_TEST_CHARS or len(test_output) > MAX_TEST_CHARS:
        return None, f"the test input or output is longer than {MAX_TEST_CHARS} characters"
    return TestCase(test_input + "\n", test_output + "\n"), None


def _cut_output(body: str) -> str:
    """The expected output ends at a blank line followed by prose (an explanation after the test),
    unless it is fenced."""
    if _FENCE.match(body.lstrip("\n \t")):
        return body
    lines = body.strip("\n").split("\n")
    # The next non-blank line after each line, stripped (one backward pass: rebuilding the rest of
    # the text at every blank line was quadratic in the reply).
    following: list[str] = [""] * len(lines)
    for i in range(len(lines) - 2, -1, -1):
        following[i] = lines[i + 1].strip() or following[i + 1]
    kept: list[str] = []
    for i, line in enumerate(lines):
        if not line.strip() and kept:
            rest = following[i]
            if rest and re.match(r"[A-Za-z(]", rest) and " " in rest:
                break
        kept.append(line)
    return "\n".join(kept)


def format_test(test: TestCase) -> str:
    """A test case in the tester's format (used by prompts and the oracle)."""
    return f"**Test Input:**\n```\n{test.input.rstrip(chr(10))}\n```\n**Test Output:**\n```\n{test.output.rstrip(chr(10))}\n```"
