"""Sudoku rules: N x N grids with box_rows x box_cols boxes. No text, no PettingZoo.

A grid is a tuple of N rows of N ints; 0 is an empty cell. Indices in this module are 0-based;
fill steps (r, c, v) are 1-based, as in the AT-GRPO prompts (appendix A.2.2).

An answer (a full grid or a list of fill steps) is applied to the current grid atomically:
- an index or value outside 1..N makes the answer malformed (nothing is applied);
- an answer that would change a given clue is rejected as a whole (the grid is unchanged);
  writing a clue's own value onto it is harmless;
- otherwise every edit is applied, even one that duplicates a digit: legality is judged on the
  resulting grid (A.1.3: "no row/column/subgrid duplicates in G_k"), and a later answer may
  overwrite any cell that is not a clue. In a grid answer, 0 (or null) means "leave empty".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from itertools import chain, compress
from operator import ne

from ..core.records import fast_init

Grid = tuple[tuple[int, ...], ...]
Cell = tuple[int, int]
Step = tuple[int, int, int]
"""A fill step (r, c, v), 1-based row and column, value in 1..N."""

MAX_SIZE = 16
"""Largest N supported (the solver recurses once per empty cell; generation beyond 16x16 is slow)."""


@dataclass(frozen=True)
class Shape:
    """The board geometry: N = box_rows * box_cols, boxes of box_rows x box_cols cells."""

    box_rows: int
    box_cols: int

    def __post_init__(self) -> None:
        if self.box_rows < 2 or self.box_cols < 2:
            raise ValueError(f"boxes must be at least 2x2 cells, got {self.box_rows}x{self.box_cols}; use size 4, 6, 8, 9, ...")
        if self.box_rows * self.box_cols > MAX_SIZE:
            raise ValueError(f"size {self.box_rows * self.box_cols} is larger than the supported {MAX_SIZE}")

    @property
    def size(self) -> int:
        return self.box_rows * self.box_cols

    @classmethod
    def for_size(cls, size: int, box_rows: int | None = None, box_cols: int | None = None) -> Shape:
        """The shape of an N x N board. Boxes default to the most square factorisation
        (4 -> 2x2, 6 -> 2x3, 8 -> 2x4, 9 -> 3x3, 12 -> 3x4)."""
        size = int(size)
        if box_rows is None and box_cols is None:
            rows = max((a for a in range(2, int(size**0.5) + 1) if size % a == 0), default=None)
            if rows is None or size // rows < 2:
                raise ValueError(f"size {size} has no box shape a x b with a, b >= 2; use 4, 6, 8, 9, 10, 12, ...")
            return cls(rows, size // rows)
        if box_rows is None:
            box_rows = size // int(box_cols) if box_cols and size % int(box_cols) == 0 else 0
        if box_cols is None:
            box_cols = size // int(box_rows) if box_rows and size % int(box_rows) == 0 else 0
        if int(box_rows) * int(box_cols) != size:
            raise ValueError(f"box {box_rows}x{box_cols} does not tile a {size}x{size} grid; box_rows * box_cols must equal size")
        return cls(int(box_rows), int(box_cols))

    def box_of(self, r: int, c: int) -> int:
        return (r // self.box_rows) * self.box_rows + c // self.box_cols

    def units(self) -> list[list[Cell]]:
        """Every row, column and box as a list of cells."""
        n = self.size
        rows = [[(r, c) for c in range(n)] for r in range(n)]
        cols = [[(r, c) for r in range(n)] for c in range(n)]
        boxes = [
            [(br + i, bc + j) for i in range(self.box_rows) for j in range(self.box_cols)]
            for br in range(0, n, self.box_rows)
            for bc in range(0, n, self.box_cols)
        ]
        return rows + cols + boxes

    def peers(self, r: int, c: int) -> set[Cell]:
        """Cells sharing a row, column or box with (r, c), itself excluded."""
        n = self.size
        out = {(r, j) for j in range(n)} | {(i, c) for i in range(n)}
        br, bc = r - r % self.box_rows, c - c % self.box_cols
        out |= {(br + i, bc + j) for i in range(self.box_rows) for j in range(self.box_cols)}
        out.discard((r, c))
        return out


def empty_grid(n: int) -> Grid:
    return tuple((0,) * n for _ in range(n))


def to_grid(rows: object) -> Grid:
    """A tuple-of-tuples copy of a list of lists (or numpy array) of ints."""
    if type(rows) is tuple and all(type(row) is tuple and {*map(type, row)} == {int} for row in rows):
        return rows  # type: ignore[return-value]  # already a grid of plain ints (immutable: no copy needed)
    return tuple(tuple(int(v) for v in row) for row in rows)  # type: ignore[union-attr]


def is_well_formed(grid: object, shape: Shape, *, allow_empty: bool = True) -> bool:
    """N rows of N ints in 0..N (1..N when `allow_empty` is False)."""
    n = shape.size
    low = 0 if allow_empty else 1
    if not isinstance(grid, (tuple, list)) or len(grid) != n:
        return False
    for row in grid:
        if not isinstance(row, (tuple, list)) or len(row) != n:
            return False
        for v in row:
            if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= n:
                return False
    return True


@lru_cache(maxsize=32)
def unit_table(shape: Shape) -> tuple[tuple[Cell, ...], ...]:
    """`shape.units()`, built once per shape (read-only)."""
    return tuple(tuple(unit) for unit in shape.units())


@lru_cache(maxsize=32)
def _digit_masks(shape: Shape) -> tuple[dict[int, int], ...]:
    """Per cell (row-major): digit -> the bits of the (unit, digit) pairs it makes with the cell's
    row, column and box (0, a blank: no bits). Two cells of one unit holding one digit share a bit."""
    n = shape.size
    units_of: list[list[int]] = [[] for _ in range(n * n)]
    for u, unit in enumerate(unit_table(shape)):
        for r, c in unit:
            units_of[r * n + c].append(u)
    return tuple({0: 0, **{v: sum(1 << (u * n + v - 1) for u in units) for v in range(1, n + 1)}} for units in units_of)


_ROW_MEMO = 4_096
"""Rows remembered per row index and shape by `conflict_cells` (a 4x4 board has 625 possible rows)."""
_UNSEEN = object()


@lru_cache(maxsize=32)
def _row_memo(shape: Shape) -> tuple[dict[tuple[int, ...], int | None], ...]:
    """Per row index: row -> `_row_bits` of it, filled in as rows are met (bounded by `_ROW_MEMO`)."""
    return tuple({} for _ in range(shape.size))


def _row_bits(shape: Shape, r: int, row: tuple[int, ...]) -> int | None:
    """The (unit, digit) bits of row `r`'s cells together; None when the row holds a digit twice or a
    value that is not a digit."""
    n, bits = shape.size, 0
    for masks, v in zip(_digit_masks(shape)[r * n:(r + 1) * n], row):
        cell = masks.get(v)
        if cell is None or bits & cell:
            return None
        bits |= cell
    return bits


def conflict_cells(grid: Grid, shape: Shape) -> frozenset[Cell]:
    """`conflicts(grid, shape)` of a grid known to be N tuples of N ints (`to_grid`'s, an `Application`'s
    `after`), without the checks of its form."""
    seen = 0  # a first pass over the rows' unit bits: most grids have no duplicate at all
    for r, (memo, row) in enumerate(zip(_row_memo(shape), grid)):
        bits = memo.get(row, _UNSEEN)
        if bits is _UNSEEN:
            bits = _row_bits(shape, r, row)
            if len(memo) < _ROW_MEMO:
                memo[row] = bits
        if bits is None or seen & bits:  # a duplicate in the row, or a digit a column or box already holds
            return frozenset(_find_conflicts(grid, shape))
        seen |= bits
    return frozenset()


def conflicts(grid: Grid, shape: Shape) -> set[Cell]:
    """Filled cells whose digit appears again in their row, column or box."""
    n = shape.size
    if type(grid) is tuple and len(grid) == n and {*map(type, grid)} == {tuple} and {*map(len, grid)} == {n}:
        return set(conflict_cells(grid, shape))
    return _find_conflicts(grid, shape)


def _find_conflicts(grid: Grid, shape: Shape) -> set[Cell]:
    bad: set[Cell] = set()
    for unit in unit_table(shape):
        seen: dict[int, Cell] = {}
        for r, c in unit:
            v = grid[r][c]
            if v == 0:
                continue
            if v in seen:
                bad.add((r, c))
                bad.add(seen[v])
            else:
                seen[v] = (r, c)
    return bad


def is_valid(grid: Grid, shape: Shape) -> bool:
    """No row, column or box holds a digit twice (empty cells are ignored)."""
    return not conflicts(grid, shape)


def is_complete(grid: Grid) -> bool:
    return all(0 not in row for row in grid)


def blank_count(grid: Grid) -> int:
    """Empty cells (0) of the grid."""
    return sum([row.count(0) for row in grid])


def clue_cells(clues: Grid) -> list[Cell]:
    return [(r, c) for r, row in enumerate(clues) for c, v in enumerate(row) if v != 0]


@lru_cache(maxsize=1024)
def _clue_values(clues: Grid) -> tuple[tuple[int, int, int], ...]:
    """(r, c, digit) of every clue, 0-based: a puzzle's clues are read at every answer."""
    return tuple((r, c, v) for r, row in enumerate(clues) for c, v in enumerate(row) if v != 0)


