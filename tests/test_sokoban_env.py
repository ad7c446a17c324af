"""Sokoban environment: rewards with values computed by hand from AT-GRPO appendix A.1.5, the
observation, termination, and the oracle. The PettingZoo conformance tests, split disjointness and
the 200-instance oracle run are the generic ones in tests/test_env_contract.py."""

from __future__ import annotations

import pytest

from agents import run_episode
from agents.oracle.sokoban import TOOL_PROGRAM, SokobanOracle, parse_board, solve_board, solves
from llm_marl_envs import sokoban_v2
from llm_marl_envs.core.instances import instance_rng
from llm_marl_envs.sokoban.generator import SokobanConfig, SokobanInstance, generate
from llm_marl_envs.sokoban.rules import State
from llm_marl_envs.sokoban.solver import solve

LAMBDA = 0.40

# ######
# #@___#     player (1,1), box (2,2), goal (4,3); optimal 6 moves; psi_0 = -3
# #_$__#
# #____#
# #__._#
# ######
ONE_BOX = "######\n#@___#\n#_$__#\n#____#\n#__._#\n######"
# two boxes, none on a goal; optimal 7 moves
TWO_BOXES = "#######\n#@$_._#\n#_$_._#\n#######"
# two boxes side by side: pushing R from (2,1) is a box collision
SIDE_BY_SIDE = "#######\n#_____#\n#@$$_.#\n#____.#\n#######"
# one of two boxes already on its goal: b_0 / B = 1/2
HALF_DONE = "#######\n#@$_._#\n#_*___#\n#######"


def instance(level: str) -> SokobanInstance:
    state = State.from_xsb(level)
    return SokobanInstance(state, tuple(solve(state)))


def fresh(level: str = ONE_BOX, mode: str = "mas", **kw):
    env = sokoban_v2.raw_env(mode=mode, **kw)
    env.reset(seed=0, options={"instance": instance(level)})
    return env


def mixed(team: float, local: float, mask: float = 1.0) -> float:
    """AT-GRPO A.1.5: r = λ_sok·r_team + (1 − λ_sok)·m·r_loc."""
    return LAMBDA * team + (1 - LAMBDA) * mask * local


def test_hand_made_levels_have_the_expected_optimal_lengths():
    assert instance(ONE_BOX).optimal_length == 6
    assert instance(TWO_BOXES).optimal_length == 7


# (level, answer, team, fmt, leg, dlk); planner c = (0.10, 0.45, 0.45)
PLANNER_CASES = [
    (ONE_BOX, "#### [R, D, D, L, D, R]", 1.0, 1, 1, 1),  # solves it
    (ONE_BOX, "#### [R, D]", 0.0, 1, 1, 1),  # box to (3,2)
    (ONE_BOX, "#### [R, D, D]", 0.0, 1, 1, 1),  # box to (4,2): bottom row holds the goal, not dead
    (ONE_BOX, "#### [R, R, D, L]", 0.0, 1, 1, 0),  # box to (2,1): column 1 has no goal (dead square)
    (ONE_BOX, "#### [D, D, R, U]", 0.0, 1, 1, 0),  # box to (1,2): top wall line
    (ONE_BOX, "#### [D, D, R, U, R, U, L]", 0.0, 1, 1, 0),  # ... then into the corner (1,1)
    (ONE_BOX, "#### [U]", 0.0, 1, 0, 1),  # walks into a wall
    (ONE_BOX, "#### [R, D, U, U]", 0.0, 1, 0, 1),  # 3 moves applied, the 4th hits the wall
    (ONE_BOX, "#### []", 0.0, 0, 0, 0),  # no action: a format error (v0 paid fmt and dlk)
    (ONE_BOX, "#### [right, \"down\"]", 0.0, 1, 1, 1),  # words parse
    (ONE_BOX, "#### [R, X]", 0.0, 0, 0, 0),
    (ONE_BOX, "no final answer", 0.0, 0, 0, 0),
    (TWO_BOXES, "#### [R, R]", 0.5, 1, 1, 1),  # one of two boxes on a goal
    (SIDE_BY_SIDE, "#### [R]", 0.0, 1, 0, 1),  # box into box
    (HALF_DONE, "I cannot decide.", 0.5, 0, 0, 0),  # team is b_k / B of the unchanged board
]


@pytest.mark.parametrize("level,answer,team,fmt,leg,dlk", PLANNER_CASES)
def test_planner_reward_terms(level, answer, team, fmt, leg, dlk):
    env = fresh(level, mode="planner")
    env.step(answer)
    info = env.infos["planner"]
    local = 0.10 * fmt + 0.45 * leg + 0.45 * dlk
    assert info["local_terms"] == {"fmt": fmt, "leg": leg, "dlk": dlk}
    assert info["team_reward"] == pytest.approx(team)
    assert info["local_reward"] == pytest.approx(local)
    assert info["mask"] == 1.0 and info["lambda"] == pytest.approx(LAMBDA)
    assert info["reward"] == pytest.approx(mixed(team, local))
    assert env.rewards["planner"] == pytest.approx(mixed(team, local))
    assert (info["parse_error"] is None) == bool(fmt)


