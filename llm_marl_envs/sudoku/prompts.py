"""Sudoku prompts: AT-GRPO appendix A.2.2 "Sudoku MAS Workflow" (Tool Agent = Sudoku coder, Plan
Agent = planner & verifier), with the refinement turns of A.3.1, adapted to show the *current*
grid every turn and to say that the given clues are fixed. The paper's
9x9 examples are replaced by examples of the puzzle's own size."""

from __future__ import annotations

import re
from functools import lru_cache

from ..core.tool_planner import TurnContext, history_text, tool_run_text
from .rules import Grid, Shape, blank_count

TASK_HEADER = "Solve the {n}x{n} Sudoku."
_HEADER_RE = re.compile(r"Solve the (\d+)x\1 Sudoku\.")

TOOL_SYSTEM = "You are an AI assistant designed to be helpful. Utilize your programming expertise to address the task."
PLANNER_SYSTEM = "You are a planning and reasoning agent."


def example_grid(n: int) -> str:
    """The first and last rows of a valid N x N grid, as the paper's `[[5,3,4,...], …, [...]]`."""
    first = list(range(1, n + 1))
    last = first[::-1]
    return f"[[{','.join(map(str, first))}], …, [{','.join(map(str, last))}]]"


def example_steps(n: int) -> str:
    return f"[[1,2,{min(3, n)}],[2,1,{n}],[{n},{n},1]]"


@lru_cache(maxsize=32)
def _tool_format(n: int) -> str:
    return (
        "Propose Python code (within a single python code block) for the user to run. Ensure each response contains "
        "only ONE code block. Use the 'print' function to output EITHER: (A) the completed grid as a JSON array of "
        "arrays, OR (B) a JSON list of fill steps [r, c, v] using 1-based indices (row r, column c, digit v).\n"
        "Formatting requirements:\n"
        "* Begin the Python block with ```python and end with ```.\n"
        f"* The program's output is the Sudoku solution: e.g. {example_grid(n)}\n"
        "* Print ONLY the JSON (no extra text, no comments)."
    )


@lru_cache(maxsize=32)
def _planner_format(n: int) -> str:
    return (
        "FORMATTING IS MANDATORY. Give the final answer AFTER the line that begins with ####.\n"
        "You may return EITHER:\n- a completed grid as JSON, OR\n- a JSON list of fill steps [r, c, v], 1-based indices.\n"
        f"Examples:\n#### {example_grid(n)}\n#### {example_steps(n)}"
    )


def board_text(grid: Grid, shape: Shape) -> str:
    """The grid with dots for blanks and box separators, e.g. for 4x4:

        1 . | . 4
        . . | 2 .
        ----+----
    """
    n = shape.size
    if len(grid) == n and all(len(row) == n for row in grid):  # always, in the environment
        return _board_template(shape).format(*[str(v) if v else "." for row in grid for v in row])
    return _board_lines(shape, [[str(v) if v else "." for v in row] for row in grid])


