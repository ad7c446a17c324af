"""Seeded Sudoku puzzles with exactly one solution, proven by the exact solver.

Recipe (as reasoning-gym's mini_sudoku, with our own solver): draw a random complete grid (the
solver with a random digit order), then visit the cells in a random order and remove each clue
only if the puzzle still has exactly one solution. Since the complete grid is a solution, that is
"no completion differs from it at the removed cell" (`solver.has_other_solution`, equivalent to
`count_solutions(limit=2) == 1` without re-finding the known solution; on a 4x4 board, bitsets of
all its complete grids, narrowed clue by clue; the tests re-check every puzzle with
`count_solutions` and with independent solvers). Removal stops at `min_clues` clues or after `max_removals` removals;
with neither, the puzzle is minimal (no clue can be removed) up to 12x12 (above, see
`UNIQUENESS_BUDGET`). A puzzle left with more than
`max_clues` clues is redrawn. Every random choice comes from the caller's
`numpy.random.Generator` (the reference's 4x4 generator made puzzles with no solution; here
uniqueness is a postcondition of `generate`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .rules import Grid, Shape, clue_cells, to_grid
from .solver import has_other_solution, random_solution, solution_table

MAX_TRIES = 1_000
_CHARS = "123456789abcdefghijklmnopqrstuvwxyz"
# Smallest number of clues of a uniquely solvable puzzle, where it is known (4x4: 4; 9x9: 17).
KNOWN_MIN_CLUES = {4: 4, 9: 17}


@dataclass(frozen=True)
class SudokuConfig:
    size: int = 4
    """N: the grid is N x N with digits 1..N (4 in AT-GRPO; 6, 8, 9, ... also work)."""
    box_rows: int | None = None
    """Rows of a box; None picks the most square factorisation of N (4 -> 2x2, 6 -> 2x3, 9 -> 3x3)."""
    box_cols: int | None = None
    """Columns of a box; None derives it from `box_rows` and N."""
    min_clues: int = 0
    """Stop removing clues once this many are left (a floor: more clues make easier puzzles)."""
    max_removals: int | None = None
    """Remove at most this many clues (None: no limit). N² - max_removals is a floor on the clues."""
    max_clues: int | None = None
    """Redraw puzzles that keep more clues than this (None: no ceiling). Harder puzzles, slower draws."""

    def __post_init__(self) -> None:
        shape = self.shape  # validates size and boxes
        cells = shape.size**2
        if not 0 <= self.min_clues <= cells:
            raise ValueError(f"min_clues must be in 0..{cells} for a {shape.size}x{shape.size} grid, got {self.min_clues}")
        if self.max_removals is not None and not 0 <= self.max_removals <= cells:
            raise ValueError(f"max_removals must be in 0..{cells} (or None), got {self.max_removals}")
        if self.max_clues is not None:
            floor = max(self.min_clues, cells - self.max_removals if self.max_removals is not None else 0)
            if self.max_clues < floor:
                raise ValueError(f"max_clues {self.max_clues} is below the clue floor {floor} set by min_clues/max_removals; raise it")
            known = KNOWN_MIN_CLUES.get(shape.size)
            if known is not None and self.max_clues < known:
                raise ValueError(f"a {shape.size}x{shape.size} Sudoku with a unique solution needs at least {known} clues; "
                                 f"raise max_clues to {known} or more")

    @property
    def shape(self) -> Shape:
        return Shape.for_size(self.size, self.box_rows, self.box_cols)


@dataclass(frozen=True)
class SudokuInstance:
    shape: Shape
    puzzle: Grid
    """The clues (0 = blank)."""
    solution: Grid
    """The unique solution."""

    @property
    def size(self) -> int:
        return self.shape.size

    @property
    def num_clues(self) -> int:
        return len(clue_cells(self.puzzle))

    def key(self) -> str:
        """Canonical text used for hashing into splits: size, box shape and the clue grid."""
        rows = ("".join(_CHARS[v - 1] if v else "." for v in row) for row in self.puzzle)
        return f"sudoku:{self.shape.size}:{self.shape.box_rows}x{self.shape.box_cols}:" + "/".join(rows)


UNIQUENESS_BUDGET = 2_000
"""Search nodes a proof that a clue can go may take on boards above 12x12; a clue whose proof takes more
stays, so the puzzle stays unique and generation ends (a minimal 16x16 puzzle's proofs can take hours).
Boards up to 12x12 are proven without a budget, so their puzzles are minimal as before (12x12 by exact
cover, ~0.3 s a puzzle on 2 cores: see `solver.EXACT_COVER_FROM`); a 16x16 puzzle takes ~1 s and keeps
~100 of its 256 clues (exact cover too needs minutes for a minimal one)."""


def remove_clues(solution: Grid, shape: Shape, rng: np.random.Generator, *, min_clues: int = 0,
                 max_removals: int | None = None) -> Grid:
    """Remove clues from a complete grid in a random order, keeping the solution unique."""
    n = shape.size
    order = rng.permutation(n * n).tolist()
    limit = n * n - min_clues if max_removals is None else min(n * n - min_clues, max_removals)
    table = solution_table(shape)
    if table is not None:
        flat = [v for row in solution for v in row]
        if len(flat) == n * n and all(type(v) is int and 0 < v <= n for v in flat):
            return _remove_clues_by_table(flat, n, order, limit, table)
    puzzle = [list(row) for row in solution]
    removals, budget = 0, None if n <= 12 else UNIQUENESS_BUDGET
    for i in order:
        if removals >= limit:
            break
        r, c = divmod(i, n)
        value, puzzle[r][c] = puzzle[r][c], 0
        # `solution` completes the puzzle, so it stays unique iff no completion differs at (r, c).
        if not has_other_solution(puzzle, shape, r, c, value, budget):
            removals += 1
        else:
            puzzle[r][c] = value
    return to_grid(puzzle)


def _remove_clues_by_table(flat: list[int], n: int, order: list[int], limit: int,
                           table: tuple[int, tuple[tuple[int, ...], ...]]) -> Grid:
    """`remove_clues`'s loop on a small board, with `has_other_solution`'s bitset test kept up to date
    instead of redone from every clue at each cell: at the k-th visited cell, the complete grids that
    fit the puzzle are those that fit the clues kept so far (`kept`) and the cells not visited yet
    (`unvisited[k + 1]`, one backward pass), and the clue goes when none of them differs at the cell."""
    every, grids_with = table
    digit = [grids_with[i][flat[i]] for i in order]  # the complete grids holding the solution's digit there
    unvisited = [every] * (len(order) + 1)
    for k in range(len(order) - 1, -1, -1):
        unvisited[k] = unvisited[k + 1] & digit[k]
    kept, removals, puzzle = every, 0, flat  # remove_clues' own list: clues are blanked in it
    for k, i in enumerate(order):
        if removals >= limit:
            break
        if kept & unvisited[k + 1] & ~digit[k]:  # another solution differs at i: the clue stays
            kept &= digit[k]
        else:
            puzzle[i] = 0
            removals += 1
    return tuple(tuple(puzzle[r * n:(r + 1) * n]) for r in range(n))


def generate(rng: np.random.Generator, config: SudokuConfig = SudokuConfig()) -> SudokuInstance:
    """One puzzle with exactly one solution, drawn from `rng` (the only source of randomness)."""
    shape = config.shape
    for _ in range(MAX_TRIES):
        solution = random_solution(shape, rng)
        puzzle = remove_clues(solution, shape, rng, min_clues=config.min_clues, max_removals=config.max_removals)
        instance = SudokuInstance(shape, puzzle, solution)
        if config.max_clues is not None and instance.num_clues > config.max_clues:
            continue
        return instance
    raise ValueError(f"no Sudoku puzzle satisfies {config} in {MAX_TRIES} draws; raise max_clues")
