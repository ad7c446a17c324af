"""Parsers shared by the environments: code blocks, the final answer after `####`, move lists.

A code block is read the same way by every environment that runs one (the tool programs of
plan_path, sokoban, sudoku and math, the coder's of code): CRLF line endings are newlines, and a
block indented as a whole, as in a markdown list item, loses that common indentation.

Model output is untrusted text: everything here is regex / `json` / `ast.literal_eval` only, never
`eval`, and a failure is returned as an error string, never raised. Every parser is
linear in the length of its input (replies can be 64 KiB of adversarial text).
"""

from __future__ import annotations

import functools
import re
import textwrap
from collections.abc import Iterator

_CODE_BLOCK = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)```", re.S)
_FINAL_MARK = "####"
MAX_MOVES = 512
"""Longest move list we parse; longer lists are a format error (a runaway generation)."""

MOVE_WORDS = {"U": "U", "D": "D", "L": "L", "R": "R", "UP": "U", "DOWN": "D", "LEFT": "L", "RIGHT": "R"}
_FIRST_LIST = re.compile(r"\[([^\[\]]*)\]")
_LETTERS = frozenset("UDLR")


def extract_code(text: str) -> tuple[str | None, str | None]:
    """The program in the reply: the first ```python block (or the first unlabelled block).

    Two tolerances for what models write: CRLF line endings (`\\r\\n`, the fence's too) are read as
    newlines, and a block indented as a whole (inside a markdown list item: the fences and every line
    indented alike) loses that common indentation (`textwrap.dedent`), which would otherwise be an
    IndentationError. A flush block (its first non-blank line at column 0) keeps its text, CRLF aside.

    Returns (code, None) or (None, error).
    """
    blocks = _CODE_BLOCK.findall(text.replace("\r\n", "\n"))
    for lang, body in blocks:
        if lang.lower() in ("python", "py", "python3"):
            return _unindented(body), None
    for lang, body in blocks:
        if not lang:
            return _unindented(body), None
    return None, "no ```python code block found"


def _unindented(code: str) -> str:
    first = next((line for line in code.split("\n") if line.strip()), "")
    # Only a block whose first line is indented: a program that compiles starts at column 0, and
    # dedent would also empty its whitespace-only lines (in a string literal, say).
    return textwrap.dedent(code) if first[:1] in (" ", "\t") else code


def compile_error(code: str) -> Exception | None:
    """Why `code` does not compile, or None when it does (the check before spending a process).

    Adversarial programs make `compile` raise more than SyntaxError: ValueError (null bytes, lone
    surrogates), RecursionError and MemoryError (deep nesting such as `a.a.a...` or `-----1`),
    OverflowError. Whatever it raises, the program cannot run, so it is the program's failure.
    """
    try:
        compile(code, "main.py", "exec", dont_inherit=True)
    except Exception as exc:  # noqa: BLE001 (see the docstring: any failure is the program's)
        return exc
    return None


def extract_final_answer(text: str) -> tuple[str | None, str | None]:
    """The text after the last `####` marker (the papers' final-answer format)."""
    idx = text.rfind(_FINAL_MARK)
    if idx < 0:
        return None, "no final answer: expected a line beginning with ####"
    answer = text[idx + len(_FINAL_MARK):].strip()
    if not answer:
        return None, "empty final answer after ####"
    return answer, None


def parse_moves(text: str, alphabet: str = "UDLR") -> tuple[list[str] | None, str | None]:
    """Parse an action list such as `[U,R,D,L]`, `["U", "R"]`, `U R D L` or `[up, right]`.

    The first bracketed list in `text` is used when there is one; otherwise the whole text must
    be a list of moves. Returns (moves, None) or (None, error).
    """
    m = _FIRST_LIST.search(text)
    body = m.group(1) if m else text
    # The runs between separators (whitespace, commas, semicolons): `str.split` splits on exactly the
    # characters that `\s` matches.
    tokens = body.replace(",", " ").replace(";", " ").split()
    if not tokens:
        # An empty list takes no action: the format term needs moves (AT-GRPO A.1.4/A.1.5,
        # s_fmt = 1{a_k in {U,D,L,R}}), else doing nothing would earn it.
        return None, "no action list found" if m is None else "empty action list: give at least one move"
    if len(tokens) > MAX_MOVES:
        return None, f"action list longer than {MAX_MOVES} moves"
    if alphabet == "UDLR" and _LETTERS.issuperset(tokens):  # the common reply: single-letter moves
        return tokens, None
    moves = [MOVE_WORDS.get(token) for token in tokens]  # plain move words (UP, LEFT, ...), or another alphabet
    if set(moves).issubset(alphabet):  # (None, an unknown word, is in no alphabet)
        return moves, None  # type: ignore[return-value]
    moves = []
    for token in tokens:
        word = token.strip("'\"`.").upper()
        move = MOVE_WORDS.get(word)
        if move is None or move not in alphabet:
            shown = token if len(token) <= 20 else token[:20] + "..."
            return None, f"invalid move {shown!r}; allowed: {', '.join(alphabet)}"
        moves.append(move)
    return moves, None


def format_moves(moves: list[str]) -> str:
    return "[" + ", ".join(moves) + "]"


@functools.lru_cache(maxsize=64)
def _tag_patterns(tag: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    return re.compile(f"<{re.escape(tag)}>", re.I), re.compile(f"</{re.escape(tag)}>", re.I)


def tag_spans(text: str, tag: str) -> Iterator[tuple[int, int]]:
    """(start, end) of the content of each `<tag>...</tag>` (case-insensitive), in order: what
    `re.findall("<tag>(.*?)</tag>", text, re.S | re.I)` finds, in time linear in `text`.

    The regular expression retries its lazy scan from every opening tag, which is quadratic on a
    reply of many unclosed tags. Here the first opening tag with no closing tag after it ends the
    search: no later one can have one either.
    """
    opening, closing = _tag_patterns(tag)
    pos = 0
    while (start := opening.search(text, pos)) is not None:
        end = closing.search(text, start.end())
        if end is None:
            return
        yield start.end(), end.start()
        pos = end.end()


def first_tagged(text: str, tag: str) -> str | None:
    """The content of the first `<tag>...</tag>` in `text`, or None (linear; see `tag_spans`)."""
    span = next(tag_spans(text, tag), None)
    return None if span is None else text[span[0]:span[1]]
