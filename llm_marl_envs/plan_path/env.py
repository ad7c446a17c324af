"""Plan-Path: reach the goal on a grid with walls (AT-GRPO Sec. 5.1; rewards appendix A.1.4).

| | |
|---|---|
| Creation | `llm_marl_envs.plan_path_v2.env()` / `pettingzoo.make("aec", "llm_marl/PlanPath-v2")` |
| Agents | `tool`, `planner` (mode "mas"); `planner` alone (mode "planner"); `tool` alone (mode "tool") |
| Turn order | tool, planner, tool, planner, ... for up to `max_turns` turns |
| Observation | `{"messages": [chat in OpenAI format], "turn": int}`; the task shows the current position |
| Action | the role's raw reply (`str`) |
| Parallel | no (the planner reads the tool's output) |

Arguments: `mode` ("mas" | "planner" | "tool"), `max_turns` (T, default 4), `height`, `width`
(default 10 x 10), `wall_density` (0.22), `min_path_length` (6), `max_path_length` (None),
`render_mode` (None | "ansi" | "human"), `sandbox` (a shared `llm_marl_envs.sandbox.Sandbox`).
`reset(seed, options={"split": "train"|"val"|"test"})`.

Action grammar. Tool: one ```python block whose program prints an action list such as
`[U, R, D, L]`; CRLF line endings are read as newlines, and a block indented as a whole (in a
markdown list item, fences included) loses its common indentation (`core.text.extract_code`).
Planner: reasoning, then a line `#### [U, R, D, L]`. Moves: U (row-1), D (row+1), L (col-1),
R (col+1). A move into a wall or off the grid stops the rest of the list.

Rewards (A.1.4), per agent at turn k: r = λ·r_team + (1-λ)·m·r_loc, λ_plan = 0.5, with d_k the
Manhattan distance to the goal and d_0 = max(1, initial distance):

| term | who | value | coefficient |
|---|---|---|---|
| r_team | both | 1 at the goal, else max(0, (d_{k-1} - d_k)/d_0) | λ = 0.5 |
| fmt | planner | answer parses as a non-empty list of U/D/L/R | 0.20 |
| leg | planner | every move is in bounds and not into a wall | 0.40 |
| sp | planner | every applied move lies on a shortest path (SPNext) | 0.40 |
| fmt | tool | printed output parses as a non-empty action list | 0.10 |
| exec | tool | program ran and its list applies no invalid move (and advances) | 0.40 |
| shape | tool | potential φ = -d does not decrease | 0.50 |

Masks: the planner's is 1 (map and BFS oracle always available); the tool's is 1 when its program
ran (execution logs exist), else 0. Interpretations: the papers score one action per turn; answers
here are move lists, so `leg` and `sp` hold for every applied move. The tool's proposal is simulated
from the current state without being applied, and its r_team is the one the proposal would earn if
adopted, so its reward is known at its own step (AT-GRPO Alg. 1 line 10). An empty list `[]` takes no
action, so it is a format error (A.1.4: s_fmt = 1{a_k in {U,D,L,R}}) for both roles: otherwise doing
nothing would earn fmt, leg and shape.

Termination: the planner's list ends on the goal (terminated, `success=True`); truncation after
`max_turns` turns. `infos[agent]` holds the breakdown, `parse_error`, `turn` and `success`.

Version history:
- v2: the tool's code block is read with CRLF line endings (a ```` ```python\\r\\n ```` fence was not
  found: no code, mask 0, reward 0) and without the indentation of a block indented as a whole, e.g.
  in a markdown list item (v1 ran it as written: an IndentationError, fmt = exec = shape = 0).
- v1: an empty action list (`#### []`, or a tool program printing `[]`) is a format error; it earned
  local 0.6 (planner) and 0.6 (tool) in v0.
- v0: initial release.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ..core.rewards import RewardBreakdown
from ..core.tool_planner import Applied, Mode, MoveListAnswers, ToolPlannerEnv, ToolRun
from . import prompts
from .generator import PlanPathConfig, PlanPathInstance, generate
from .rules import Cell, Simulation, bfs_distances, manhattan, on_shortest_paths, simulate

LAMBDA_PLAN = 0.50
PLANNER_COEF = {"fmt": 0.20, "leg": 0.40, "sp": 0.40}
TOOL_COEF = {"fmt": 0.10, "exec": 0.40, "shape": 0.50}


def planner_feedback(sim: Simulation, answer: list[str], goal: Cell) -> str:
    """What a parsed move list did, for the history of later prompts."""
    text = f"applied {sim.applied} of {len(answer)} moves: {sim.positions[0]} -> {sim.final}"
    if sim.illegal_at is not None:
        text += f"; move {sim.illegal_at + 1} ({answer[sim.illegal_at]}) is blocked (wall or edge), the rest was not applied"
    return text + ("; reached the goal" if sim.final == goal else f"; goal {goal} not reached")


class raw_env(MoveListAnswers, ToolPlannerEnv):
    metadata = {"render_modes": ["human", "ansi"], "name": "plan_path_v2", "is_parallelizable": False}
    has_global_state = True  # state(): the board as text
    instance_namespace = "plan_path"
    prompts = prompts
    fork_shared = (*ToolPlannerEnv.fork_shared, "grid", "to_goal", "board_rows", "position", "d0")

    def __init__(self, mode: Mode = "mas", max_turns: int = 4, height: int = 10, width: int = 10,
                 wall_density: float = 0.22, min_path_length: int = 6, max_path_length: int | None = None,
                 render_mode: str | None = None, sandbox: Any = None):
        self.config = PlanPathConfig(height, width, wall_density, min_path_length, max_path_length)
        super().__init__(mode=mode, max_turns=max_turns, render_mode=render_mode, sandbox=sandbox)

    def _make_instance(self, rng: np.random.Generator) -> PlanPathInstance:
        return generate(rng, self.config)

    def _start_task(self) -> None:
        inst: PlanPathInstance = self.instance
        self.grid = inst.grid
        self.position: Cell = inst.start
        self.to_goal = bfs_distances(inst.grid, inst.goal)
        self.d0 = max(1, manhattan(inst.start, inst.goal))
        walls = inst.grid.walls
        self.board_rows = tuple(
            "".join("G" if (r, c) == inst.goal else "#" if (r, c) in walls else "." for c in range(inst.grid.width))
            for r in range(inst.grid.height)
        )
        """The grid text without the agent (fixed for the episode); `grid_text` places A on it."""

    # ------------------------------------------------------------------ text
    def grid_text(self) -> str:
        """Rows of the grid: A = current position (drawn over G), G = goal, # = wall, . = free."""
        rows = list(self.board_rows)
        r, c = self.position
        if 0 <= r < len(rows) and 0 <= c < len(rows[r]):
            rows[r] = rows[r][:c] + "A" + rows[r][c + 1:]
        return "\n".join(rows)

    def describe_task(self) -> str:
        inst: PlanPathInstance = self.instance
        return (
            f"Find a path on a {self.grid.height}x{self.grid.width} grid from the current position A to the goal G.\n"
            "Moves: U = up (row - 1), D = down (row + 1), L = left (column - 1), R = right (column + 1).\n"
            "You may not move into a wall (#) or off the grid; an illegal move stops the rest of the list.\n"
            "Grid (row 0 at the top, column 0 at the left; A = current position, G = goal, # = wall, . = free):\n"
            f"{self.grid_text()}\n\n"
            f"Current position: {self.position}\nGoal: {inst.goal}\n"
            f"Turn {self.turn + 1} of {self.max_turns}."
        )

    def _render_state(self) -> str:
        return f"{self.grid_text()}\nposition {self.position} goal {self.instance.goal}"

    # ------------------------------------------------------------------ rewards (A.1.4)
    def team_reward(self, before: Cell, after: Cell) -> float:
        if after == self.instance.goal:
            return 1.0
        return max(0.0, (manhattan(before, self.instance.goal) - manhattan(after, self.instance.goal)) / self.d0)

    def score_tool(self, run: ToolRun) -> RewardBreakdown:
        if run.proposal is None:
            terms = {"fmt": 0.0, "exec": 0.0, "shape": 0.0}
            return RewardBreakdown(0.0, terms, TOOL_COEF, mask=0.0 if run.code is None else 1.0, lam=LAMBDA_PLAN)
        sim = simulate(self.grid, self.position, run.proposal)
        goal = self.instance.goal
        terms = {
            "fmt": 1.0,
            "exec": float(sim.illegal_at is None and sim.applied > 0),
            "shape": float(manhattan(sim.final, goal) <= manhattan(self.position, goal)),
        }
        return RewardBreakdown(self.team_reward(self.position, sim.final), terms, TOOL_COEF, mask=1.0, lam=LAMBDA_PLAN)

    def apply_answer(self, answer: Any, error: str | None) -> Applied:
        if answer is None:
            terms = {"fmt": 0.0, "leg": 0.0, "sp": 0.0}
            return Applied(RewardBreakdown(0.0, terms, PLANNER_COEF, mask=1.0, lam=LAMBDA_PLAN), False,
                           f"no valid action list ({error}); still at {self.position}")
        sim = simulate(self.grid, self.position, answer)
        terms = {
            "fmt": 1.0,
            "leg": float(sim.illegal_at is None),
            "sp": float(on_shortest_paths(self.to_goal, sim.positions)),
        }
        team = self.team_reward(self.position, sim.final)
        self.position = sim.final
        feedback = functools.partial(planner_feedback, sim, answer, self.instance.goal)
        return Applied(RewardBreakdown(team, terms, PLANNER_COEF, mask=1.0, lam=LAMBDA_PLAN), self.is_solved(), feedback)

    def is_solved(self) -> bool:
        return self.position == self.instance.goal
