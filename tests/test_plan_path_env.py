"""Plan-Path rules and rewards, with values computed by hand from AT-GRPO appendix A.1.4."""

from __future__ import annotations

import pytest

from llm_marl_envs import plan_path_v1
from llm_marl_envs.plan_path.generator import PlanPathConfig, PlanPathInstance, generate
from llm_marl_envs.plan_path.rules import Grid, bfs_distances, shortest_path, simulate
from llm_marl_envs.core.instances import instance_rng

# A . # .
# . . # G      start (0,0), goal (1,3): shortest path 6 moves, Manhattan d0 = 4
# . . . .
GRID = Grid(3, 4, frozenset({(0, 2), (1, 2)}))
INSTANCE = PlanPathInstance(GRID, (0, 0), (1, 3), 6)


def fresh(mode="mas", **kw):
    env = plan_path_v1.raw_env(mode=mode, **kw)
    env.reset(seed=0, options={"instance": INSTANCE})
    return env


@pytest.mark.parametrize(
    "moves,final,illegal_at",
    [
        (["D", "D", "R"], (2, 1), None),
        (["R", "R", "D"], (0, 1), 1),  # second move hits a wall
        (["L"], (0, 0), 0),  # off the grid
        ([], (0, 0), None),
    ],
)
def test_simulate(moves, final, illegal_at):
    sim = simulate(GRID, (0, 0), moves)
    assert sim.final == final and sim.illegal_at == illegal_at


def test_bfs_and_shortest_path():
    assert bfs_distances(GRID, (1, 3))[(0, 0)] == 6
    path = shortest_path(GRID, (0, 0), (1, 3))
    assert len(path) == 6 and simulate(GRID, (0, 0), path).final == (1, 3)
    assert shortest_path(Grid(2, 2, frozenset({(0, 1), (1, 0)})), (0, 0), (1, 1)) is None


# (answer, team, fmt, leg, sp, reward) with λ = 0.5 and c = (0.2, 0.4, 0.4)
PLANNER_CASES = [
    ("#### [D, D, R]", 0.25, 1, 1, 1, 0.5 * 0.25 + 0.5 * 1.0),
    ("#### [R, R, D]", 0.25, 1, 0, 1, 0.5 * 0.25 + 0.5 * 0.6),
    ("#### [L]", 0.0, 1, 0, 0, 0.5 * 0.2),
    ("#### [D, U]", 0.0, 1, 1, 0, 0.5 * 0.6),
    ("#### [D, D, R, R, R, U]", 1.0, 1, 1, 1, 1.0),
    ("#### [U, X]", 0.0, 0, 0, 0, 0.0),
    ("#### []", 0.0, 0, 0, 0, 0.0),  # no action: A.1.4's format term needs a move (v0 paid 0.3)
    ("#### [ , ]", 0.0, 0, 0, 0, 0.0),
    ("no final answer", 0.0, 0, 0, 0, 0.0),
]


@pytest.mark.parametrize("answer,team,fmt,leg,sp,reward", PLANNER_CASES)
def test_planner_reward_terms(answer, team, fmt, leg, sp, reward):
    env = fresh(mode="planner")
    env.step(answer)
    info = env.infos["planner"]
    assert info["team_reward"] == pytest.approx(team)
    assert info["local_terms"] == {"fmt": fmt, "leg": leg, "sp": sp}
    assert info["reward"] == pytest.approx(reward)
    assert env.rewards["planner"] == pytest.approx(reward)
    assert (info["parse_error"] is None) == bool(fmt)


