"""Sudoku oracle: the tool writes a real backtracking solver over the puzzle in its prompt; the
planner checks the tool's proposal against the clues and the rules and adopts it, or solves the
puzzle itself when the proposal is wrong (and always in the planner-only variant).

Everything comes from the observation text (the "Current grid as JSON", "Given clues as JSON" and
"subgrid_size" lines of the task); nothing reads environment internals. The search the tool's
program runs is `solve_sudoku` below, shipped as source, so the program and the planner search the
same way without two copies of the code.
"""

from __future__ import annotations

import inspect
import json
import re
from typing import Any

from ..base import Agent, last_user_text


def solve_sudoku(grid, box_rows, box_cols):
    """The solution of a Sudoku (list of rows, 0 = blank), or None. Self-contained: it is also the tool's program.

    Backtracking over bitmasks of the digits used in each row, column and box, always filling the
    empty cell with the fewest candidates first.
    """
    n = len(grid)
    rows, cols, boxes = [0] * n, [0] * n, [0] * n
    cells = [row[:] for row in grid]
    empty = []
    for r in range(n):
        for c in range(n):
            v = cells[r][c]
            b = (r // box_rows) * box_rows + c // box_cols
            if v:
                bit = 1 << v
                if (rows[r] | cols[c] | boxes[b]) & bit:
                    return None
                rows[r] |= bit
                cols[c] |= bit
                boxes[b] |= bit
            else:
                empty.append((r, c, b))
    full = (1 << (n + 1)) - 2

    def search(remaining):
        if not remaining:
            return True
        best, best_mask, best_count = None, 0, n + 1
        for cell in remaining:
            r, c, b = cell
            mask = full & ~(rows[r] | cols[c] | boxes[b])
            count = bin(mask).count("1")
            if count < best_count:
                best, best_mask, best_count = cell, mask, count
                if count <= 1:
                    break
        if best_count == 0:
            return False
        r, c, b = best
        rest = [cell for cell in remaining if cell is not best]
        for v in range(1, n + 1):
            bit = 1 << v
            if best_mask & bit:
                cells[r][c] = v
                rows[r] |= bit
                cols[c] |= bit
                boxes[b] |= bit
                if search(rest):
                    return True
                rows[r] ^= bit
                cols[c] ^= bit
                boxes[b] ^= bit
        cells[r][c] = 0
        return False

    return cells if search(empty) else None


TOOL_PROGRAM = (
    inspect.getsource(solve_sudoku)
    + '''

PUZZLE = {puzzle}
solution = solve_sudoku(PUZZLE, {box_rows}, {box_cols})
print("[" + ",".join("[" + ",".join(str(v) for v in row) + "]" for row in (solution or [])) + "]")
'''
)


def _json_line(task: str, label: str) -> Any:
    found = re.search(re.escape(label) + r"[^:\n]*: (\[.*\])", task)
    return json.loads(found.group(1)) if found else None


def read_task(task: str) -> tuple[list[list[int]], list[list[int]], int, int]:
    """(clues, current grid, box_rows, box_cols) from the task text of the prompt."""
    current = _json_line(task, "Current grid as JSON")
    clues = _json_line(task, "Given clues as JSON") or current
    box = re.search(r"subgrid_size: (\d+)x(\d+)", task)
    return clues, current, int(box.group(1)), int(box.group(2))


def is_solution(grid: Any, clues: list[list[int]], box_rows: int, box_cols: int) -> bool:
    """Complete, every row/column/box a permutation of 1..N, every clue kept."""
    n = len(clues)
    if not isinstance(grid, list) or len(grid) != n or any(not isinstance(row, list) or len(row) != n for row in grid):
        return False
    digits = set(range(1, n + 1))
    units = [[(r, c) for c in range(n)] for r in range(n)] + [[(r, c) for r in range(n)] for c in range(n)]
    units += [[(br + i, bc + j) for i in range(box_rows) for j in range(box_cols)]
              for br in range(0, n, box_rows) for bc in range(0, n, box_cols)]
    if any({grid[r][c] for r, c in unit} != digits for unit in units):
        return False
    return all(v == 0 or grid[r][c] == v for r, row in enumerate(clues) for c, v in enumerate(row))


def _proposal(task: str, current: list[list[int]]) -> Any:
    """The tool's proposal as a grid (fill steps are applied to the current grid), or None."""
    try:
        value = _json_line(task, "Tool proposed solution")
    except ValueError:
        return None
    if not isinstance(value, list) or not value:
        return None
    if all(isinstance(s, list) and len(s) == 3 for s in value):
        grid = [row[:] for row in current]
        for r, c, v in value:
            if not (isinstance(r, int) and isinstance(c, int) and 1 <= r <= len(grid) and 1 <= c <= len(grid)):
                return None
            grid[r - 1][c - 1] = v
        return grid
    return value


def grid_text(grid: list[list[int]]) -> str:
    return "[" + ",".join("[" + ",".join(str(v) for v in row) + "]" for row in grid) + "]"


class SudokuOracle(Agent):
    def act(self, role: str, observation: dict[str, Any]) -> str:
        task = last_user_text(observation)
        clues, current, box_rows, box_cols = read_task(task)
        if role == "tool":
            program = (TOOL_PROGRAM.replace("{puzzle}", grid_text(clues))
                       .replace("{box_rows}", str(box_rows)).replace("{box_cols}", str(box_cols)))
            return ("Backtracking search with bitmasks, filling the most constrained cell first; it prints the "
                    "completed grid as JSON.\n```python\n" + program + "```")
        proposal = _proposal(task, current)
        if proposal is not None and is_solution(proposal, clues, box_rows, box_cols):
            return ("Every row, column and sub-grid of the tool's grid holds each digit once, and every given clue "
                    "is kept, so I adopt it.\n#### " + grid_text(proposal))
        solution = solve_sudoku(clues, box_rows, box_cols) or []
        return "Solving the puzzle myself by backtracking from the given clues.\n#### " + grid_text(solution)
