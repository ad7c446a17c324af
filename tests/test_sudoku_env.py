"""Sudoku environment: rewards with values computed by hand from AT-GRPO appendix A.1.3, clue
checks, the observation, termination, and the oracle on 4x4, 6x6 and 9x9. The
PettingZoo conformance tests (api/seed/render for every variant), split disjointness over 1,000
instances per split and the 200-instance oracle run are the generic ones in
tests/test_env_contract.py; here api_test also runs on non-default sizes."""

from __future__ import annotations

import pytest
from pettingzoo.test import api_test

from agents import run_episode
from agents.garbage import GARBAGE
from agents.oracle.sudoku import SudokuOracle, is_solution, read_task, solve_sudoku
from llm_marl_envs import sudoku_v1
from llm_marl_envs.sudoku.generator import SudokuInstance
from llm_marl_envs.sudoku.rules import Shape
from llm_marl_envs.sudoku.solver import count_solutions

LAMBDA = 0.60


def g(*rows: str):
    return tuple(tuple(0 if ch == "." else int(ch) for ch in row) for row in rows)


# 1 . | . 2
# . . | . .      4 clues, 12 blanks, unique solution 1342/2413/4231/3124
# ----+----
# . 2 | 3 .
# . . | . .
PUZZLE = g("1..2", "....", ".23.", "....")
SOLUTION = g("1342", "2413", "4231", "3124")
INSTANCE = SudokuInstance(Shape.for_size(4), PUZZLE, SOLUTION)
SOLUTION_JSON = "[[1,3,4,2],[2,4,1,3],[4,2,3,1],[3,1,2,4]]"
# The same grid with digits 1 and 2 swapped: complete and valid, but it changes the clues.
SWAPPED_JSON = "[[2,3,4,1],[1,4,2,3],[4,1,3,2],[3,2,1,4]]"
ALL_STEPS = "[" + ",".join(f"[{r + 1},{c + 1},{SOLUTION[r][c]}]" for r in range(4) for c in range(4) if not PUZZLE[r][c]) + "]"


def fresh(mode: str = "mas", instance: SudokuInstance = INSTANCE, **kw):
    env = sudoku_v1.raw_env(mode=mode, **kw)
    env.reset(seed=0, options={"instance": instance})
    return env


def mixed(team: float, local: float, mask: float = 1.0) -> float:
    """AT-GRPO A.1.3: r = λ_sudoku·r_team + (1 − λ_sudoku)·m·r_loc."""
    return LAMBDA * team + (1 - LAMBDA) * mask * local


@pytest.mark.parametrize("answer", [SOLUTION_JSON, SWAPPED_JSON, ALL_STEPS, "[[1,1,1]]"])
def test_an_instance_with_list_grids_plays_like_the_tuple_one(answer):
    """An instance built by hand with lists (not the generator's tuples) gives the same step."""
    lists = SudokuInstance(INSTANCE.shape, [list(row) for row in PUZZLE], [list(row) for row in SOLUTION])
    envs = [fresh("planner", instance=instance) for instance in (INSTANCE, lists)]
    for env in envs:
        env.step(f"#### {answer}")
    assert envs[0].infos == envs[1].infos and envs[0].grid == envs[1].grid


def test_hand_made_puzzle_is_unique():
    assert count_solutions(PUZZLE, limit=5) == 1


# (answer, team, fmt, legal, prog, mask); planner c = (0.15, 0.55, 0.30)
PLANNER_CASES = [
    (f"All rows, columns and boxes check out.\n#### {SOLUTION_JSON}", 1.0, 1, 1, 12 / 16, 1),  # 0.6 + 0.4·0.925 = 0.97
    (f"#### {ALL_STEPS}", 1.0, 1, 1, 12 / 16, 1),  # the same as fill steps
    ("#### [[1,2,3],[1,3,4]]", 0.0, 1, 1, 2 / 16, 1),  # two correct cells: 0.4·0.7375 = 0.295
    ("#### [[1,3,4,2],[0,0,0,0],[0,2,3,0],[0,0,0,0]]", 0.0, 1, 1, 2 / 16, 1),  # partial grid, 0 = blank
    ("#### [[2,1,4]]", 0.0, 1, 1, 1 / 16, 1),  # legal but wrong digit (the solution has 2): 0.4·0.71875
    ("#### [[1,2,1]]", 0.0, 1, 0, 1 / 16, 1),  # duplicates the clue 1 in row 1: 0.4·0.16875 = 0.0675
    ("#### [[1,1,3]]", 0.0, 1, 0, 0.0, 1),  # changes a clue: rejected whole, 0.4·0.15 = 0.06
    ("#### [[1,2,3],[1,1,4]]", 0.0, 1, 0, 0.0, 1),  # one clue change rejects the correct step too
    (f"#### {SWAPPED_JSON}", 0.0, 1, 0, 0.0, 1),  # a valid grid that changes clues is not a success
    ("#### [[5,1,1]]", 0.0, 0, 0, 0.0, 0),  # out of range: format error, mask 0
    ("#### [[1,3,4,2],[2,4,1,3]]", 0.0, 0, 0, 0.0, 0),  # not 4x4
    ("#### the grid is solved", 0.0, 0, 0, 0.0, 0),
    ("no final answer", 0.0, 0, 0, 0.0, 0),
]


