"""An exact Sudoku solver: bitmask backtracking, most-constrained cell first.

Each row, column and box keeps a bitmask of the digits it holds; the search fills the empty cell
with the fewest candidates (failing at once on a cell with none) and tries its candidates in order,
or in an order drawn from a `numpy.random.Generator` (to build random complete grids). It counts
solutions up to a limit, which is how the generator proves uniqueness (`count_solutions(g, 2) == 1`).
A 9x9 puzzle takes milliseconds; on larger boards a proof can take hours, so `has_other_solution` takes
a budget of search nodes, and proves a 12x12 puzzle's uniqueness without one by exact cover (Algorithm X),
which searches far fewer nodes there.
"""

from __future__ import annotations

import functools

import numpy as np

from .rules import Grid, Shape, empty_grid, to_grid


@functools.lru_cache(maxsize=32)
def _units(shape: Shape) -> tuple[tuple[int, int, int], ...]:
    """(row, column, box) of every flat cell index."""
    n = shape.size
    return tuple((i // n, i % n, shape.box_of(i // n, i % n)) for i in range(n * n))


@functools.lru_cache(maxsize=4096)
def _digits(mask: int) -> tuple[int, ...]:
    """The digits whose bits are set in a candidate mask, in increasing order."""
    return tuple(v for v in range(1, mask.bit_length()) if mask >> v & 1)


class _OutOfBudget(Exception):
    pass


class _Search:
    def __init__(self, grid: Grid | list[list[int]], shape: Shape):
        n = shape.size
        self.full = (1 << (n + 1)) - 2  # bits 1..n
        self.cells = [0] * (n * n)
        self.row = [0] * n
        self.col = [0] * n
        self.box = [0] * n
        self.units = _units(shape)
        self.consistent = True
        for i, (r, c, b) in enumerate(self.units):
            v = grid[r][c]
            if v == 0:
                continue
            bit = 1 << v
            if (self.row[r] | self.col[c] | self.box[b]) & bit:
                self.consistent = False  # a duplicate among the givens: no solution
            self.cells[i] = v
            self.row[r] |= bit
            self.col[c] |= bit
            self.box[b] |= bit
        self.empty = [i for i in range(n * n) if self.cells[i] == 0]
        self.forbidden_cell, self.forbidden_bits = -1, 0
        """One cell may exclude some digits (`has_other_solution`)."""
        self.budget: int | None = None
        """Search nodes left before `_OutOfBudget`; None: no limit."""

    def run(self, limit: int, rng: np.random.Generator | None, found: list[list[int]]) -> None:
        if self.budget is not None:
            self.budget -= 1
            if self.budget < 0:
                raise _OutOfBudget
        empty = self.empty
        if not empty:
            found.append(list(self.cells))
            return
        # The most constrained empty cell: the first in `empty` with the fewest candidates (inline: a
        # method call per node costs as much as the scan of a small board).
        row, col, box, units, full, forbidden = self.row, self.col, self.box, self.units, self.full, self.forbidden_cell
        pos, mask, fewest = -1, 0, 99
        for p, i in enumerate(empty):
            r, c, b = units[i]
            m = full & ~(row[r] | col[c] | box[b])
            if i == forbidden:
                m &= ~self.forbidden_bits
            count = m.bit_count()
            if count < fewest:
                pos, mask, fewest = p, m, count
                if count <= 1:
                    break
        if mask == 0:
            return
        i = empty[pos]
        r, c, b = units[i]
        digits = _digits(mask)
        if rng is not None and fewest > 1:
            digits = [digits[j] for j in rng.permutation(fewest).tolist()]
        last = empty.pop()
        if pos < len(empty):
            empty[pos] = last  # O(1) removal: order of `empty` does not matter
        cells = self.cells
        for v in digits:
            bit = 1 << v
            cells[i] = v
            row[r] |= bit
            col[c] |= bit
            box[b] |= bit
            self.run(limit, rng, found)
            row[r] ^= bit
            col[c] ^= bit
            box[b] ^= bit
            if len(found) >= limit:
                break
        cells[i] = 0
        if pos < len(empty):
            empty.append(empty[pos])
            empty[pos] = i
        else:
            empty.append(i)


def _search(grid: Grid | list[list[int]], shape: Shape, limit: int, rng: np.random.Generator | None = None) -> list[Grid]:
    search = _Search(grid, shape)
    if not search.consistent:
        return []
    found: list[list[int]] = []
    search.run(limit, rng, found)
    n = shape.size
    return [tuple(tuple(cells[r * n:(r + 1) * n]) for r in range(n)) for cells in found]


def count_solutions(grid: Grid | list[list[int]], shape: Shape | None = None, limit: int = 2) -> int:
    """Number of completions of `grid`, counting no further than `limit`."""
    shape = shape or Shape.for_size(len(grid))
    return len(_search(grid, shape, limit))


SMALL_BOARD_SOLUTIONS = 1_000
"""Boards with at most this many complete grids (4x4: 288) have a `solution_table`."""


@functools.lru_cache(maxsize=8)
def solution_table(shape: Shape) -> tuple[int, tuple[tuple[int, ...], ...]] | None:
    """For a small board: (all, table) with `table[cell][v]` the bitset (a Python int) of the complete
    grids that hold digit v at flat cell index `cell`, and `all` the bitset of every complete grid;
    None when the board has more than SMALL_BOARD_SOLUTIONS complete grids, as every board above 4x4
    has (the next size, 6x6, has 28,200,960), so those are not searched."""
    n = shape.size
    if n > 4:
        return None
    grids = _search(empty_grid(n), shape, SMALL_BOARD_SOLUTIONS + 1)
    if len(grids) > SMALL_BOARD_SOLUTIONS:
        return None
    table = [[0] * (n + 1) for _ in range(n * n)]
    for k, grid in enumerate(grids):
        for i in range(n * n):
            table[i][grid[i // n][i % n]] |= 1 << k
    return (1 << len(grids)) - 1, tuple(tuple(row) for row in table)


EXACT_COVER_FROM = 12
"""The smallest board whose proofs without a budget are by exact cover (`_other_cover`), the same answers
as the cell search's: a 12x12 puzzle takes 0.35 s by median where the cell search took 3.4 s (0.4-9 s;
benchmarks/sudoku_generation.py). Smaller boards keep the cell search, which a trial by hand found the
faster on 9x9 and 10x10."""


def has_other_solution(grid: Grid | list[list[int]], shape: Shape, r: int, c: int, value: int,
                       budget: int | None = None) -> bool:
    """Whether `grid` (with (r, c) empty) has a solution where (r, c) is not `value`.

    For a puzzle known to have a solution with `value` at (r, c), this is "more than one solution",
    decided without re-finding the known one (which `count_solutions(limit=2)` searches for too).
    A search that visits more than `budget` nodes answers True: not proven unique.
    """
    if budget is None and shape.size >= EXACT_COVER_FROM:
        return _other_cover(grid, shape, r, c, value)
    search = _Search(grid, shape)
    if not search.consistent:
        return False
    search.forbidden_cell, search.forbidden_bits = r * shape.size + c, 1 << value
    search.budget = budget
    found: list[list[int]] = []
    try:
        search.run(1, None, found)
    except _OutOfBudget:
        return True
    return bool(found)


# ---------------------------------------------------------------------------- exact cover
# Sudoku as an exact cover problem: a choice "digit v at (r, c)" meets four constraints (the cell is filled;
# row r, column c and box b each hold v), and a solution is a set of choices meeting every constraint once.
# Knuth's Algorithm X branches on the constraint with the fewest choices left, so besides a cell with one
# candidate it also finds a digit with one place left in a row, column or box: far fewer nodes than the cell
# search on large boards, each dearer (sets instead of bitmasks).


@functools.lru_cache(maxsize=8)
def _cover(shape: Shape) -> tuple[tuple[tuple[int, int, int, int], ...], tuple[frozenset[int], ...]]:
    """(the four constraints of each choice, the choices meeting each constraint); choice (r * n + c) * n + v - 1."""
    n = shape.size
    meets = tuple((r * n + c, n * n + r * n + v, 2 * n * n + c * n + v, 3 * n * n + shape.box_of(r, c) * n + v)
                  for r in range(n) for c in range(n) for v in range(n))
    met_by: list[set[int]] = [set() for _ in range(4 * n * n)]
    for choice, constraints in enumerate(meets):
        for j in constraints:
            met_by[j].add(choice)
    return meets, tuple(frozenset(s) for s in met_by)


def _take(open_: dict[int, set[int]], meets: tuple[tuple[int, ...], ...], choice: int) -> list[set[int]]:
    """Make `choice`: its constraints are met (closed) and every choice clashing with it goes. Returns what
    `_untake` needs."""
    closed = []
    for j in meets[choice]:
        for clash in open_[j]:
            for k in meets[clash]:
                if k != j:
                    open_[k].discard(clash)
        closed.append(open_.pop(j))
    return closed


def _untake(open_: dict[int, set[int]], meets: tuple[tuple[int, ...], ...], choice: int, closed: list[set[int]]) -> None:
    for j in reversed(meets[choice]):
        open_[j] = closed.pop()
        for clash in open_[j]:
            for k in meets[clash]:
                if k != j:
                    open_[k].add(clash)


def _coverable(open_: dict[int, set[int]], meets: tuple[tuple[int, ...], ...]) -> bool:
    """Whether the open constraints can each be met once (Algorithm X, fewest choices first)."""
    if not open_:
        return True
    j = min(open_, key=lambda j: len(open_[j]))
    for choice in list(open_[j]):
        closed = _take(open_, meets, choice)
        if _coverable(open_, meets):
            return True  # the caller drops `open_`: no need to undo
        _untake(open_, meets, choice, closed)
    return False


def _other_cover(grid: Grid | list[list[int]], shape: Shape, r: int, c: int, value: int) -> bool:
    """`has_other_solution` by exact cover."""
    n = shape.size
    meets, met_by = _cover(shape)
    open_ = {j: set(choices) for j, choices in enumerate(met_by)}
    for row in range(n):
        for col in range(n):
            if v := grid[row][col]:
                choice = (row * n + col) * n + v - 1
                if any(j not in open_ or choice not in open_[j] for j in meets[choice]):
                    return False  # the givens clash: no solution at all
                _take(open_, meets, choice)
    forbidden = (r * n + c) * n + value - 1
    for j in meets[forbidden]:
        if j in open_:
            open_[j].discard(forbidden)
    return _coverable(open_, meets)


def solve(grid: Grid, shape: Shape | None = None) -> Grid | None:
    """One completion of `grid` (the first in digit order), or None when there is none."""
    shape = shape or Shape.for_size(len(grid))
    found = _search(to_grid(grid), shape, 1)
    return found[0] if found else None


def random_solution(shape: Shape, rng: np.random.Generator, grid: Grid | None = None) -> Grid:
    """A random complete grid (completing `grid` if given), every choice drawn from `rng`."""
    found = _search(to_grid(grid) if grid is not None else empty_grid(shape.size), shape, 1, rng)
    if not found:
        raise ValueError("the grid has no completion")
    return found[0]