def test_planner_rewards_written_out():
    # A few of the cases above as plain numbers, so a change of coefficient cannot hide.
    for level, answer, reward in [
        (ONE_BOX, "#### [R, D, D, L, D, R]", 1.0),
        (ONE_BOX, "#### [R, D]", 0.6),
        (ONE_BOX, "#### [R, R, D, L]", 0.33),
        (ONE_BOX, "#### [U]", 0.33),
        (TWO_BOXES, "#### [R, R]", 0.8),
        (HALF_DONE, "garbage", 0.2),
    ]:
        env = fresh(level, mode="planner")
        env.step(answer)
        assert env.rewards["planner"] == pytest.approx(reward), answer


def tool(program_output: str) -> str:
    return f"```python\nprint({program_output!r})\n```"


# (level, reply, team, fmt, exec, pot, mask); tool c = (0.10, 0.30, 0.60)
TOOL_CASES = [
    (ONE_BOX, tool("[R, D, D, L, D, R]"), 1.0, 1, 1, 1, 1),
    (ONE_BOX, tool("[R, D]"), 0.0, 1, 1, 1, 1),  # psi -3 -> -2
    (ONE_BOX, tool("[R]"), 0.0, 1, 1, 1, 1),  # walking: psi unchanged, still >=
    (ONE_BOX, tool("[D, D, R, U]"), 0.0, 1, 1, 0, 1),  # box pushed away: psi -3 -> -4
    (ONE_BOX, tool("[U]"), 0.0, 1, 0, 1, 1),  # illegal move
    (ONE_BOX, tool("[]"), 0.0, 0, 0, 0, 1),  # no action: a format error (v0 paid fmt and pot)
    (SIDE_BY_SIDE, tool("[R]"), 0.0, 1, 0, 1, 1),  # box collision
    (TWO_BOXES, tool("[R, R]"), 0.5, 1, 1, 1, 1),
    (ONE_BOX, "```python\nraise ValueError('bug')\n```", 0.0, 0, 0, 0, 1),
    (ONE_BOX, tool("push the box down"), 0.0, 0, 0, 0, 1),
    (HALF_DONE, tool("nothing"), 0.5, 0, 0, 0, 1),
    (ONE_BOX, "I would push it down.", 0.0, 0, 0, 0, 0),  # no program ran: mask 0
]


@pytest.mark.parametrize("level,reply,team,fmt,exe,pot,mask", TOOL_CASES)
def test_tool_reward_terms(level, reply, team, fmt, exe, pot, mask):
    env = fresh(level)
    start = env.board
    env.step(reply)
    info = env.infos["tool"]
    local = 0.10 * fmt + 0.30 * exe + 0.60 * pot
    assert info["local_terms"] == {"fmt": fmt, "exec": exe, "pot": pot}
    assert info["mask"] == mask
    assert info["team_reward"] == pytest.approx(team)
    assert info["reward"] == pytest.approx(mixed(team, local, mask))
    assert (info["parse_error"] is None) == bool(fmt)
    # The proposal is simulated, never applied.
    assert env.board == start
    assert env.agent_selection == "planner"


def test_tool_rewards_written_out():
    for reply, reward in [(tool("[R, D]"), 0.6), (tool("[U]"), 0.42), (tool("[D, D, R, U]"), 0.24), ("no code", 0.0)]:
        env = fresh()
        env.step(reply)
        assert env.rewards["tool"] == pytest.approx(reward), reply


def test_planner_sees_tool_code_output_and_proposal():
    env = fresh()
    env.step(tool("[R, D]"))
    text = env.observe("planner")["messages"][-1]["content"]
    assert "print('[R, D]')" in text
    assert "[ok] [R, D]" in text
    assert "Tool proposed action list: [R, D]" in text
    assert ONE_BOX in text


def test_observation_shows_the_current_board_after_moves():
    env = fresh()
    env.step(tool("[R, D]"))
    env.step("#### [R, D]")
    assert env.turn == 1 and env.agent_selection == "tool"
    task = env.observe("tool")["messages"][-1]["content"]
    assert parse_board(task) == ["######", "#____#", "#_@__#", "#_$__#", "#__._#", "######"]
    assert "Player: (2, 2)" in task and "Boxes: (3, 2)" in task and "Turn 2 of 4" in task
    assert "History" in task and "player (1, 1) -> (2, 2)" in task and "1 push" in task