@lru_cache(maxsize=1024)
def _board_bytes(grid: Grid, clues: Grid) -> tuple[int, int, int, int]:
    """The values of `grid` and of `clues` as integers, a byte per cell (row-major, big-endian), the mask
    of the clues' cells (0xFF at each clue's byte) and the blank count of `grid`: `apply_grid` compares
    a whole answer with them at once. Every answer of one state (the tool's proposal and the planner's
    answer of each branch forked from it) is applied to the same grid and clues."""
    before, values = bytes(chain.from_iterable(grid)), bytes(chain.from_iterable(clues))
    clue_mask = bytes([0xFF if v else 0 for v in values])
    return int.from_bytes(before, "big"), int.from_bytes(values, "big"), int.from_bytes(clue_mask, "big"), before.count(0)


def changed_clues(grid: Grid, clues: Grid) -> list[Cell]:
    """Clue cells whose digit `grid` does not keep."""
    if grid == clues:
        return []
    values = _clue_values(clues) if type(clues) is tuple else _clue_values.__wrapped__(clues)  # lists are not hashable
    return [(r, c) for r, c, v in values if grid[r][c] != v]


def keeps_clues(grid: Grid, clues: Grid) -> bool:
    return not changed_clues(grid, clues)


def is_solved(grid: Grid, clues: Grid, shape: Shape) -> bool:
    """Solved(·) of A.1.3, with the clue check the reference forgot: complete, no
    duplicate in any row/column/box, and every given clue kept."""
    return is_complete(grid) and is_valid(grid, shape) and keeps_clues(grid, clues)