@pytest.mark.parametrize("answer,team,fmt,legal,prog,mask", PLANNER_CASES)
def test_planner_reward_terms(answer, team, fmt, legal, prog, mask):
    env = fresh(mode="planner")
    env.step(answer)
    info = env.infos["planner"]
    local = 0.15 * fmt + 0.55 * legal + 0.30 * prog
    assert info["team_reward"] == pytest.approx(team)
    assert info["local_terms"] == pytest.approx({"fmt": fmt, "legal": legal, "prog": prog})
    assert info["local_reward"] == pytest.approx(local)
    assert info["mask"] == mask and info["lambda"] == LAMBDA
    assert info["reward"] == pytest.approx(mixed(team, local, mask))
    assert env.rewards["planner"] == pytest.approx(mixed(team, local, mask))
    assert (info["parse_error"] is None) == bool(fmt)
    assert env.success == bool(team) and info["success"] == bool(team)


def test_mixed_reward_hand_values():
    # Spelled out once: solving from 12 blanks, two correct cells, a duplicate, a clue change.
    for answer, expected in [(f"#### {SOLUTION_JSON}", 0.97), ("#### [[1,2,3],[1,3,4]]", 0.295),
                             ("#### [[1,2,1]]", 0.0675), ("#### [[1,1,3]]", 0.06), ("#### nothing", 0.0)]:
        env = fresh(mode="planner")
        env.step(answer)
        assert env.rewards["planner"] == pytest.approx(expected), answer


def tool(program: str) -> str:
    return f"```python\n{program}\n```"


# (tool reply, fmt, exec, san, mask, team); tool c = (0.10, 0.20, 0.70)
TOOL_CASES = [
    (tool(f"print('{SOLUTION_JSON}')"), 1, 1, 1, 1, 1.0),  # 0.6 + 0.4 = 1.0
    (tool(f"print({ALL_STEPS})"), 1, 1, 1, 1, 1.0),
    (tool("print([[1, 2, 3]])"), 1, 1, 1, 1, 0.0),  # 0.4
    (tool("print([(1, 2, 3), (2, 2, 4)])"), 1, 1, 1, 1, 0.0),  # tuples: 0.4
    (tool("print([[1, 2, 1]])"), 1, 1, 0, 1, 0.0),  # duplicate: 0.4·0.3 = 0.12
    (tool("print([[1, 1, 3]])"), 1, 0, 0, 1, 0.0),  # changes a clue: 0.4·0.1 = 0.04
    (tool(f"print('{SWAPPED_JSON}')"), 1, 0, 0, 1, 0.0),
    (tool("print('[[1,0,0,2],[0,0,0,0],[0,2,3,0],[0,0,0,0]]')"), 1, 1, 0, 1, 0.0),  # no edit: no san
    (tool("print([[9, 9, 9]])"), 0, 0, 0, 0, 0.0),  # out of range
    (tool("raise ValueError('bug')"), 0, 0, 0, 0, 0.0),  # runtime error
    (tool("print('I could not solve it')"), 0, 0, 0, 0, 0.0),
    ("I would put a 3 in row 1.", 0, 0, 0, 0, 0.0),  # no code block
]


