"""An exact Sokoban solver: breadth-first search over (player, boxes), optimal in moves.

Every move (walk or push) costs 1, so BFS returns a solution with the minimal number of moves.
Pushes onto dead squares (`Board.dead_squares`, non-goal corners) are pruned: no solution passes
through them, so pruning keeps optimality. Cells are flat indices `r * W + c`; the boxes are a sorted
tuple, so a search state is a small hashable key.
"""

from __future__ import annotations

from collections import deque

from .rules import MOVES, State

DEFAULT_MAX_NODES = 500_000
"""Default node budget: states expanded before giving up (6x6 levels need a few thousand at most)."""


def solve(state: State, max_nodes: int = DEFAULT_MAX_NODES) -> list[str] | None:
    """A minimal-move solution of `state` (empty when already solved).

    Returns None when the level is unsolvable or when more than `max_nodes` states would have to
    be expanded; `len(result)` is the optimal number of moves.
    """
    board = state.board
    H, W = board.height, board.width
    n = H * W
    names = list(MOVES)
    # neighbour[i][d]: index of the cell next to i in direction d, or -1 (wall or off the grid).
    floor = board.floor
    neighbour = []
    for i in range(n):
        r, c = divmod(i, W)
        neighbour.append([(r + dr) * W + c + dc if (r + dr, c + dc) in floor else -1 for dr, dc in MOVES.values()])
    dead = [True] * n
    for cell in floor:
        dead[cell[0] * W + cell[1]] = board.is_dead(cell)
    goals = frozenset(r * W + c for r, c in board.goals)

    start = (state.player[0] * W + state.player[1], tuple(sorted(r * W + c for r, c in state.boxes)))
    if set(start[1]) <= goals:
        return []
    if any(dead[b] for b in start[1]):
        return None
    parent: dict[tuple[int, tuple[int, ...]], tuple[tuple[int, tuple[int, ...]], int] | None] = {start: None}
    queue = deque([start])
    expanded = 0
    while queue:
        key = queue.popleft()
        expanded += 1
        if expanded > max_nodes:
            return None
        player, boxes = key
        box_set = set(boxes)
        for d in range(4):
            target = neighbour[player][d]
            if target < 0:
                continue
            if target in box_set:
                beyond = neighbour[target][d]
                if beyond < 0 or beyond in box_set or dead[beyond]:
                    continue
                new_boxes = tuple(sorted(beyond if b == target else b for b in boxes))
            else:
                new_boxes = boxes
            nxt = (target, new_boxes)
            if nxt in parent:
                continue
            parent[nxt] = (key, d)
            if new_boxes is not boxes and set(new_boxes) <= goals:
                return _path(parent, nxt, names)
            queue.append(nxt)
    return None


def _path(parent: dict, key: tuple, names: list[str]) -> list[str]:
    moves = []
    link = parent[key]
    while link is not None:
        key, d = link
        moves.append(names[d])
        link = parent[key]
    return moves[::-1]
