"""Seeded Sokoban levels by reverse play, each verified by the exact solver.

Recipe: a room with border walls and a few inner walls (its floor connected); goals on random floor
cells with the boxes on them (the solved position); the player on a random free cell; then random
reverse moves: the player steps, and when a box is right behind it, pulls it along (a reverse
push). Every pull can be undone by a push, so the level is solvable by construction; the solver then
proves it and records the optimal number of moves. Levels that are already solved, shorter than
`min_solution_moves` or longer than `max_solution_moves` are rejected and redrawn from the same
generator.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from .rules import MOVES, Board, Cell, State
from .solver import solve

MAX_TRIES = 2_000


@dataclass(frozen=True)
class SokobanConfig:
    height: int = 6
    """Rows, border walls included."""
    width: int = 6
    """Columns, border walls included."""
    num_boxes: int = 1
    """B: boxes (and goals)."""
    inner_walls: int = 2
    """Inner wall cells placed at random inside the border (the room stays connected)."""
    reverse_steps: int = 100
    """Reverse moves (pulls and walks) played from the solved position."""
    pull_probability: float = 1.0
    """Chance that a reverse step pulls the box behind the player (when there is one)."""
    min_solution_moves: int = 4
    """Reject levels whose optimal solution is shorter (in moves)."""
    max_solution_moves: int | None = 15
    """Reject levels whose optimal solution is longer (None: no limit)."""
    solver_max_nodes: int = 200_000
    """Node budget of the verifying solver; levels it cannot finish within it are rejected."""

    def __post_init__(self) -> None:
        if self.height < 3 or self.width < 3:
            raise ValueError(f"room must be at least 3x3 (border walls included), got {self.height}x{self.width}; enlarge it")
        interior = (self.height - 2) * (self.width - 2)
        if self.num_boxes < 1:
            raise ValueError(f"num_boxes must be >= 1, got {self.num_boxes}")
        if self.inner_walls < 0:
            raise ValueError(f"inner_walls must be >= 0, got {self.inner_walls}")
        if interior - self.inner_walls < self.num_boxes + 2:
            raise ValueError(
                f"a {self.height}x{self.width} room with {self.inner_walls} inner walls has {interior - self.inner_walls} "
                f"floor cells, too few for {self.num_boxes} boxes and the player; lower inner_walls or num_boxes"
            )
        if self.reverse_steps < 1:
            raise ValueError(f"reverse_steps must be >= 1, got {self.reverse_steps}")
        if not 0.0 < self.pull_probability <= 1.0:
            raise ValueError(f"pull_probability must be in (0, 1], got {self.pull_probability}")
        if self.min_solution_moves < 1:
            raise ValueError(f"min_solution_moves must be >= 1, got {self.min_solution_moves}")
        if self.max_solution_moves is not None and self.max_solution_moves < self.min_solution_moves:
            raise ValueError("max_solution_moves must be >= min_solution_moves (or None)")


@dataclass(frozen=True)
class SokobanInstance:
    state: State
    """The initial position."""
    solution: tuple[str, ...]
    """An optimal solution found by the solver."""

    @property
    def optimal_length(self) -> int:
        return len(self.solution)

    def key(self) -> str:
        """Canonical text (XSB) used for hashing into splits."""
        return self.state.to_xsb()


def _connected(floor: set[Cell]) -> bool:
    start = next(iter(floor))
    seen, queue = {start}, deque([start])
    while queue:
        r, c = queue.popleft()
        for dr, dc in MOVES.values():
            nxt = (r + dr, c + dc)
            if nxt in floor and nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return len(seen) == len(floor)


def _room(rng: np.random.Generator, config: SokobanConfig) -> tuple[frozenset[Cell], list[Cell]] | None:
    H, W = config.height, config.width
    border = {(r, c) for r in range(H) for c in range(W) if r in (0, H - 1) or c in (0, W - 1)}
    interior = [(r, c) for r in range(1, H - 1) for c in range(1, W - 1)]
    picked = rng.choice(len(interior), size=config.inner_walls, replace=False) if config.inner_walls else []
    inner = {interior[int(i)] for i in picked}
    floor = [cell for cell in interior if cell not in inner]
    if not _connected(set(floor)):
        return None
    return frozenset(border | inner), floor


def _reverse_play(rng: np.random.Generator, board: Board, boxes: set[Cell], player: Cell, config: SokobanConfig) -> tuple[set[Cell], Cell]:
    """Random reverse moves from the solved position: walk, or pull the box behind the player."""
    deltas = list(MOVES.values())
    floor = board.floor
    # One draw of all directions and pull coins (per-step generator calls dominate the cost).
    directions = rng.integers(4, size=config.reverse_steps).tolist()
    pulls = (rng.random(config.reverse_steps) < config.pull_probability).tolist()
    for d, pull in zip(directions, pulls):
        dr, dc = deltas[d]
        target = (player[0] + dr, player[1] + dc)
        if target not in floor or target in boxes:
            continue
        behind = (player[0] - dr, player[1] - dc)
        if pull and behind in boxes:
            boxes.remove(behind)
            boxes.add(player)
        player = target
    return boxes, player


def generate(rng: np.random.Generator, config: SokobanConfig = SokobanConfig()) -> SokobanInstance:
    """One verified level drawn from `rng` (the only source of randomness)."""
    for _ in range(MAX_TRIES):
        room = _room(rng, config)
        if room is None:
            continue
        walls, floor = room
        cells = rng.choice(len(floor), size=config.num_boxes + 1, replace=False)
        goals = frozenset(floor[int(i)] for i in cells[:-1])
        board = Board(config.height, config.width, walls, goals)
        boxes, player = _reverse_play(rng, board, set(goals), floor[int(cells[-1])], config)
        state = State(board, frozenset(boxes), player)
        if state.solved:
            continue
        solution = solve(state, max_nodes=config.solver_max_nodes)
        if solution is None or len(solution) < config.min_solution_moves:
            continue
        if config.max_solution_moves is not None and len(solution) > config.max_solution_moves:
            continue
        return SokobanInstance(state, tuple(solution))
    raise ValueError(
        f"no Sokoban level satisfies {config} in {MAX_TRIES} tries; loosen min/max_solution_moves, enlarge the room "
        "(height, width), lower inner_walls, or raise reverse_steps (a SokobanConfig field)"
    )
