"""Sokoban rules: an immutable state, XSB text, moves and pushes, the box-to-goal potential and
static deadlocks. No text prompts, no PettingZoo.

Coordinates are (row, column), row 0 at the top. Moves: U (row - 1), D (row + 1), L (column - 1),
R (column + 1). XSB symbols: `#` wall, ` ` or `_` floor, `.` goal, `$` box, `*` box on goal,
`@` player, `+` player on goal.
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

Cell = tuple[int, int]
MOVES: dict[str, Cell] = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}
FLOOR_CHARS = " _-"
"""Characters read as plain floor (`-` is the floor of XSB files that avoid spaces)."""


class Outcome(enum.Enum):
    """What one move did."""

    MOVED = "moved"
    PUSHED = "pushed"
    ILLEGAL_WALL = "illegal_wall"
    """The player walks into a wall, or pushes a box into a wall."""
    ILLEGAL_BOX_COLLISION = "illegal_box_collision"
    """The player pushes a box into another box."""
    OUT_OF_BOUNDS = "out_of_bounds"
    """The player, or the box it pushes, would leave the grid."""

    @property
    def legal(self) -> bool:
        return self in (Outcome.MOVED, Outcome.PUSHED)


@dataclass(frozen=True)
class Board:
    """The fixed part of a level: size, walls and goals. Cells inside the grid that are not walls
    are floor."""

    height: int
    width: int
    walls: frozenset[Cell]
    goals: frozenset[Cell]

    def in_bounds(self, cell: Cell) -> bool:
        return 0 <= cell[0] < self.height and 0 <= cell[1] < self.width

    @cached_property
    def floor(self) -> frozenset[Cell]:
        """Every in-bounds cell that is not a wall."""
        return frozenset((r, c) for r in range(self.height) for c in range(self.width)) - self.walls

    def is_floor(self, cell: Cell) -> bool:
        return cell in self.floor

    @cached_property
    def dead_squares(self) -> frozenset[Cell]:
        """Floor cells from which a box can never reach any goal by pushes, whatever the other boxes do.

        Computed backwards: a box can be pushed from `c - d` to `c` when the player can stand at
        `c - 2d`. Cells reached from the goals by such reverse pushes are live; the rest are dead.
        """
        live = set(self.goals)
        queue = deque(self.goals)
        while queue:
            cell = queue.popleft()
            for dr, dc in MOVES.values():
                prev = (cell[0] - dr, cell[1] - dc)
                stand = (cell[0] - 2 * dr, cell[1] - 2 * dc)
                if prev not in live and self.is_floor(prev) and self.is_floor(stand):
                    live.add(prev)
                    queue.append(prev)
        return self.floor - live

    def is_corner(self, cell: Cell) -> bool:
        """A floor cell blocked (wall or edge) on one vertical and one horizontal side."""
        r, c = cell
        vertical = not self.is_floor((r - 1, c)) or not self.is_floor((r + 1, c))
        horizontal = not self.is_floor((r, c - 1)) or not self.is_floor((r, c + 1))
        return vertical and horizontal

    def is_dead(self, cell: Cell) -> bool:
        """A box on `cell` is statically deadlocked: a non-goal corner, or a dead square."""
        if cell in self.goals:
            return False
        return self.is_corner(cell) or cell in self.dead_squares

    def __deepcopy__(self, memo: dict) -> Board:
        return self  # immutable: forks share it (and its cached dead squares)

    @cached_property
    def _hash(self) -> int:
        return hash((self.height, self.width, self.walls, self.goals))  # what the dataclass would hash

    def __hash__(self) -> int:
        return self._hash  # every State hash includes its board's: compute it once


@lru_cache(maxsize=256)
def _board_cells(board: Board, floor: str) -> tuple[str, ...]:
    """The XSB characters of an empty board (walls, goals, floor), row by row, built once per board."""
    return tuple("#" if (r, c) in board.walls else "." if (r, c) in board.goals else floor
                 for r in range(board.height) for c in range(board.width))


@dataclass(frozen=True)
class State:
    """A Sokoban position: the board, the boxes and the player. Immutable and hashable."""

    board: Board
    boxes: frozenset[Cell]
    player: Cell
    _hash: int | None = field(init=False, repr=False, compare=False, default=None)

    def __hash__(self) -> int:
        # Computed on first use and kept: searches hash each state many times, simulations rarely.
        if self._hash is None:
            object.__setattr__(self, "_hash", hash((self.board, self.boxes, self.player)))
        return self._hash

    def __deepcopy__(self, memo: dict) -> State:
        return self  # immutable

    @property
    def height(self) -> int:
        return self.board.height

    @property
    def width(self) -> int:
        return self.board.width

    @property
    def walls(self) -> frozenset[Cell]:
        return self.board.walls

    @property
    def goals(self) -> frozenset[Cell]:
        return self.board.goals

    @property
    def num_boxes(self) -> int:
        """B."""
        return len(self.boxes)

    @property
    def boxes_on_goal(self) -> int:
        """b_k: the number of boxes on goals."""
        return len(self.boxes & self.board.goals)

    @property
    def solved(self) -> bool:
        return self.boxes <= self.board.goals

    def with_player(self, player: Cell) -> State:
        return State(self.board, self.boxes, player)

    # ------------------------------------------------------------------ XSB text
    @classmethod
    def from_xsb(cls, text: str) -> State:
        """Parse an XSB level. Rows may have different lengths (short rows are padded with floor).

        Raises ValueError when the level is malformed: not exactly one player, a character outside
        the XSB alphabet, or a box count that differs from the goal count.
        """
        rows = [row for row in text.split("\n") if row.strip()]
        if not rows:
            raise ValueError("empty Sokoban level")
        height, width = len(rows), max(len(row) for row in rows)
        walls, goals, boxes, players = set(), set(), set(), []
        for r, row in enumerate(rows):
            for c, ch in enumerate(row):
                cell = (r, c)
                if ch == "#":
                    walls.add(cell)
                elif ch in ".*+":
                    goals.add(cell)
                elif ch not in FLOOR_CHARS + "$@":
                    raise ValueError(f"unknown Sokoban symbol {ch!r} at {cell}; use # _ . $ * @ +")
                if ch in "$*":
                    boxes.add(cell)
                if ch in "@+":
                    players.append(cell)
        if len(players) != 1:
            raise ValueError(f"a Sokoban level needs exactly one player (@ or +), found {len(players)}")
        if len(boxes) != len(goals) or not boxes:
            raise ValueError(f"a Sokoban level needs as many boxes as goals (at least one), found {len(boxes)} boxes and {len(goals)} goals")
        return cls(Board(height, width, frozenset(walls), frozenset(goals)), frozenset(boxes), players[0])

    def to_xsb(self, floor: str = "_") -> str:
        """The level as XSB text, one row per line; `floor` is the floor character (`_` or ` `).

        A wall hides what else is on its cell; the player hides a box."""
        board = self.board
        h, w = board.height, board.width
        cells = list(_board_cells(board, floor))
        for r, c in (*self.boxes, self.player):  # the player last: drawn over a box
            if 0 <= r < h and 0 <= c < w and (r, c) not in board.walls:
                goal = (r, c) in board.goals
                cells[r * w + c] = ("+" if goal else "@") if (r, c) == self.player else ("*" if goal else "$")
        return "\n".join("".join(cells[r * w:(r + 1) * w]) for r in range(h))

    def __str__(self) -> str:
        return self.to_xsb()


def _shift(cell: Cell, delta: Cell) -> Cell:
    return (cell[0] + delta[0], cell[1] + delta[1])


def step(state: State, move: str) -> tuple[State, Outcome]:
    """Apply one move. An illegal move returns the unchanged state with its outcome.

    Raises ValueError for a move outside U/D/L/R (a programming error: parse text first).
    """
    if move not in MOVES:
        raise ValueError(f"unknown move {move!r}; use one of U, D, L, R")
    delta = MOVES[move]
    board = state.board
    target = _shift(state.player, delta)
    if not board.in_bounds(target):
        return state, Outcome.OUT_OF_BOUNDS
    if target in board.walls:
        return state, Outcome.ILLEGAL_WALL
    if target not in state.boxes:
        return State(board, state.boxes, target), Outcome.MOVED
    beyond = _shift(target, delta)
    if not board.in_bounds(beyond):
        return state, Outcome.OUT_OF_BOUNDS
    if beyond in board.walls:
        return state, Outcome.ILLEGAL_WALL
    if beyond in state.boxes:
        return state, Outcome.ILLEGAL_BOX_COLLISION
    return State(board, (state.boxes - {target}) | {beyond}, target), Outcome.PUSHED


@dataclass(frozen=True)
class Simulation:
    """The result of executing a move list. Execution stops at the first illegal move."""

    states: tuple[State, ...]
    """States visited, the starting state first."""
    outcomes: tuple[Outcome, ...]
    """The outcome of every attempted move (the last one is the illegal move, if any)."""
    deadlock_at: int | None
    """Index of the first applied move that pushed a box into a static deadlock, or None."""

    @property
    def final(self) -> State:
        return self.states[-1]

    @property
    def applied(self) -> int:
        return len(self.states) - 1

    @property
    def illegal_at(self) -> int | None:
        """Index of the illegal move that stopped execution, or None when every move was legal."""
        return len(self.outcomes) - 1 if self.outcomes and not self.outcomes[-1].legal else None


def simulate(state: State, moves: list[str] | tuple[str, ...]) -> Simulation:
    states, outcomes, deadlock_at = [state], [], None
    for i, move in enumerate(moves):
        nxt, outcome = step(states[-1], move)
        # `move_causes_deadlock(states[-1], move)`, reusing this step
        if deadlock_at is None and outcome is Outcome.PUSHED and state.board.is_dead(_shift(nxt.player, MOVES[move])):
            deadlock_at = i
        outcomes.append(outcome)
        if not outcome.legal:
            break
        states.append(nxt)
    return Simulation(tuple(states), tuple(outcomes), deadlock_at)


def potential(state: State) -> int:
    """ψ = −Σ_boxes min_goal Manhattan distance (AT-GRPO appendix A.1.5); 0 when solved."""
    return -sum(min(abs(b[0] - g[0]) + abs(b[1] - g[1]) for g in state.board.goals) for b in state.boxes)


def is_deadlocked(state: State) -> bool:
    """Some box not on a goal sits in a corner or on a dead square (static deadlock)."""
    return any(state.board.is_dead(box) for box in state.boxes)


def move_causes_deadlock(state: State, move: str) -> bool:
    """The move is a legal push that leaves the pushed box statically deadlocked."""
    nxt, outcome = step(state, move)
    if outcome is not Outcome.PUSHED:
        return False
    pushed = _shift(nxt.player, MOVES[move])
    return state.board.is_dead(pushed)
