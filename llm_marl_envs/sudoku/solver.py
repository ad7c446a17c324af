"""An exact Sudoku solver: bitmask backtracking, most-constrained cell first.

Each row, column and box keeps a bitmask of the digits it holds; the search fills the empty cell
with the fewest candidates (failing at once on a cell with none) and tries its candidates in order,
or in an order drawn from a `numpy.random.Generator` (to build random complete grids). It counts
solutions up to a limit, which is how the generator proves uniqueness (`count_solutions(g, 2) == 1`).
A 9x9 puzzle takes milliseconds.
"""

from __future__ import annotations

import functools

import numpy as np

from .rules import Grid, Shape, empty_grid, to_grid


@functools.lru_cache(maxsize=32)
def _box_table(shape: Shape) -> tuple[int, ...]:
    n = shape.size
    return tuple(shape.box_of(i // n, i % n) for i in range(n * n))


class _Search:
    def __init__(self, grid: Grid | list[list[int]], shape: Shape):
        n = shape.size
        self.n = n
        self.full = (1 << (n + 1)) - 2  # bits 1..n
        self.cells = [0] * (n * n)
        self.row = [0] * n
        self.col = [0] * n
        self.box = [0] * n
        self.box_of = _box_table(shape)
        self.consistent = True
        for r in range(n):
            for c in range(n):
                v = grid[r][c]
                if v == 0:
                    continue
                bit = 1 << v
                i, b = r * n + c, self.box_of[r * n + c]
                if (self.row[r] | self.col[c] | self.box[b]) & bit:
                    self.consistent = False  # a duplicate among the givens: no solution
                self.cells[i] = v
                self.row[r] |= bit
                self.col[c] |= bit
                self.box[b] |= bit
        self.empty = [i for i in range(n * n) if self.cells[i] == 0]
        self.forbidden_cell, self.forbidden_bits = -1, 0
        """One cell may exclude some digits (`has_other_solution`)."""

    def _pick(self) -> tuple[int, int, int]:
        """(position in self.empty, cell, candidate mask) of the most constrained empty cell."""
        n, best_pos, best_cell, best_mask, best_count = self.n, -1, -1, 0, 99
        row, col, box, box_of, full = self.row, self.col, self.box, self.box_of, self.full
        for pos, i in enumerate(self.empty):
            mask = full & ~(row[i // n] | col[i % n] | box[box_of[i]])
            if i == self.forbidden_cell:
                mask &= ~self.forbidden_bits
            count = mask.bit_count()
            if count < best_count:
                best_pos, best_cell, best_mask, best_count = pos, i, mask, count
                if count <= 1:
                    break
        return best_pos, best_cell, best_mask

    def run(self, limit: int, rng: np.random.Generator | None, found: list[list[int]]) -> None:
        if not self.empty:
            found.append(list(self.cells))
            return
        pos, i, mask = self._pick()
        if mask == 0:
            return
        n = self.n
        r, c, b = i // n, i % n, self.box_of[i]
        digits = [v for v in range(1, n + 1) if mask >> v & 1]
        if rng is not None and len(digits) > 1:
            digits = [digits[j] for j in rng.permutation(len(digits))]
        last = self.empty.pop()
        if pos < len(self.empty):
            self.empty[pos] = last  # O(1) removal: order of `empty` does not matter
        for v in digits:
            bit = 1 << v
            self.cells[i] = v
            self.row[r] |= bit
            self.col[c] |= bit
            self.box[b] |= bit
            self.run(limit, rng, found)
            self.row[r] ^= bit
            self.col[c] ^= bit
            self.box[b] ^= bit
            if len(found) >= limit:
                break
        self.cells[i] = 0
        if pos < len(self.empty):
            self.empty.append(self.empty[pos])
            self.empty[pos] = i
        else:
            self.empty.append(i)


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
"""Boards with at most this many complete grids (4x4: 288) answer `has_other_solution` from a table."""


@functools.lru_cache(maxsize=8)
def _solution_table(shape: Shape) -> tuple[int, tuple[tuple[int, ...], ...]] | None:
    """For a small board: (all, table) with `table[cell][v]` the bitset (a Python int) of the complete
    grids that hold digit v at flat cell index `cell`, and `all` the bitset of every complete grid;
    None when the board has more than SMALL_BOARD_SOLUTIONS complete grids."""
    n = shape.size
    grids = _search(empty_grid(n), shape, SMALL_BOARD_SOLUTIONS + 1)
    if len(grids) > SMALL_BOARD_SOLUTIONS:
        return None
    table = [[0] * (n + 1) for _ in range(n * n)]
    for k, grid in enumerate(grids):
        for i in range(n * n):
            table[i][grid[i // n][i % n]] |= 1 << k
    return (1 << len(grids)) - 1, tuple(tuple(row) for row in table)


def has_other_solution(grid: Grid | list[list[int]], shape: Shape, r: int, c: int, value: int) -> bool:
    """Whether `grid` (with (r, c) empty) has a solution where (r, c) is not `value`.

    For a puzzle known to have a solution with `value` at (r, c), this is "more than one solution",
    decided without re-finding the known one (about twice as fast as `count_solutions(limit=2)`).
    Small boards (4x4) intersect precomputed bitsets of all their complete grids instead of searching.
    """
    n = shape.size
    small = _solution_table(shape) if n <= 4 else None
    cells = [v for row in grid for v in row]
    if small is not None and len(cells) == n * n and all(type(v) is int and 0 <= v <= n for v in cells) \
            and type(value) is int and 0 < value <= n:
        alive, table = small
        for i, v in enumerate(cells):
            if v:
                alive &= table[i][v]
        if cells[r * n + c]:  # (r, c) given: the search's exclusion would not apply either
            return bool(alive)
        return bool(alive & ~table[r * n + c][value])
    search = _Search(grid, shape)
    if not search.consistent:
        return False
    search.forbidden_cell, search.forbidden_bits = r * shape.size + c, 1 << value
    found: list[list[int]] = []
    search.run(1, None, found)
    return bool(found)


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
