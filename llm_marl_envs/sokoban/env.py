"""Sokoban: push every box onto a goal (AT-GRPO Sec. 5.1; rewards appendix A.1.5; workflow A.3).

| | |
|---|---|
| Creation | `llm_marl_envs.sokoban_v2.env()` / `pettingzoo.make("aec", "llm_marl/Sokoban-v2")` |
| Agents | `tool`, `planner` (mode "mas"); `planner` alone (mode "planner"); `tool` alone (mode "tool") |
| Turn order | tool, planner, tool, planner, ... for up to `max_turns` turns |
| Observation | `{"messages": [chat in OpenAI format], "turn": int}`; the task shows the current board |
| Action | the role's raw reply (`str`) |
| Parallel | no (the planner reads the tool's output) |

Arguments: `mode` ("mas" | "planner" | "tool"), `max_turns` (T, default 4), `height`, `width`
(default 6 x 6, border walls included), `num_boxes` (B, default 1), `inner_walls` (2),
`min_solution_moves` (4), `max_solution_moves` (15; None for no limit), `render_mode`
(None | "ansi" | "human"), `sandbox` (a shared `llm_marl_envs.sandbox.Sandbox`).
`reset(seed, options={"split": "train"|"val"|"test"})`. Levels come from reverse play (pulls from
the solved position) and are verified by an exact BFS solver, which also records the optimal
number of moves (`env.instance.optimal_length`, `env.instance.solution`).

Example observation (the task part of the tool's first prompt, seed 0, split "test"; optimal
solution `[R, U, L, U, R, R]`):

    Push every box onto a goal on this 6x6 Sokoban board.
    Moves: U = up (row - 1), D = down (row + 1), L = left (column - 1), R = right (column + 1).
    Walking into a box pushes it one cell in the same direction. You cannot push a box into a wall or into another box, push two boxes at once, or pull a box. A box pushed into a corner that is not a goal can never be moved out. An illegal move stops the rest of the list.
    Board (row 0 at the top, column 0 at the left; # = wall, _ = floor, . = goal, $ = box, * = box on a goal, @ = player, + = player on a goal):
    ######
    ##___#
    #___.#
    #_$__#
    #@__##
    ######

    Player: (4, 1)
    Boxes: (3, 2)
    Goals: (2, 4)
    Boxes on goals: 0 of 1
    Turn 1 of 4.

Action grammar. Tool: one ```python block whose program prints an action list such as
`[U, R, D, L]`; CRLF line endings are read as newlines, and a block indented as a whole (in a
markdown list item, fences included) loses its common indentation (`core.text.extract_code`).
Planner: reasoning, then a line `#### [U, R, D, L]`. Moves are U/D/L/R (also
`up`/`down`/`left`/`right`, quoted or not, separated by commas or spaces). The list is executed from
the current board; the first illegal move (into a wall, a box into a wall or another box, off the
grid) stops the rest of the list.

Rewards (A.1.5), per agent at turn k: r = λ·r_team + (1-λ)·m·r_loc, λ_sok = 0.40, with B boxes,
b_k of them on goals, and ψ = −Σ_boxes min_goal Manhattan distance:

| term | who | value | coefficient |
|---|---|---|---|
| r_team | both | 1 when every box is on a goal, else b_k / B | λ = 0.40 |
| fmt | planner | answer parses as a non-empty list of U/D/L/R | 0.10 |
| leg | planner | at least one move, and every move is legal (in bounds, not into a wall, pushes OK) | 0.45 |
| dlk | planner | no applied move pushes a box into a static deadlock (DeadlockFree) | 0.45 |
| fmt | tool | printed output parses as a non-empty action list | 0.10 |
| exec | tool | program ran and its list makes no illegal move (and advances) | 0.30 |
| pot | tool | ψ after the list ≥ ψ before | 0.60 |

Masks: the planner's is 1 (grid and deadlock checks always available); the tool's is 1 when its
program ran (execution logs exist), else 0. Interpretations, the same as Plan-Path's: the paper
scores one action per turn; answers here are move lists, so `leg` and `dlk` must hold for every
applied move. An empty list `[]` takes no action, so it is a format error for both roles (A.1.5:
s_fmt = 1{a_k in {U,D,L,R}}; otherwise doing nothing would earn fmt and dlk, or fmt and pot). Static deadlock = a box off the goals in a corner, or on a dead square (a
cell from which no sequence of pushes reaches a goal); this extends the paper's corner test with
the standard wall-line check. The team term is the level at turn k, so an unparsable answer still
earns b_k / B of the unchanged board. The tool's proposal is simulated from the current board
without being applied, and its r_team is the one the proposal would earn if adopted, so its reward
is known at its own step (AT-GRPO Alg. 1 line 10).

Termination: the planner's list leaves every box on a goal (terminated, `success=True`);
truncation after `max_turns` turns. `infos[agent]` holds the breakdown, `parse_error`, `turn` and
`success`.

Version history:
- v2: the tool's code block is read with CRLF line endings (a ```` ```python\\r\\n ```` fence was not
  found: no code, mask 0, reward 0) and without the indentation of a block indented as a whole, e.g.
  in a markdown list item (v1 ran it as written: an IndentationError, fmt = exec = pot = 0).
- v1: an empty action list (`#### []`, or a tool program printing `[]`) is a format error; in v0 it
  parsed and earned local 0.55 (planner: fmt, dlk) and 0.70 (tool: fmt, pot).
- v0: initial release.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ..core.rewards import RewardBreakdown
from ..core.tool_planner import Applied, Mode, MoveListAnswers, ToolPlannerEnv, ToolRun
from . import prompts
from .generator import SokobanConfig, SokobanInstance, generate
from .rules import Outcome, Simulation, State, potential, simulate

LAMBDA_SOK = 0.40
PLANNER_COEF = {"fmt": 0.10, "leg": 0.45, "dlk": 0.45}
TOOL_COEF = {"fmt": 0.10, "exec": 0.30, "pot": 0.60}

LEGEND = "# = wall, _ = floor, . = goal, $ = box, * = box on a goal, @ = player, + = player on a goal"


def team_reward(state: State) -> float:
    """r_team (A.1.5): 1 when every box is on a goal, else b_k / B."""
    return 1.0 if state.solved else state.boxes_on_goal / state.num_boxes


def planner_terms(sim: Simulation) -> dict[str, float]:
    """fmt, leg, dlk of a parsed answer (A.1.5 planner local design, over every applied move)."""
    return {
        "fmt": 1.0,
        "leg": float(sim.applied > 0 and sim.illegal_at is None),
        "dlk": float(sim.deadlock_at is None),
    }


def tool_terms(before: State, sim: Simulation) -> dict[str, float]:
    """fmt, exec, pot of a parsed proposal (A.1.5 tool local design)."""
    return {
        "fmt": 1.0,
        "exec": float(sim.illegal_at is None and sim.applied > 0),
        "pot": float(potential(sim.final) >= potential(before)),
    }


def planner_feedback(before: State, sim: Simulation, answer: list[str]) -> str:
    """What a parsed move list did from `before`, for the history of later prompts."""
    after = sim.final
    text = f"applied {sim.applied} of {len(answer)} moves: player {before.player} -> {after.player}"
    pushes = sum(1 for o in sim.outcomes if o is Outcome.PUSHED)
    if pushes:
        text += f", {pushes} push{'es' if pushes > 1 else ''}"
    if sim.illegal_at is not None:
        outcome = sim.outcomes[sim.illegal_at].value.replace("_", " ")
        text += f"; move {sim.illegal_at + 1} ({answer[sim.illegal_at]}) is illegal ({outcome}), the rest was not applied"
    if sim.deadlock_at is not None:
        text += f"; move {sim.deadlock_at + 1} ({answer[sim.deadlock_at]}) pushed a box into a deadlock (it can no longer reach a goal)"
    return text + ("; every box is on a goal" if after.solved else f"; boxes on goals: {after.boxes_on_goal} of {after.num_boxes}")


class raw_env(MoveListAnswers, ToolPlannerEnv):
    metadata = {"render_modes": ["human", "ansi"], "name": "sokoban_v2", "is_parallelizable": False}
    has_global_state = True  # state(): the board as text
    instance_namespace = "sokoban"
    prompts = prompts
    fork_shared = (*ToolPlannerEnv.fork_shared, "board")

    def __init__(self, mode: Mode = "mas", max_turns: int = 4, height: int = 6, width: int = 6, num_boxes: int = 1,
                 inner_walls: int = 2, min_solution_moves: int = 4, max_solution_moves: int | None = 15,
                 render_mode: str | None = None, sandbox: Any = None):
        self.config = SokobanConfig(height=height, width=width, num_boxes=num_boxes, inner_walls=inner_walls,
                                    min_solution_moves=min_solution_moves, max_solution_moves=max_solution_moves)
        super().__init__(mode=mode, max_turns=max_turns, render_mode=render_mode, sandbox=sandbox)

    def _make_instance(self, rng: np.random.Generator) -> SokobanInstance:
        return generate(rng, self.config)

    def _start_task(self) -> None:
        inst: SokobanInstance = self.instance
        self.board: State = inst.state

    # ------------------------------------------------------------------ text
    def describe_task(self) -> str:
        s = self.board
        return (
            f"Push every box onto a goal on this {s.height}x{s.width} Sokoban board.\n"
            "Moves: U = up (row - 1), D = down (row + 1), L = left (column - 1), R = right (column + 1).\n"
            "Walking into a box pushes it one cell in the same direction. You cannot push a box into a wall or into "
            "another box, push two boxes at once, or pull a box. A box pushed into a corner that is not a goal can "
            "never be moved out. An illegal move stops the rest of the list.\n"
            f"Board (row 0 at the top, column 0 at the left; {LEGEND}):\n"
            f"{s.to_xsb()}\n\n"
            f"Player: {s.player}\n"
            f"Boxes: {', '.join(map(str, sorted(s.boxes)))}\n"
            f"Goals: {', '.join(map(str, sorted(s.goals)))}\n"
            f"Boxes on goals: {s.boxes_on_goal} of {s.num_boxes}\n"
            f"Turn {self.turn + 1} of {self.max_turns}."
        )

    def _render_state(self) -> str:
        s = self.board
        return f"{s.to_xsb()}\nplayer {s.player} | boxes on goals {s.boxes_on_goal}/{s.num_boxes}"

    # ------------------------------------------------------------------ rewards (A.1.5)
    def score_tool(self, run: ToolRun) -> RewardBreakdown:
        if run.proposal is None:
            terms = {"fmt": 0.0, "exec": 0.0, "pot": 0.0}
            return RewardBreakdown(team_reward(self.board), terms, TOOL_COEF, mask=0.0 if run.code is None else 1.0, lam=LAMBDA_SOK)
        sim = simulate(self.board, run.proposal)
        return RewardBreakdown(team_reward(sim.final), tool_terms(self.board, sim), TOOL_COEF, mask=1.0, lam=LAMBDA_SOK)

    def apply_answer(self, answer: Any, error: str | None) -> Applied:
        if answer is None:
            terms = {"fmt": 0.0, "leg": 0.0, "dlk": 0.0}
            return Applied(RewardBreakdown(team_reward(self.board), terms, PLANNER_COEF, mask=1.0, lam=LAMBDA_SOK), False,
                           f"no valid action list ({error}); the board is unchanged, player at {self.board.player}")
        sim = simulate(self.board, answer)
        before, self.board = self.board, sim.final
        breakdown = RewardBreakdown(team_reward(self.board), planner_terms(sim), PLANNER_COEF, mask=1.0, lam=LAMBDA_SOK)
        return Applied(breakdown, self.is_solved(), functools.partial(planner_feedback, before, sim, answer))

    def is_solved(self) -> bool:
        return self.board.solved
