"""Plan-Path rules: a grid of walls, 4-neighbour moves, BFS distances. No text, no PettingZoo."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import NamedTuple

from ..core.records import fast_init

Cell = tuple[int, int]
MOVES: dict[str, Cell] = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}


@fast_init
@dataclass(frozen=True)
class Grid:
    height: int
    width: int
    walls: frozenset[Cell]

    def in_bounds(self, cell: Cell) -> bool:
        return 0 <= cell[0] < self.height and 0 <= cell[1] < self.width

    def passable(self, cell: Cell) -> bool:
        return self.in_bounds(cell) and cell not in self.walls

    def neighbours(self, cell: Cell) -> list[tuple[str, Cell]]:
        out = []
        for move, (dr, dc) in MOVES.items():
            nxt = (cell[0] + dr, cell[1] + dc)
            if self.passable(nxt):
                out.append((move, nxt))
        return out

    @cached_property
    def moves_from(self) -> dict[Cell, dict[str, Cell | None]]:
        """For every in-bounds cell, where each move leads (None: into a wall or off the grid). Built on
        first use (by `simulate`) and kept with the grid, which every fork of an episode shares."""
        return {(r, c): {move: (nxt if self.passable(nxt := (r + dr, c + dc)) else None) for move, (dr, dc) in MOVES.items()}
                for r in range(self.height) for c in range(self.width)}


def manhattan(a: Cell, b: Cell) -> int:
    return abs(a[0] - b[0]) + abs(a[1] - b[1])


@lru_cache(maxsize=64)
def neighbour_table(height: int, width: int) -> tuple[tuple[int, ...], ...]:
    """For each flat cell index r * width + c, the in-bounds neighbours' indices in U, D, L, R order."""
    table = []
    for r in range(height):
        for c in range(width):
            i = r * width + c
            table.append(tuple(j for j, ok in ((i - width, r > 0), (i + width, r < height - 1),
                                               (i - 1, c > 0), (i + 1, c < width - 1)) if ok))
    return tuple(table)


def flat_bfs(blocked: list[bool], height: int, width: int, source: int, target: int = -1) -> list[int]:
    """BFS over flat cell indices (`blocked[i]`: a wall): distances from `source`, -1 where unreachable.

    With `target`, the search stops as soon as the target's distance is known (other cells may still
    read -1). Cells are expanded in the same order as `bfs_distances`, so distances are identical.
    """
    table = neighbour_table(height, width)
    dist = [-1] * (height * width)
    dist[source] = 0
    queue = [source]
    for cell in queue:  # the list grows while it is read: a FIFO without popleft
        d = dist[cell] + 1
        for nxt in table[cell]:
            if dist[nxt] < 0 and not blocked[nxt]:
                dist[nxt] = d
                if nxt == target:
                    return dist
                queue.append(nxt)
    return dist


@lru_cache(maxsize=64)
def _column_masks(height: int, width: int) -> tuple[int, int]:
    """Bit masks of every cell not in the first column and not in the last (flat index = bit)."""
    first = sum(1 << (r * width) for r in range(height))
    full = (1 << (height * width)) - 1
    return full & ~first, full & ~(first << (width - 1))


def shortest_length(free: int, height: int, width: int, source: int, target: int) -> int:
    """Moves on a shortest source-target path, -1 if none: BFS one whole layer at a time on a bitset.

    `free` has bit i set where flat cell i is passable. A layer is a few shifts of a 100-bit integer
    instead of a Python step per cell, and it gives the same distance as `flat_bfs`.
    """
    not_first, not_last = _column_masks(height, width)
    goal, frontier = 1 << target, 1 << source
    unseen, moves = free & ~frontier, 0  # free cells not reached yet
    while frontier:
        if frontier & goal:
            return moves
        frontier = ((frontier >> width) | (frontier << width) | ((frontier & not_first) >> 1)
                    | ((frontier & not_last) << 1)) & unseen
        unseen ^= frontier  # the new layer is in `unseen`: clear its bits
        moves += 1
    return -1


def bfs_distances(grid: Grid, source: Cell) -> dict[Cell, int]:
    """Shortest-path length (in moves) from `source` to every reachable cell."""
    h, w = grid.height, grid.width
    blocked = [False] * (h * w)
    for r, c in grid.walls:
        if 0 <= r < h and 0 <= c < w:
            blocked[r * w + c] = True
    if not grid.in_bounds(source):  # off the grid: the plain search (never on the hot path)
        dist_of = {source: 0}
        queue = [source]
        for cell in queue:
            for _, nxt in grid.neighbours(cell):
                if nxt not in dist_of:
                    dist_of[nxt] = dist_of[cell] + 1
                    queue.append(nxt)
        return dist_of
    dist = flat_bfs(blocked, h, w, source[0] * w + source[1])
    out = {source: 0}
    for i, d in enumerate(dist):
        if d > 0:
            out[(i // w, i % w)] = d
    return out


def shortest_path(grid: Grid, start: Cell, goal: Cell) -> list[str] | None:
    """One shortest move list from start to goal (None if unreachable). Ties break in U, D, L, R order."""
    to_goal = bfs_distances(grid, goal)
    if start not in to_goal:
        return None
    path, cell = [], start
    while cell != goal:
        move, cell = next((m, n) for m, n in grid.neighbours(cell) if to_goal.get(n) == to_goal[cell] - 1)
        path.append(move)
    return path


class Simulation(NamedTuple):
    """The result of executing a move list from a cell. Execution stops at the first illegal move."""

    positions: tuple[Cell, ...]
    """Cells visited, starting cell first."""
    illegal_at: int | None
    """Index of the first illegal move (wall or out of bounds), or None when all moves were legal."""

    @property
    def final(self) -> Cell:
        return self.positions[-1]

    @property
    def applied(self) -> int:
        return len(self.positions) - 1


def simulate(grid: Grid, start: Cell, moves: list[str]) -> Simulation:
    table = grid.moves_from
    if start not in table:  # off the grid (never in an episode): step through the moves one by one
        return _simulate_off_grid(grid, start, moves)
    positions = [start]
    cell: Cell | None = start
    for i, move in enumerate(moves):
        cell = table[cell][move]  # type: ignore[index]
        if cell is None:
            return Simulation(tuple(positions), i)
        positions.append(cell)
    return Simulation(tuple(positions), None)


def _simulate_off_grid(grid: Grid, start: Cell, moves: list[str]) -> Simulation:
    positions = [start]
    r, c = start
    for i, move in enumerate(moves):
        dr, dc = MOVES[move]
        r, c = r + dr, c + dc
        if not grid.passable((r, c)):
            return Simulation(tuple(positions), i)
        positions.append((r, c))
    return Simulation(tuple(positions), None)


def on_shortest_paths(to_goal: dict[Cell, int], positions: tuple[Cell, ...]) -> bool:
    """SPNext for every applied move: each step lowers the BFS distance to the goal by one."""
    if len(positions) < 2:
        return False
    before = to_goal.get(positions[0])
    for cell in positions[1:]:
        after = to_goal.get(cell)
        if before is None or after is None or after != before - 1:
            return False
        before = after
    return True