def _board_lines(shape: Shape, cells: list[list[str]]) -> str:
    """`board_text` from the text of each cell, right-aligned to the widest digit."""
    n, box_cols = shape.size, shape.box_cols
    width = len(str(n))
    lines = []
    for r, row in enumerate(cells):
        if r and r % shape.box_rows == 0:
            lines.append("-+-".join("-" * ((width + 1) * box_cols - 1) for _ in range(n // box_cols)))
        row = [cell.rjust(width) for cell in row]
        lines.append(" | ".join(" ".join(row[b:b + box_cols]) for b in range(0, n, box_cols)))
    return "\n".join(lines)


@lru_cache(maxsize=32)
def _board_template(shape: Shape) -> str:
    """`board_text` of an N x N grid as a format string with one field per cell, built once per shape."""
    n = shape.size
    width = len(str(n))
    field = "{:>%d}" % width  # pads like `rjust(width)` (the field itself is wider than that already)
    return _board_lines(shape, [[field] * n for _ in range(n)])


def grid_json(grid: Grid) -> str:
    n = len(grid)
    if all(len(row) == n for row in grid):  # always, in the environment
        return _json_template(n).format(*[v for row in grid for v in row])
    return "[" + ",".join("[" + ",".join(map(str, row)) + "]" for row in grid) + "]"


@lru_cache(maxsize=32)
def _json_template(n: int) -> str:
    """`grid_json` of an N x N grid as a format string with one field per cell (`{}` writes `str(v)`)."""
    return "[" + ",".join(["[" + ",".join(["{}"] * n) + "]"] * n) + "]"


def task_text(shape: Shape, grid: Grid, clues: Grid, turn: int, max_turns: int) -> str:
    """The task (A.2.2 "Task" and "Env Context") showing the CURRENT grid."""
    n = shape.size
    blanks = blank_count(grid)
    num_clues = sum(1 for row in clues for v in row if v)
    if grid == clues:
        clue_line = "Given clues: every digit shown above is a given clue and cannot be changed."
    else:
        clue_line = f"Given clues as JSON (0 = not a clue; these cells cannot be changed): {grid_json(clues)}"
    return (
        f"{TASK_HEADER.format(n=n)} Fill digits 1..{n}; rows, columns, and sub-grids must have unique digits.\n"
        "Current puzzle (dots denote blanks; rows and columns are numbered from 1, top to bottom and left to right):\n"
        f"{board_text(grid, shape)}\n"
        f"Current grid as JSON (0 = blank): {grid_json(grid)}\n"
        f"{clue_line}\n\n"
        "Environment:\n"
        f"- size: {n}\n"
        f"- subgrid_size: {shape.box_rows}x{shape.box_cols} (rows x columns)\n"
        f"- notes/constraints: the puzzle has exactly one solution; {num_clues} given clues must be kept (an answer "
        f"that changes a clue is rejected); {blanks} blank cells left; a digit you placed earlier may be overwritten.\n"
        f"Turn {turn + 1} of {max_turns}."
    )


def _size(ctx: TurnContext) -> int:
    """N, read back from the task's first line (written by `task_text`)."""
    found = _HEADER_RE.search(ctx.task)
    return int(found.group(1)) if found else 9


def tool_messages(ctx: TurnContext) -> list[dict[str, str]]:
    n = _size(ctx)
    if ctx.turn == 0:
        user = (
            f"{_tool_format(n)}\n\nTask:\n{ctx.task}\n\n"
            "Output: Code (program prints either the completed grid JSON or a JSON list of fill steps)."
        )
    else:
        user = (
            "Refine your Python solution so that it prints a correct Sudoku solution.\n\n"
            f"Task:\n{ctx.task}\n\nHistory (previous attempts, planner answers, and their effect):\n{history_text(ctx.history)}\n\n"
            "Requirements:\n* Solve from the CURRENT grid; keep every given clue; rows, columns and sub-grids must "
            "have unique digits.\n* A wrong digit placed earlier (not a clue) may be overwritten.\n"
            "* Single python code block only; the program's output IS the solution.\n\n"
            f"{_tool_format(n)}\n\nOutput: Refined code (program prints the completed grid JSON or a JSON list of fill steps)."
        )
    return [{"role": "system", "content": TOOL_SYSTEM}, {"role": "user", "content": user}]


def planner_messages(ctx: TurnContext) -> list[dict[str, str]]:
    n = _size(ctx)
    code, output, proposal = tool_run_text(ctx.tool)
    user = (
        "You will receive:\n* The original task description\n* The Tool Agent's code\n"
        "* The code execution output (a JSON grid or JSON steps)\n"
        "Your job is to reason carefully, decide the final Sudoku solution, and format your response EXACTLY as specified.\n"
        "Instructions:\n* Read the task, inspect the code, and verify the execution output against the Sudoku rules: "
        f"rows, columns, and sub-grids must contain unique digits in 1..{n}, and every given clue must be kept.\n"
        "* If the tool's output is a complete, valid solution, adopt it.\n"
        "* If it is incomplete or violates constraints, correct it or provide your own.\n"
        "* Keep reasoning concise but explicit: explain why the final result is valid.\n\n"
        f"Task:\n{ctx.task}\n\nTool code:\n```python\n{code}\n```\n\nTool execution output:\n{output}\n\n"
        f"Tool proposed solution: {proposal}\n\n"
        + (f"History:\n{history_text(ctx.history)}\n\n" if ctx.history else "")
        + _planner_format(n)
    )
    return [{"role": "system", "content": PLANNER_SYSTEM}, {"role": "user", "content": user}]


def single_planner_messages(ctx: TurnContext) -> list[dict[str, str]]:
    n = _size(ctx)
    user = (
        "Reason carefully about the Sudoku below, decide the final solution, and format your response EXACTLY as "
        "specified. Rows, columns, and sub-grids must contain unique digits, and every given clue must be kept.\n\n"
        f"Task:\n{ctx.task}\n\n"
        + (f"History:\n{history_text(ctx.history)}\n\n" if ctx.history else "")
        + _planner_format(n)
    )
    return [{"role": "system", "content": PLANNER_SYSTEM}, {"role": "user", "content": user}]