@pytest.mark.parametrize("reply,fmt,exe,san,mask,team", TOOL_CASES)
def test_tool_reward_terms(reply, fmt, exe, san, mask, team):
    env = fresh()
    env.step(reply)
    info = env.infos["tool"]
    local = 0.10 * fmt + 0.20 * exe + 0.70 * san
    assert info["local_terms"] == {"fmt": fmt, "exec": exe, "san": san}
    assert info["mask"] == mask
    assert info["team_reward"] == pytest.approx(team)
    assert info["reward"] == pytest.approx(mixed(team, local, mask))
    assert (info["parse_error"] is None) == bool(fmt)
    # The tool's proposal is simulated, never applied.
    assert env.grid == PUZZLE and not env.success
    assert env.agent_selection == "planner"


def test_tool_mode_applies_the_proposal_as_the_answer():
    env = fresh(mode="tool")
    env.step(tool(f"print('{SOLUTION_JSON}')"))
    assert env.success and all(env.terminations.values())
    assert env.rewards["tool"] == pytest.approx(1.0)
    env = fresh(mode="tool")
    env.step(tool("print([[1, 2, 3]])"))
    assert env.grid[0] == (1, 3, 0, 2) and not env.success and env.agent_selection == "tool"


def test_planner_sees_tool_code_output_and_proposal():
    env = fresh()
    env.step(tool("print([(1, 2, 3)])"))
    text = env.observe("planner")["messages"][-1]["content"]
    assert "print([(1, 2, 3)])" in text
    assert "[ok] [(1, 2, 3)]" in text
    assert "Tool proposed solution: [[1,2,3]]" in text
    assert "#### " in text and "1-based" in text


def test_observation_shows_current_grid_and_clues_after_a_fill():
    env = fresh()
    env.step(tool("print([[1, 2, 3]])"))
    env.step("#### [[1,2,3],[2,1,4]]")
    assert env.turn == 1 and env.agent_selection == "tool"
    task = env.observe("tool")["messages"][-1]["content"]
    assert "1 3 | . 2\n4 . | . ." in task
    assert "Current grid as JSON (0 = blank): [[1,3,0,2],[4,0,0,0],[0,2,3,0],[0,0,0,0]]" in task
    assert "Given clues as JSON (0 = not a clue; these cells cannot be changed): [[1,0,0,2],[0,0,0,0],[0,2,3,0],[0,0,0,0]]" in task
    assert "10 blank cells left" in task and "Turn 2 of 4." in task
    assert "History" in task and "2 newly filled" in task


def test_clue_change_is_rejected_and_reported():
    env = fresh(mode="planner")
    env.step(f"#### {SWAPPED_JSON}")
    assert env.grid == PUZZLE and not env.success
    assert "rejected" in env.history[-1].feedback and "(1, 1) is 1" in env.history[-1].feedback


def test_wrong_digit_can_be_overwritten_next_turn():
    env = fresh(mode="planner")
    env.step("#### [[2,1,4]]")  # wrong: the solution has 2 there
    assert env.rewards["planner"] == pytest.approx(mixed(0, 0.15 + 0.55 + 0.30 / 16))
    env.step(f"#### {SOLUTION_JSON}")
    # 11 cells newly filled (the overwritten one was already filled).
    assert env.infos["planner"]["local_terms"]["prog"] == pytest.approx(11 / 16)
    assert env.success and all(env.terminations.values()) and env.turn == 2


def test_budget_truncates():
    env = fresh(mode="planner", max_turns=2)
    env.step("#### [[1,2,3]]")
    env.step("#### [[1,3,4]]")
    assert not env.success and all(env.truncations.values()) and not any(env.terminations.values())


def test_garbage_replies_earn_the_format_penalty():
    for reply in GARBAGE:
        if "```python" in reply:
            continue  # program behaviour is the sandbox's business (contract tests)
        env = fresh(mode="planner")
        env.step(reply)
        info = env.infos["planner"]
        if info["parse_error"] is None:  # a few garbage strings are well-formed answers
            assert info["local_terms"]["fmt"] == 1.0
        else:
            assert info["local_terms"]["fmt"] == 0.0 and info["reward"] == 0.0


def test_fork_keeps_the_grid_independent():
    env = fresh(mode="planner")
    child = env.fork()
    child.step("#### [[1,2,3]]")
    assert child.grid != env.grid and env.grid == PUZZLE and env.turn == 0