def progress(before: Grid, after: Grid) -> float:
    """s_prog of A.1.3: newly filled cells / N² (cells empty in G_{k-1} and filled in G_k)."""
    n = len(before)
    filled = sum(1 for r in range(n) if 0 in before[r] for c in range(n) if before[r][c] == 0 and after[r][c] != 0)
    return filled / (n * n)


@fast_init
@dataclass(frozen=True)
class Application:
    """What applying an answer to the current grid did (see the module docstring)."""

    before: Grid
    after: Grid
    """The grid after the answer: `before` when the answer was malformed or changed a clue."""
    blanks: int
    """Blank cells of `after` (0: complete)."""
    out_of_range: tuple[str, ...] = ()
    """Malformed parts (index or value outside 1..N; wrong grid shape); nothing applied if any."""
    clue_changes: tuple[Cell, ...] = ()
    """0-based clue cells the answer tried to change; nothing applied if any."""
    edited: tuple[Cell, ...] = field(default=())
    """0-based cells whose content the answer changed (in order of first change)."""
    progress: float = 0.0
    """s_prog of A.1.3, `progress(before, after)`: counted from `edited`, where every newly filled cell is."""

    @property
    def well_formed(self) -> bool:
        return not self.out_of_range

    @property
    def applied(self) -> bool:
        """The answer was applied (well formed and keeps every clue)."""
        return not self.out_of_range and not self.clue_changes

    def edited_conflicts(self, shape: Shape) -> list[Cell]:
        """Edited cells that now share their digit with a peer (illegal placements)."""
        bad = conflicts(self.after, shape)
        return [cell for cell in self.edited if cell in bad]


def steps_out_of_range(steps: list[Step] | tuple[Step, ...], shape: Shape) -> tuple[str, ...]:
    """Why fill steps are malformed (an index or value outside 1..N); empty when they are not."""
    n = shape.size
    errors = []
    for i, step in enumerate(steps):
        r, c, v = step
        if not (1 <= r <= n and 1 <= c <= n):
            errors.append(f"step {i + 1} {list(step)}: cell ({r}, {c}) is outside the {n}x{n} grid (indices are 1-based)")
        elif not 1 <= v <= n:
            errors.append(f"step {i + 1} {list(step)}: value {v} is outside 1..{n}")
    return tuple(errors)


