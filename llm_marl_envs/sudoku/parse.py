"""Parse a Sudoku answer: a full grid (JSON array of arrays) or a list of fill steps [[r, c, v], ...].

Model output is untrusted: only `json`, `ast.literal_eval`, a bracket scanner and a comparison with a
byte template (for the plain grid of one-digit numbers) are used, never `eval`, and every failure is
returned as an error string, never raised. Tolerated around the answer: any surrounding text, markdown
fences, Python tuples `(r, c, v)`, single quotes, trailing commas, `null` for a blank in a grid, and a
grid written as strings of digits (`["12.4", ...]`, `.` or `0` for a blank). The first top-level `[...]`
that holds a grid or a step list is the answer. The final-answer marker `####` is handled by
`core.text.extract_final_answer`.

Structure is checked here; ranges (1..N, indices in bounds) and clues are checked by `rules`
(a grid the one-digit reader read is known to be in range: `SudokuAnswer.in_range`).
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import chain
from typing import Any, Literal

from ..core.records import fast_init
from .rules import Grid, Step

MAX_STEPS = 1_024
"""Longest step list accepted (a runaway generation beyond it is a format error)."""
MAX_SPAN_CHARS = 50_000
"""Longest bracketed span handed to json/ast (a 16x16 step list needs about 13k characters)."""
MAX_SPANS = 16
"""Top-level bracketed spans tried before giving up."""
_MAX_DEPTH = 3


@fast_init
@dataclass(frozen=True)
class SudokuAnswer:
    kind: Literal["grid", "steps"]
    grid: Grid | None = None
    steps: tuple[Step, ...] = ()
    digits: bytes | None = field(default=None, compare=False, repr=False)
    """The values of `grid`, row-major, one byte each, when the one-digit reader read it (then every
    value is in 0..N); None says nothing either way. `rules.apply_grid` compares them at once."""

    @property
    def in_range(self) -> bool:
        """Every value of `grid` is known to be in 0..N, so `rules.grid_out_of_range` would find nothing."""
        return self.digits is not None

    def to_text(self) -> str:
        """Canonical JSON: `[[1,2,3,4],...]` for a grid, `[[r,c,v],...]` for steps."""
        rows = self.grid if self.kind == "grid" else self.steps
        return "[" + ",".join("[" + ",".join(str(v) for v in row) + "]" for row in (rows or ())) + "]"


_JSON_SPACE = b" \t\n\r"
_DIGIT_VALUES = bytes(range(48)) + bytes(range(10)) + bytes(range(58, 256))
"""A `bytes.translate` table that maps the digits b"0".."9" to the byte values 0..9."""


@lru_cache(maxsize=16)
def _digit_grid(size: int) -> tuple[bytes, bytes]:
    """(table, template) of a JSON grid of `size` rows of `size` one-digit integers in 0..size written
    without whitespace (`size` <= 9): `table` maps the digits 0..size to b"0" and the other digits to
    b"x", so a whitespace-free text is such a grid exactly when `text.translate(table) == template`, the
    grid of zeros. JSON whitespace only ever separates tokens, and no two digits of such a grid are
    adjacent, so a text is such a grid with whitespace exactly when it is one once its whitespace is
    deleted."""
    table = bytearray(range(256))
    table[ord("0"):ord("9") + 1] = b"0" * (size + 1) + b"x" * (9 - size)
    row = b"[" + b",".join([b"0"] * size) + b"]"
    return bytes(table), b"[" + b",".join([row] * size) + b"]"


def _digit_grid_values(text: str, size: int) -> bytes | None:
    """The values of `text`, row-major, one byte each, when it is a JSON grid of one-digit integers in
    0..`size` (see `_digit_grid`), else None. It reads the digits without building JSON lists: the
    values of the grid of `_structure(json.loads(text), size)`."""
    if not text.isascii():
        return None
    compact = text.encode().translate(None, _JSON_SPACE)
    table, template = _digit_grid(size)
    if compact.translate(table) != template:
        return None
    return compact.translate(_DIGIT_VALUES, b"[],")  # iterating bytes gives ints: digit k is k


def _spans(text: str) -> list[tuple[str | None, str | None]]:
    """Top-level balanced `[...]` spans, in order: (span, None) or (None, why it was skipped)."""
    out: list[tuple[str | None, str | None]] = []
    depth, start, deepest = 0, -1, 0
    for i, ch in enumerate(text):
        if ch == "[":
            if depth == 0:
                start, deepest = i, 0
            depth += 1
            deepest = max(deepest, depth)
        elif ch == "]" and depth > 0:
            depth -= 1
            if depth == 0:
                if deepest > _MAX_DEPTH:
                    out.append((None, f"brackets nested {deepest} deep; a grid or step list has 2 levels"))
                elif i + 1 - start > MAX_SPAN_CHARS:
                    out.append((None, f"bracketed text longer than {MAX_SPAN_CHARS} characters"))
                else:
                    out.append((text[start:i + 1], None))
                if len(out) >= MAX_SPANS:
                    break
    return out


def _load(span: str) -> tuple[Any, str | None]:
    try:
        return json.loads(span), None
    except (ValueError, RecursionError):
        pass
    try:
        return ast.literal_eval(span), None
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None, "not a JSON or Python list literal"


def _int(v: Any) -> int | None:
    if isinstance(v, bool) or not isinstance(v, int):
        return None
    return v


def _grid_row(row: Any) -> tuple[int, ...] | None:
    if isinstance(row, str):
        # "12.4" / "1204": one character per cell (N <= 9).
        if not row or any(ch not in ".0123456789" for ch in row):
            return None
        return tuple(0 if ch == "." else int(ch) for ch in row)
    if not isinstance(row, (list, tuple)):
        return None
    if {*map(type, row)} == {int}:  # plain ints only (the common case): nothing to convert
        return tuple(row)
    values = []
    for v in row:
        iv = 0 if v is None else _int(v)
        if iv is None:
            return None
        values.append(iv)
    return tuple(values)


def _structure(value: Any, size: int | None) -> tuple[SudokuAnswer | None, str | None]:
    if not isinstance(value, (list, tuple)):
        return None, "expected a list"
    if not value:
        return None, "empty list: give a grid or at least one [r, c, v] step"
    if (size is not None and size != 3 and len(value) == size and {*map(type, value)} == {list} and {*map(len, value)} == {size}
            and {*map(type, chain.from_iterable(value))} == {int}):  # the common reply, a JSON grid: what the checks below conclude
        return SudokuAnswer("grid", grid=tuple(map(tuple, value))), None
    # A list of triples is steps (grids have N >= 4 columns; the paper's example
    # `[[1,3,4],[2,1,6],[9,9,1]]` is a step list).
    if all(isinstance(row, (list, tuple)) and len(row) == 3 for row in value) and size != 3:
        if len(value) > MAX_STEPS:
            return None, f"more than {MAX_STEPS} fill steps"
        steps = []
        for row in value:
            r, c, v = (_int(x) for x in row)
            if r is None or c is None or v is None:
                return None, f"fill step {list(row)!r:.60} must be three integers [r, c, v]"
            steps.append((r, c, v))
        return SudokuAnswer("steps", steps=tuple(steps)), None
    parsed = [_grid_row(row) for row in value]
    rows = [row for row in parsed if row is not None]
    if len(rows) != len(parsed):
        return None, "expected a grid (a list of rows of integers) or a list of [r, c, v] fill steps"
    n = size if size is not None else len(rows)
    if len(rows) != n or any(len(row) != n for row in rows):
        lengths = sorted({len(row) for row in rows})[:5]
        return None, f"expected a {n}x{n} grid or a list of [r, c, v] fill steps; got {len(rows)} rows of lengths {lengths}"
    return SudokuAnswer("grid", grid=tuple(rows)), None


def parse_answer(text: str, size: int | None = None) -> tuple[SudokuAnswer | None, str | None]:
    """Parse `text` into a grid or fill steps. Returns (answer, None) or (None, error).

    With `size`, a grid must be `size` x `size`; a list of triples is always steps. Values are not
    range-checked here (see `rules.apply_steps` / `apply_grid`).
    """
    if not isinstance(text, str):
        return None, "the answer is not text"
    if text.startswith("[[") and len(text) <= MAX_SPAN_CHARS:
        # The common answer is one JSON list and nothing else. When it is a grid or a step list, the
        # scan below finds it as the first span too (such a list holds no string with a bracket).
        values = _digit_grid_values(text, size) if size is not None and 3 < size < 10 else None
        if values is not None:
            # The most common of all, a grid of one-digit numbers in range. Its rows: zip takes one value
            # from each copy of the one iterator in turn (the grouping idiom zip's documentation gives).
            return SudokuAnswer("grid", grid=tuple(zip(*[iter(values)] * size)), digits=values), None
        try:
            answer, _ = _structure(json.loads(text), size)
        except (ValueError, RecursionError):
            answer = None
        if answer is not None:
            return answer, None
    first_error = None
    for span, skipped in _spans(text):
        if span is None:
            first_error = first_error or skipped
            continue
        value, error = _load(span)
        if error is None:
            answer, error = _structure(value, size)
            if answer is not None:
                return answer, None
        first_error = first_error or error
    if first_error is None:
        return None, "no [...] list found: give a JSON grid [[...], ...] or fill steps [[r, c, v], ...]"
    return None, first_error
