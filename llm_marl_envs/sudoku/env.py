"""Sudoku: fill an N x N grid with a unique solution (AT-GRPO Sec. 5.1; rewards A.1.3; workflow A.2.2).

| | |
|---|---|
| Creation | `llm_marl_envs.sudoku_v1.env()` / `pettingzoo.make("aec", "llm_marl/Sudoku-v1")` |
| Agents | `tool`, `planner` (mode "mas"); `planner` alone (mode "planner"); `tool` alone (mode "tool") |
| Turn order | tool, planner, tool, planner, ... for up to `max_turns` turns |
| Observation | `{"messages": [chat in OpenAI format], "turn": int}`; the task shows the current grid |
| Action | the role's raw reply (`str`) |
| Parallel | no (the planner reads the tool's output) |

The `planner` is the paper's Reasoner / "Plan Agent (Planner & Verifier)"; the `tool` is its
"Tool Agent (Sudoku Coder)".

Arguments: `mode` ("mas" | "planner" | "tool"), `max_turns` (T, default 4), `size` (N, default 4;
6, 8, 9, 10, 12 ... also work), `box_rows`, `box_cols` (box shape; default the most square
factorisation of N: 2x2, 2x3, 2x4, 3x3), `min_clues` (stop removing clues at this many, default 0),
`max_removals` (remove at most this many clues, default None), `max_clues` (redraw puzzles with
more clues, default None), `render_mode` (None | "ansi" | "human"), `sandbox` (a shared
`llm_marl_envs.sandbox.Sandbox`). `reset(seed, options={"split": "train"|"val"|"test"})`.
Puzzles: a random complete grid, then clues removed in a random order while the solution stays
unique (proven by the exact solver); with the defaults the puzzle is minimal up to 12x12 (4x4: 4 to
6 clues; 9x9: about 21 to 27; above 12x12 a clue whose proof passes a search budget stays). The unique
solution is `env.instance.solution`.

Example observation (the task part of the tool's first prompt, seed 0, split "test"; solution
`[[1,3,4,2],[2,4,1,3],[4,2,3,1],[3,1,2,4]]`):

    Solve the 4x4 Sudoku. Fill digits 1..4; rows, columns, and sub-grids must have unique digits.
    Current puzzle (dots denote blanks; rows and columns are numbered from 1, top to bottom and left to right):
    1 . | . 2
    . . | . .
    ----+----
    . 2 | 3 .
    . . | . .
    Current grid as JSON (0 = blank): [[1,0,0,2],[0,0,0,0],[0,2,3,0],[0,0,0,0]]
    Given clues: every digit shown above is a given clue and cannot be changed.

    Environment:
    - size: 4
    - subgrid_size: 2x2 (rows x columns)
    - notes/constraints: the puzzle has exactly one solution; 4 given clues must be kept (an answer that changes a clue is rejected); 12 blank cells left; a digit you placed earlier may be overwritten.
    Turn 1 of 4.

After an answer has filled cells, the grid shows them and the clues are listed separately
("Given clues as JSON (0 = not a clue; ...)"); later turns also carry the history.

Action grammar. Tool: one ```python block whose program prints EITHER the completed grid as a JSON
array of arrays (`[[1,2,3,4],[3,4,1,2],[2,1,4,3],[4,3,2,1]]`) OR a JSON list of fill steps
`[[r, c, v], ...]` (1-based row, column, digit); CRLF line endings are read as newlines, and a
block indented as a whole (in a markdown list item, fences included) loses its common indentation
(`core.text.extract_code`). Planner: reasoning, then a line
`#### [[1,2,3,4],...]` or `#### [[1,2,3],[2,1,4]]`. Tolerated: surrounding text, markdown fences,
Python tuples, trailing commas, `null`/0 for a blank in a grid, rows as digit strings
(`["12.4", ...]`); the first bracketed list that is a grid or a step list counts. Indices and
digits outside 1..N (0 allowed as a blank in a grid) make the answer malformed. An answer is
applied atomically: one that would change a given clue is rejected whole (the grid is unchanged);
otherwise every edit is applied, duplicates included, and a later answer may overwrite any cell
that is not a clue.

Rewards (A.1.3), per agent at turn k: r = λ·r_team + (1-λ)·m·r_loc, λ_sudoku = 0.60, with G_k the
grid after the answer and G_{k-1} the grid before it:

| term | who | value | coefficient |
|---|---|---|---|
| r_team | both | 1 when G_k is solved (complete, no duplicate, every clue kept), else 0 (sparse) | λ = 0.60 |
| fmt | planner | answer parses as an N x N grid or a list of [r, c, v], in range | 0.15 |
| legal | planner | the answer keeps every clue and G_k has no row/column/sub-grid duplicate | 0.55 |
| prog | planner | (1/N²)·#{cells empty in G_{k-1} and filled in G_k} | 0.30 |
| fmt | tool | printed output parses as a grid or step list; digits in 1..N, indices in bounds | 0.10 |
| exec | tool | the program ran without error/timeout and its edits apply (no clue changed) | 0.20 |
| san | tool | at least one edit, and every edited cell is free of duplicates in its row, column and box | 0.70 |

Masks (A.1.3): the planner's is 1 when its answer parses (legality and progress computable), else
0; the tool's is 1 when its program ran and its output parses (executor logs and legality checks
available), else 0. So an unparsable reply earns 0, while any parsed reply earns at least
(1-λ)·c_fmt. Interpretations: the paper's team reward 1{k = T, Solved(h_k)} is paid at
termination, which here is the turn that solves the puzzle; Solved also checks the clues, which
the reference implementation did not. `legal` is the paper's "no duplicates in G_k"
and also requires the clues kept: a rejected answer leaves G_k = G_{k-1}, which must not count as
legal. An empty step list is a format error (doing nothing would otherwise earn fmt and legal).
The tool's proposal is simulated on the
current grid without being applied, and its r_team is the one it would earn if adopted, so its
reward is known at its own step (AT-GRPO Alg. 1 line 10).

Termination: the planner's answer (the tool's proposal in mode "tool") solves the puzzle
(terminated, `success=True`); truncation after
`max_turns` turns. `infos[agent]` holds the breakdown (`reward`, `team_reward`, `local_reward`,
`local_terms`, `mask`, `lambda`), `parse_error`, `turn` and `success`.

Version history:
- v1: the tool's code block is read with CRLF line endings (a ```` ```python\\r\\n ```` fence was not
  found: no code, reward 0) and without the indentation of a block indented as a whole, e.g. in a
  markdown list item (v0 ran it as written: an IndentationError, mask 0, reward 0).
- v0: initial release.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ..core.rewards import RewardBreakdown
from ..core.tool_planner import Applied, Mode, ToolPlannerEnv, ToolRun
from . import prompts
from .generator import SudokuConfig, SudokuInstance, generate
from .parse import SudokuAnswer, parse_answer
from .rules import (Application, Cell, Grid, apply_grid, apply_steps, blank_count, conflict_cells, conflicts,
                    grid_out_of_range, is_solved, steps_out_of_range, to_grid)

LAMBDA_SUDOKU = 0.60
PLANNER_COEF = {"fmt": 0.15, "legal": 0.55, "prog": 0.30}
TOOL_COEF = {"fmt": 0.10, "exec": 0.20, "san": 0.70}


def planner_terms(app: Application, bad: frozenset[Cell]) -> dict[str, float]:
    """fmt, legal, prog of a parsed, in-range answer (A.1.3 Reasoner local design); `bad` is
    `conflicts(app.after, shape)`."""
    return {
        "fmt": 1.0,
        "legal": float(app.applied and not bad),
        "prog": app.progress,
    }


def solved_after(app: Application, bad: frozenset[Cell]) -> bool:
    """`is_solved(app.after, clues, shape)` given `bad = conflicts(app.after, shape)`, without a second
    search: the grid after an answer always keeps every clue (an answer that would change one is
    rejected whole and leaves the grid, which keeps them), so it is solved when complete and `bad` is empty."""
    return not bad and app.blanks == 0


def tool_terms(app: Application, bad: frozenset[Cell]) -> dict[str, float]:
    """fmt, exec, san of a parsed, in-range proposal (A.1.3 Tool local design); `bad` is
    `conflicts(app.after, shape)`, so `san` asks that no edited cell is in it (`app.edited_conflicts`)."""
    return {
        "fmt": 1.0,
        "exec": float(app.applied),
        "san": float(app.applied and bool(app.edited) and bad.isdisjoint(app.edited)),
    }


def planner_feedback(app: Application, clues: Grid, success: bool, bad: frozenset[Cell]) -> str:
    """What a parsed answer did (`bad`: the cells in conflict after it), for the history of later prompts."""
    if app.clue_changes:
        shown = ", ".join(f"({r + 1}, {c + 1}) is {clues[r][c]}" for r, c in app.clue_changes[:5])
        return f"rejected: the answer changes given clues ({shown}); the grid is unchanged"
    filled = round(app.progress * len(clues) ** 2)
    text = f"applied: {len(app.edited)} cells changed, {filled} newly filled; {app.blanks} blank cells left"
    bad = sorted(bad)
    if bad:
        shown = ", ".join(f"({r + 1}, {c + 1})" for r, c in bad[:8])
        text += f"; duplicate digits at {shown}{' ...' if len(bad) > 8 else ''}"
    return text + ("; the puzzle is solved" if success else "; not solved yet")


class raw_env(ToolPlannerEnv):
    metadata = {"render_modes": ["human", "ansi"], "name": "sudoku_v1", "is_parallelizable": False}
    has_global_state = True  # state(): the board as text
    instance_namespace = "sudoku"
    prompts = prompts
    fork_shared = (*ToolPlannerEnv.fork_shared, "shape", "clues", "grid")

    def __init__(self, mode: Mode = "mas", max_turns: int = 4, size: int = 4, box_rows: int | None = None,
                 box_cols: int | None = None, min_clues: int = 0, max_removals: int | None = None,
                 max_clues: int | None = None, render_mode: str | None = None, sandbox: Any = None):
        self.config = SudokuConfig(size=size, box_rows=box_rows, box_cols=box_cols, min_clues=min_clues,
                                   max_removals=max_removals, max_clues=max_clues)
        super().__init__(mode=mode, max_turns=max_turns, render_mode=render_mode, sandbox=sandbox)

    def _make_instance(self, rng: np.random.Generator) -> SudokuInstance:
        return generate(rng, self.config)

    def _start_task(self) -> None:
        inst: SudokuInstance = self.instance
        self.shape = inst.shape
        # Tuples from here on (an instance built by hand may hold lists): the rules' fast paths need them.
        self.clues: Grid = to_grid(inst.puzzle)
        self.grid: Grid = self.clues

    # ------------------------------------------------------------------ text
    def describe_task(self) -> str:
        return prompts.task_text(self.shape, self.grid, self.clues, self.turn, self.max_turns)

    def _render_state(self) -> str:
        blanks = blank_count(self.grid)
        bad = conflicts(self.grid, self.shape)
        status = f"{self.instance.num_clues} clues | {blanks} blanks | " + (f"{len(bad)} cells in conflict" if bad else "no conflicts")
        return f"{prompts.board_text(self.grid, self.shape)}\n{status}"

    # ------------------------------------------------------------------ parsing
    def _apply(self, answer: SudokuAnswer) -> Application:
        if answer.kind == "grid":
            # `_parse` checked it; `digits`: the parser's bytes of it, when it read them
            return apply_grid(self.grid, self.clues, answer.grid, self.shape, checked=True, digits=answer.digits)
        return apply_steps(self.grid, self.clues, answer.steps, self.shape)

    def _parse(self, text: str) -> tuple[SudokuAnswer | None, str | None]:
        """Parse and range-check (digits and indices in 1..N are part of the format, A.1.3)."""
        answer, error = parse_answer(text, self.shape.size)
        if answer is None:
            return None, error
        if answer.kind == "grid":
            problems = () if answer.in_range else grid_out_of_range(answer.grid, self.shape)
        else:
            problems = steps_out_of_range(answer.steps, self.shape)
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            return None, problems[0] + more
        return answer, None

    def parse_proposal(self, output: str) -> tuple[Any, str | None]:
        return self._parse(output)

    def parse_answer(self, answer: str) -> tuple[Any, str | None]:
        return self._parse(answer)

    def format_proposal(self, proposal: Any) -> str:
        return proposal.to_text()

    # ------------------------------------------------------------------ rewards (A.1.3)
    def score_tool(self, run: ToolRun) -> RewardBreakdown:
        if run.proposal is None:
            terms = {"fmt": 0.0, "exec": 0.0, "san": 0.0}
            return RewardBreakdown(0.0, terms, TOOL_COEF, mask=0.0, lam=LAMBDA_SUDOKU)
        app = self._apply(run.proposal)
        bad = conflict_cells(app.after, self.shape)  # found once for `san` and the solved check
        team = float(solved_after(app, bad))  # r_team (A.1.3): 1 when the proposal would solve the grid
        return RewardBreakdown(team, tool_terms(app, bad), TOOL_COEF, mask=1.0, lam=LAMBDA_SUDOKU)

    def apply_answer(self, answer: Any, error: str | None) -> Applied:
        if answer is None:
            terms = {"fmt": 0.0, "legal": 0.0, "prog": 0.0}
            return Applied(RewardBreakdown(0.0, terms, PLANNER_COEF, mask=0.0, lam=LAMBDA_SUDOKU), False,
                           f"no valid answer ({error}); the grid is unchanged")
        app = self._apply(answer)
        bad = conflict_cells(app.after, self.shape)  # found once for legality, the solved check and the feedback
        terms = planner_terms(app, bad)
        self.grid = app.after
        success = solved_after(app, bad)  # `self.is_solved()`
        team = float(success)  # r_team (A.1.3): 1 when solved
        breakdown = RewardBreakdown(team, terms, PLANNER_COEF, mask=1.0, lam=LAMBDA_SUDOKU)
        return Applied(breakdown, success, functools.partial(planner_feedback, app, self.clues, success, bad))

    def is_solved(self) -> bool:
        return is_solved(self.grid, self.clues, self.shape)