@lru_cache(maxsize=32)
def _values(n: int) -> frozenset[int]:
    return frozenset(range(n + 1))


def grid_out_of_range(new: Grid, shape: Shape) -> tuple[str, ...]:
    """Why a grid answer is malformed (not N x N, or a value outside 0..N); empty when it is not."""
    n = shape.size
    if len(new) != n or {*map(len, new)} != {n}:
        return (f"the grid must have {n} rows of {n} values",)
    if {*chain.from_iterable(new)} <= _values(n):  # every value in 0..N
        return ()
    return tuple(
        f"row {r + 1}, column {c + 1}: value {v} is outside 0..{n}"
        for r, row in enumerate(new) for c, v in enumerate(row) if not 0 <= v <= n
    )


def apply_steps(grid: Grid, clues: Grid, steps: list[Step] | tuple[Step, ...], shape: Shape) -> Application:
    """Apply 1-based fill steps (r, c, v) in order; a later step may overwrite an earlier one."""
    errors = steps_out_of_range(steps, shape)
    if errors:
        return Application(grid, grid, blank_count(grid), out_of_range=errors)
    changed = [(r - 1, c - 1) for r, c, v in steps if clues[r - 1][c - 1] not in (0, v)]
    if changed:
        return Application(grid, grid, blank_count(grid), clue_changes=tuple(dict.fromkeys(changed)))
    rows = [list(row) for row in grid]
    edited: dict[Cell, None] = {}
    for r, c, v in steps:
        if rows[r - 1][c - 1] != v:
            rows[r - 1][c - 1] = v
            edited[(r - 1, c - 1)] = None
    after = to_grid(rows)
    return _applied(grid, after, tuple(cell for cell in edited if after[cell[0]][cell[1]] != grid[cell[0]][cell[1]]))


@lru_cache(maxsize=32)
def _cells(n: int) -> tuple[Cell, ...]:
    """Every cell of an N x N board, row-major."""
    return tuple((r, c) for r in range(n) for c in range(n))


def apply_grid(grid: Grid, clues: Grid, new: Grid, shape: Shape, *, checked: bool = False,
               digits: bytes | None = None) -> Application:
    """Replace the grid by a full N x N answer (0 = empty); it must keep every clue. `checked`: `new`
    is already a tuple of N tuples of plain ints in 0..N (a parsed answer that `grid_out_of_range`
    passed, or that the parser marked `in_range`), so neither the range nor the types are checked again.
    `digits`: `new`'s values row-major, one byte each (the parser's `SudokuAnswer.digits`, which implies
    `checked`), with `grid` and `clues` grids as `to_grid` makes them: the answer is then compared with
    the clues and with the grid as whole integers, a byte per cell, instead of cell by cell."""
    n = shape.size
    if digits is not None:
        before, clue_values, clue_mask, blanks = _board_bytes(grid, clues)
        answer = int.from_bytes(digits, "big")
        if not (answer ^ clue_values) & clue_mask:  # every clue kept (else the path below lists the changed ones)
            cells = n * n
            changed = (answer ^ before).to_bytes(cells, "big")  # nonzero where a cell changes
            # Newly filled: the blanks of `grid` less those still blank in the answer (a zero byte of the OR).
            filled = blanks - (answer | before).to_bytes(cells, "big").count(0)
            return Application(grid, new, digits.count(0), edited=tuple(compress(_cells(n), changed)),
                               progress=filled / cells)
        checked = True
    if not checked:
        errors = grid_out_of_range(new, shape)
        if errors:
            return Application(grid, grid, blank_count(grid), out_of_range=errors)
        new = to_grid(new)
    changed = changed_clues(new, clues)
    if changed:
        return Application(grid, grid, blank_count(grid), clue_changes=tuple(changed))
    edited = tuple(compress(_cells(n), map(ne, chain.from_iterable(new), chain.from_iterable(grid))))
    return _applied(grid, new, edited)


def _applied(before: Grid, after: Grid, edited: tuple[Cell, ...]) -> Application:
    filled = len([1 for r, c in edited if before[r][c] == 0])  # edited cells differ, so a blank one is now filled
    return Application(before, after, blank_count(after), edited=edited, progress=filled / (len(before) ** 2))
