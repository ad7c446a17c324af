"""Plan-Path oracle: the tool writes a real BFS program over the grid in its prompt; the planner
checks the tool's proposal against the grid and adopts it (or plans itself when it is wrong)."""

from __future__ import annotations

import re
from collections import deque
from typing import Any

from ..base import Agent, last_user_text, moves_program

_MOVES = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}

TOOL_PROGRAM = '''from collections import deque

GRID = """{grid}"""
rows = GRID.split("\\n")
cells = {{(r, c): ch for r, row in enumerate(rows) for c, ch in enumerate(row)}}
start = next(p for p, ch in cells.items() if ch == "A")
goal = next(p for p, ch in cells.items() if ch == "G")
moves = {{"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}}
parent = {{start: None}}
queue = deque([start])
while queue:
    cell = queue.popleft()
    if cell == goal:
        break
    for name, (dr, dc) in moves.items():
        nxt = (cell[0] + dr, cell[1] + dc)
        if cells.get(nxt, "#") != "#" and nxt not in parent:
            parent[nxt] = (cell, name)
            queue.append(nxt)
path = []
cell = goal
while parent.get(cell) is not None:
    cell, name = parent[cell]
    path.append(name)
print("[" + ", ".join(reversed(path)) + "]")
'''


def parse_grid(task: str) -> list[str]:
    """The grid block of the task text: the lines after 'Grid (...):' up to a blank line."""
    lines = task.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Grid ("))
    grid = []
    for line in lines[start + 1:]:
        if not line.strip():
            break
        grid.append(line)
    return grid


def bfs(grid: list[str]) -> list[str]:
    cells = {(r, c): ch for r, row in enumerate(grid) for c, ch in enumerate(row)}
    start = next(p for p, ch in cells.items() if ch == "A")
    goal = next(p for p, ch in cells.items() if ch == "G")
    parent: dict[Any, Any] = {start: None}
    queue = deque([start])
    while queue:
        cell = queue.popleft()
        for name, (dr, dc) in _MOVES.items():
            nxt = (cell[0] + dr, cell[1] + dc)
            if cells.get(nxt, "#") != "#" and nxt not in parent:
                parent[nxt] = (cell, name)
                queue.append(nxt)
    path, cell = [], goal
    while parent.get(cell) is not None:
        cell, name = parent[cell]
        path.append(name)
    return path[::-1]


def straight_route(grid: list[str]) -> list[str] | None:
    """The rows-first Manhattan route from A to G (what the coords program prints) if no wall blocks it."""
    cells = {(r, c): ch for r, row in enumerate(grid) for c, ch in enumerate(row)}
    (r, c), (gr, gc) = (next(p for p, ch in cells.items() if ch == mark) for mark in "AG")
    moves = ["U"] * (r - gr) + ["D"] * (gr - r) + ["L"] * (c - gc) + ["R"] * (gc - c)
    return moves if reaches_goal(grid, moves) else None


def reaches_goal(grid: list[str], moves: list[str]) -> bool:
    cells = {(r, c): ch for r, row in enumerate(grid) for c, ch in enumerate(row)}
    pos = next(p for p, ch in cells.items() if ch == "A")
    for m in moves:
        nxt = (pos[0] + _MOVES[m][0], pos[1] + _MOVES[m][1])
        if cells.get(nxt, "#") == "#":
            return False
        pos = nxt
    return cells[pos] == "G"


COORDS_PROGRAM = """r, c = {start}
gr, gc = {goal}
moves = ["U"] * (r - gr) + ["D"] * (gr - r) + ["L"] * (c - gc) + ["R"] * (gc - c)
print("[" + ", ".join(moves) + "]")
"""


class PlanPathOracle(Agent):
    """How the tool writes its program:
    - `program="search"`: the BFS program above (it really searches, in the sandbox);
    - `"coords"`: a short program that computes the moves from the start and goal coordinates (a
      shortest path whenever the straight route, rows first, is free; where walls block it, the
      one-line program of `"answer"`, so every reply stays short and a model learns one template);
    - `"answer"`: a one-line program printing the path the oracle found.
    The short styles suit small models and short reply budgets."""

    PROGRAMS = ("search", "coords", "answer")

    def __init__(self, program: str = "search"):
        if program not in self.PROGRAMS:
            raise ValueError(f"program must be one of {', '.join(self.PROGRAMS)}, got {program!r}")
        self.program = program

    def act(self, role: str, observation: dict[str, Any]) -> str:
        task = last_user_text(observation)
        grid = parse_grid(task)
        if role == "tool" and self.program == "coords" and straight_route(grid) is not None:
            start, goal = (next((r, c) for r, row in enumerate(grid) for c, ch in enumerate(row) if ch == mark)
                           for mark in "AG")
            return "```python\n" + COORDS_PROGRAM.format(start=f"{start[0]}, {start[1]}", goal=f"{goal[0]}, {goal[1]}") + "```"
        if role == "tool" and self.program in ("answer", "coords"):
            return moves_program(bfs(grid))
        if role == "tool":
            return "BFS from A to G over free cells.\n```python\n" + TOOL_PROGRAM.format(grid="\n".join(grid)) + "```"
        found = re.search(r"Tool proposed action list: \[([^\]]*)\]", task)
        proposal = [m.strip() for m in found.group(1).split(",") if m.strip()] if found else []
        if proposal and all(m in _MOVES for m in proposal) and reaches_goal(grid, proposal):
            return "The tool's list stays on free cells and ends on G, so I adopt it.\n#### [" + ", ".join(proposal) + "]"
        return "Planning with BFS over the grid.\n#### [" + ", ".join(bfs(grid)) + "]"