def test_history_reports_illegal_moves_and_deadlocks():
    env = fresh(mode="planner")
    env.step("#### [R, R, D, L, L]")
    task = env.observe("planner")["messages"][-1]["content"]
    assert "move 5 (L) is illegal (illegal wall)" in task
    assert "move 4 (L) pushed a box into a deadlock" in task


def test_success_terminates_and_budget_truncates():
    env = fresh(mode="planner", max_turns=2)
    env.step("#### [R, D, D, L, D, R]")
    assert env.success and all(env.terminations.values()) and env.infos["planner"]["success"]
    env = fresh(mode="planner", max_turns=2)
    env.step("#### [R]")
    env.step("#### [D]")
    assert not env.success and all(env.truncations.values()) and not any(env.terminations.values())


def test_tool_mode_applies_the_proposal():
    env = fresh(mode="tool")
    env.step(tool("[R, D, D, L, D, R]"))
    assert env.success and env.infos["tool"]["reward"] == pytest.approx(1.0)


def test_render_shows_board_and_count():
    env = sokoban_v2.raw_env(render_mode="ansi")
    env.reset(seed=0, options={"instance": instance(TWO_BOXES)})
    env.step(tool("[R, R]"))
    env.step("#### [R, R]")
    text = env.render()
    assert "#@$_._#" not in text and "#__@*_#" in text and "boxes on goals 1/2" in text


def test_env_arguments_reach_the_generator():
    env = sokoban_v2.env(num_boxes=2, height=7, width=7, inner_walls=3, min_solution_moves=5, max_solution_moves=20)
    env.reset(seed=3, options={"split": "val"})
    inst = env.unwrapped.instance
    assert inst.state.num_boxes == 2 and (inst.state.height, inst.state.width) == (7, 7)
    assert 5 <= inst.optimal_length <= 20


@pytest.mark.parametrize(
    "kwargs,fix",
    [
        ({"height": 2}, "at least 3x3"),
        ({"num_boxes": 0}, "num_boxes"),
        ({"inner_walls": 14}, "lower inner_walls"),
        ({"min_solution_moves": 8, "max_solution_moves": 4}, "max_solution_moves"),
        ({"mode": "solo"}, "mode must be one of"),
        ({"max_turns": 0}, "max_turns"),
    ],
)
def test_bad_config_names_the_fix(kwargs, fix):
    with pytest.raises(ValueError, match=fix):
        sokoban_v2.raw_env(**kwargs)


# ---------------------------------------------------------------- oracle


def test_oracle_search_is_optimal_on_generated_levels():
    for num_boxes in (1, 2):
        config = SokobanConfig(num_boxes=num_boxes)
        for seed in range(30):
            inst = generate(instance_rng("sokoban", "test", seed), config)
            rows = inst.key().split("\n")
            found = solve_board(rows)
            assert found is not None and len(found) == inst.optimal_length
            assert solves(rows, found)
    assert solve_board(["#####", "#$__#", "#_@.#", "#####"]) is None


def test_oracle_tool_program_is_a_real_program():
    board = ONE_BOX.split("\n")
    program = TOOL_PROGRAM.replace("{board}", "\n".join(board))
    compile(program, "main.py", "exec")
    assert "deque" in program and "BOARD" in program and "solve_board" in program


@pytest.mark.parametrize("program", SokobanOracle.PROGRAMS)
@pytest.mark.parametrize("mode", ["mas", "planner", "tool"])
def test_oracle_solves_two_box_levels_in_one_turn(mode, program):
    env = sokoban_v2.env(mode=mode, num_boxes=2)
    for seed in range(5):
        result = run_episode(env, SokobanOracle(program=program), seed=seed, split="test")
        assert result.success and result.turns == 1
        assert sum(result.parse_errors.values()) == 0


def test_the_answer_program_is_one_short_line_and_an_unknown_style_is_refused():
    env = sokoban_v2.env(mode="tool")
    env.reset(seed=0, options={"split": "test"})
    reply = SokobanOracle(program="answer").act("tool", env.observe("tool"))
    moves = ", ".join(env.unwrapped.instance.solution)
    assert reply == f'```python\nprint("[{moves}]")\n```'
    with pytest.raises(ValueError, match="program must be one of search, answer"):
        SokobanOracle(program="bfs")


def test_doc_page_example_is_the_real_observation():
    env = sokoban_v2.env()
    env.reset(seed=0, options={"split": "test"})
    doc = sokoban_v2.__doc__
    block = doc[doc.index("\n\n    ", doc.index("Example observation")):doc.index("Action grammar")]
    example = "\n".join(line[4:] for line in block.strip("\n").splitlines())
    assert example == env.unwrapped.describe_task()
    assert "`[" + ", ".join(env.unwrapped.instance.solution) + "]`" in doc