# (tool reply, fmt, exec, shape, mask, team, reward) with λ = 0.5 and c = (0.1, 0.4, 0.5)
TOOL_CASES = [
    ("```python\nprint('[D, D, R]')\n```", 1, 1, 1, 1, 0.25, 0.5 * 0.25 + 0.5 * 1.0),
    ("```python\nprint('[U]')\n```", 1, 0, 1, 1, 0.0, 0.5 * 0.6),
    ("```python\nprint('[D, U, U]')\n```", 1, 0, 1, 1, 0.0, 0.5 * 0.6),
    ("```python\nprint('[R, D]')\n```", 1, 1, 1, 1, 0.5, 0.5 * 0.5 + 0.5 * 1.0),  # ends on (1,1): d = 2
    ("```python\nraise ValueError('bug')\n```", 0, 0, 0, 1, 0.0, 0.0),
    ("```python\nprint('go right')\n```", 0, 0, 0, 1, 0.0, 0.0),
    ("```python\nprint('[]')\n```", 0, 0, 0, 1, 0.0, 0.0),  # no action (v0 paid 0.3)
    ("I would go down.", 0, 0, 0, 0, 0.0, 0.0),
]


@pytest.mark.parametrize("reply,fmt,exe,shape,mask,team,reward", TOOL_CASES)
def test_tool_reward_terms(reply, fmt, exe, shape, mask, team, reward):
    env = fresh()
    env.step(reply)
    info = env.infos["tool"]
    assert info["local_terms"] == {"fmt": fmt, "exec": exe, "shape": shape}
    assert info["mask"] == mask
    assert info["team_reward"] == pytest.approx(team)
    assert info["reward"] == pytest.approx(reward)
    # The tool's proposal is simulated, never applied.
    assert env.position == (0, 0)
    assert env.agent_selection == "planner"


def test_planner_sees_tool_code_output_and_proposal():
    env = fresh()
    env.step("```python\nprint('[D, D, R]')\n```")
    text = env.observe("planner")["messages"][-1]["content"]
    assert "print('[D, D, R]')" in text
    assert "[ok] [D, D, R]" in text
    assert "Tool proposed action list: [D, D, R]" in text


def test_observation_shows_current_position_after_moves():
    env = fresh()
    env.step("```python\nprint('[D, D, R]')\n```")
    env.step("#### [D, D, R]")
    assert env.turn == 1 and env.agent_selection == "tool"
    task = env.observe("tool")["messages"][-1]["content"]
    assert "Current position: (2, 1)" in task
    grid_rows = task.split(". = free):\n")[1].split("\n\n")[0].splitlines()
    assert grid_rows == ["..#.", "..#G", ".A.."]
    assert "History" in task and "(0, 0) -> (2, 1)" in task


def test_success_terminates_and_budget_truncates():
    env = fresh(mode="planner", max_turns=2)
    env.step("#### [D, D, R, R, R, U]")
    assert env.success and all(env.terminations.values()) and env.infos["planner"]["success"]
    env = fresh(mode="planner", max_turns=2)
    env.step("#### [D]")
    env.step("#### [D]")
    assert not env.success and all(env.truncations.values()) and not any(env.terminations.values())


def test_generator_respects_config_and_is_deterministic():
    config = PlanPathConfig(height=6, width=7, wall_density=0.3, min_path_length=5, max_path_length=9)
    for seed in range(50):
        a = generate(instance_rng("plan_path", "train", seed), config)
        b = generate(instance_rng("plan_path", "train", seed), config)
        assert a == b
        assert (a.grid.height, a.grid.width) == (6, 7)
        assert 5 <= a.shortest_length <= 9
        assert len(shortest_path(a.grid, a.start, a.goal)) == a.shortest_length


@pytest.mark.parametrize(
    "kwargs,fix",
    [
        ({"height": 1}, "at least 2x2"),
        ({"wall_density": 0.95}, "wall_density"),
        ({"min_path_length": 0}, "min_path_length"),
        ({"mode": "solo"}, "mode must be one of"),
        ({"max_turns": 0}, "max_turns"),
    ],
)
def test_bad_config_names_the_fix(kwargs, fix):
    with pytest.raises(ValueError, match=fix):
        plan_path_v1.raw_env(**kwargs)
