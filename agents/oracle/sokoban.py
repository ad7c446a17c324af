"""Sokoban oracle: the tool writes a real breadth-first search over (player, boxes) on the board in
its prompt; the planner replays the tool's proposal on the board and adopts it when it solves the
puzzle, or searches itself when it does not.

Everything comes from the observation text (the board block of the task); nothing reads
environment internals. The search the tool's program runs is `solve_board` below, shipped as
source, so the program and the planner search the same way without two copies of the code.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from ..base import Agent, last_user_text, moves_program

_MOVES = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}


def solve_board(rows):
    """A minimal-move solution of an XSB board (list of rows), or None. Self-contained: it is also the tool's program."""
    from collections import deque

    moves = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}
    walls, goals, boxes, player = set(), set(), set(), None
    for r, row in enumerate(rows):
        for c, ch in enumerate(row):
            if ch == "#":
                walls.add((r, c))
            if ch in ".*+":
                goals.add((r, c))
            if ch in "$*":
                boxes.add((r, c))
            if ch in "@+":
                player = (r, c)
    height, width = len(rows), max(len(row) for row in rows)

    def free(cell):
        return 0 <= cell[0] < height and 0 <= cell[1] < width and cell not in walls

    start = (player, frozenset(boxes))
    parent = {start: None}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        pos, bxs = state
        if bxs <= goals:
            path = []
            while parent[state] is not None:
                state, name = parent[state]
                path.append(name)
            return path[::-1]
        for name, (dr, dc) in moves.items():
            nxt = (pos[0] + dr, pos[1] + dc)
            if not free(nxt):
                continue
            new_boxes = bxs
            if nxt in bxs:
                beyond = (nxt[0] + dr, nxt[1] + dc)
                if not free(beyond) or beyond in bxs:
                    continue
                new_boxes = (bxs - {nxt}) | {beyond}
            key = (nxt, new_boxes)
            if key not in parent:
                parent[key] = (state, name)
                queue.append(key)
    return None


TOOL_PROGRAM = (
    inspect.getsource(solve_board)
    + '''

BOARD = """{board}"""
solution = solve_board(BOARD.split("\\n"))
print("[" + ", ".join(solution or []) + "]")
'''
)


def parse_board(task: str) -> list[str]:
    """The board block of the task text: the lines after 'Board (...):' up to a blank line."""
    lines = task.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Board ("))
    board = []
    for line in lines[start + 1:]:
        if not line.strip():
            break
        board.append(line)
    return board


def solves(board: list[str], moves: list[str]) -> bool:
    """Replay `moves` on the board: every move legal and every box on a goal at the end."""
    cells = {(r, c): ch for r, row in enumerate(board) for c, ch in enumerate(row)}
    goals = {p for p, ch in cells.items() if ch in ".*+"}
    boxes = {p for p, ch in cells.items() if ch in "$*"}
    pos = next(p for p, ch in cells.items() if ch in "@+")
    for m in moves:
        dr, dc = _MOVES[m]
        nxt = (pos[0] + dr, pos[1] + dc)
        if cells.get(nxt, "#") == "#":
            return False
        if nxt in boxes:
            beyond = (nxt[0] + dr, nxt[1] + dc)
            if cells.get(beyond, "#") == "#" or beyond in boxes:
                return False
            boxes = (boxes - {nxt}) | {beyond}
        pos = nxt
    return boxes <= goals


class SokobanOracle(Agent):
    """How the tool writes its program:
    - `program="search"`: the breadth-first search above (it really searches, in the sandbox; a few
      hundred tokens);
    - `"answer"`: a one-line program printing the move list the oracle found (a few dozen tokens),
      for small models and short reply budgets, as Plan-Path's oracle offers."""

    PROGRAMS = ("search", "answer")

    def __init__(self, program: str = "search"):
        if program not in self.PROGRAMS:
            raise ValueError(f"program must be one of {', '.join(self.PROGRAMS)}, got {program!r}")
        self.program = program

    def act(self, role: str, observation: dict[str, Any]) -> str:
        task = last_user_text(observation)
        board = parse_board(task)
        if role == "tool" and self.program == "answer":
            return moves_program(solve_board(board) or [])
        if role == "tool":
            program = TOOL_PROGRAM.replace("{board}", "\n".join(board))
            return "Breadth-first search over (player, boxes) states; the first solved state gives a shortest move list.\n```python\n" + program + "```"
        found = re.search(r"Tool proposed action list: \[([^\]]*)\]", task)
        proposal = [m.strip() for m in found.group(1).split(",") if m.strip()] if found else []
        if proposal and all(m in _MOVES for m in proposal) and solves(board, proposal):
            return "Replaying the tool's list on the board: every move is legal and every box ends on a goal, so I adopt it.\n#### [" + ", ".join(proposal) + "]"
        solution = solve_board(board) or []
        return "Searching the board myself (breadth-first over player and box positions).\n#### [" + ", ".join(solution) + "]"