def test_docstring_example_observation_is_current():
    env = sudoku_v1.raw_env()
    env.reset(seed=0, options={"split": "test"})
    task = env.describe_task()
    doc = "\n".join(line[4:] for line in sudoku_v1.__doc__.splitlines())
    assert task in doc
    assert SOLUTION_JSON in sudoku_v1.__doc__  # the documented solution of that instance
    assert env.instance.solution == SOLUTION


# ---------------------------------------------------------------------------------------- oracle
def test_oracle_reads_the_task_and_solves_like_the_solver():
    env = fresh()
    clues, current, box_rows, box_cols = read_task(env.observe("tool")["messages"][-1]["content"])
    assert clues == current == [list(row) for row in PUZZLE] and (box_rows, box_cols) == (2, 2)
    assert solve_sudoku(clues, 2, 2) == [list(row) for row in SOLUTION]
    assert is_solution([list(row) for row in SOLUTION], clues, 2, 2)
    assert not is_solution([[2, 3, 4, 1], [1, 4, 2, 3], [4, 1, 3, 2], [3, 2, 1, 4]], clues, 2, 2)


def test_oracle_planner_rejects_a_wrong_proposal():
    env = fresh()
    env.step(tool(f"print('{SWAPPED_JSON}')"))
    reply = SudokuOracle().act("planner", env.observe("planner"))
    assert "myself" in reply and reply.endswith(SOLUTION_JSON)
    env.step(reply)
    assert env.success


@pytest.mark.parametrize("size,mode,seeds", [(9, "mas", 4), (9, "tool", 2), (9, "planner", 4), (6, "mas", 5)])
def test_oracle_solves_larger_puzzles_in_one_turn(size, mode, seeds):
    env = sudoku_v1.env(size=size, mode=mode)
    for seed in range(seeds):
        result = run_episode(env, SudokuOracle(), seed=seed, split="test")
        assert result.success and result.turns == 1, (size, mode, seed)
        assert sum(result.parse_errors.values()) == 0
        inst = env.unwrapped.instance
        assert env.unwrapped.grid == inst.solution and inst.size == size


@pytest.mark.parametrize("kwargs", [{"size": 9}, {"size": 6, "mode": "planner"}, {"size": 4, "min_clues": 8, "mode": "tool"}])
def test_api_on_other_sizes(kwargs):
    api_test(sudoku_v1.env(**kwargs), num_cycles=20)


@pytest.mark.parametrize(
    "kwargs,fix",
    [
        ({"size": 5}, "no box shape"),
        ({"size": 6, "box_rows": 4}, "does not tile"),
        ({"max_clues": 3}, "at least 4 clues"),
        ({"min_clues": 20}, "min_clues"),
        ({"mode": "solo"}, "mode must be one of"),
        ({"max_turns": 0}, "max_turns"),
    ],
)
def test_bad_config_names_the_fix(kwargs, fix):
    with pytest.raises(ValueError, match=fix):
        sudoku_v1.raw_env(**kwargs)


@pytest.mark.parametrize("size", [4, 6, 8, 9, 12, 16])
def test_board_and_json_templates_draw_what_the_cell_by_cell_rendering_draws(size):
    """`board_text` and `grid_json` fill per-shape templates; they must equal the plain drawing."""
    import numpy as np

    from llm_marl_envs.sudoku.prompts import board_text, grid_json

    shape = Shape.for_size(size)
    width = len(str(size))

    def plain_board(grid):
        lines = []
        for r, row in enumerate(grid):
            if r and r % shape.box_rows == 0:
                lines.append("-+-".join("-" * ((width + 1) * shape.box_cols - 1) for _ in range(size // shape.box_cols)))
            cells = [(str(v) if v else ".").rjust(width) for v in row]
            lines.append(" | ".join(" ".join(cells[b:b + shape.box_cols]) for b in range(0, size, shape.box_cols)))
        return "\n".join(lines)

    rng = np.random.default_rng(size)
    for _ in range(5):
        grid = tuple(tuple(int(v) for v in rng.integers(0, size + 1, size=size)) for _ in range(size))
        assert board_text(grid, shape) == plain_board(grid)
        assert grid_json(grid) == "[" + ",".join("[" + ",".join(map(str, row)) + "]" for row in grid) + "]"
    ragged = grid[:-1] + (grid[-1][:-1],)
    assert board_text(ragged, shape) == plain_board(ragged)
    assert grid_json(ragged) == "[" + ",".join("[" + ",".join(map(str, row)) + "]" for row in ragged) + "]"
