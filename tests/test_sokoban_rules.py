"""Sokoban rules, deadlocks, solver and generator (no PettingZoo, no text prompts)."""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest

from llm_marl_envs.core.instances import instance_rng
from llm_marl_envs.sokoban.generator import SokobanConfig, generate
from llm_marl_envs.sokoban.rules import (
    Outcome,
    State,
    is_deadlocked,
    move_causes_deadlock,
    potential,
    simulate,
    step,
)
from llm_marl_envs.sokoban.solver import solve

# ---------------------------------------------------------------- XSB and state


def test_xsb_round_trip_and_symbols():
    text = "#######\n#_@_$.#\n#_*_+_#\n#######"
    with pytest.raises(ValueError, match="exactly one player"):
        State.from_xsb(text)
    level = "#######\n#_@_$.#\n#_*___#\n#######"
    s = State.from_xsb(level)
    assert s.player == (1, 2)
    assert s.boxes == {(1, 4), (2, 2)}
    assert s.goals == {(1, 5), (2, 2)}
    assert (s.height, s.width) == (4, 7) and (0, 0) in s.walls
    assert s.to_xsb() == level
    assert State.from_xsb(level.replace("_", " ")) == s  # space and underscore are both floor
    assert s.to_xsb(floor=" ") == level.replace("_", " ")


@pytest.mark.parametrize(
    "level,error",
    [
        ("", "empty"),
        ("#####\n#@$_#\n#####", "as many boxes as goals"),
        ("#####\n#@_.#\n#####", "as many boxes as goals"),
        ("#####\n#@$x.#\n#####", "unknown Sokoban symbol"),
        ("#####\n#_$.#\n#####", "exactly one player"),
    ],
)
def test_malformed_levels_raise(level, error):
    with pytest.raises(ValueError, match=error):
        State.from_xsb(level)


def test_state_is_hashable_and_immutable():
    a = State.from_xsb("#####\n#@$.#\n#####")
    b = State.from_xsb("#####\n#@$.#\n#####")
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    with pytest.raises(AttributeError):
        a.player = (0, 0)  # type: ignore[misc]


def test_counts_and_potential():
    s = State.from_xsb("########\n#@$_.*_#\n#__$__.#\n########")
    # boxes (1,2) (1,5 on goal) (2,3); goals (1,4) (1,5) (2,6)
    assert (s.num_boxes, s.boxes_on_goal, s.solved) == (3, 1, False)
    # ψ = -(min dist of (1,2): 2) - 0 - (min dist of (2,3): to (1,4) = 2)
    assert potential(s) == -4
    solved = State.from_xsb("#####\n#@_*#\n#####")
    assert solved.solved and solved.boxes_on_goal == 1 and potential(solved) == 0


# ---------------------------------------------------------------- moves and pushes

LEVEL = (
    "#######\n"
    "#__#__#\n"
    "#_$@$$#\n"
    "#___..#\n"
    "##.####"
)
# rows: 1 = floor with a wall at (1,3); 2 = boxes (2,2) (2,4) (2,5), player (2,3); 3 = goals (3,4) (3,5);
# 4 = a goal (4,2) on the bottom edge.


@pytest.mark.parametrize(
    "player,move,outcome,new_player,moved_box",
    [
        ((2, 3), "U", Outcome.ILLEGAL_WALL, (2, 3), None),  # walk into a wall
        ((2, 3), "D", Outcome.MOVED, (3, 3), None),
        ((2, 3), "L", Outcome.PUSHED, (2, 2), ((2, 2), (2, 1))),
        ((2, 3), "R", Outcome.ILLEGAL_BOX_COLLISION, (2, 3), None),  # box into box
        ((3, 3), "U", Outcome.MOVED, (2, 3), None),
        ((1, 4), "D", Outcome.PUSHED, (2, 4), ((2, 4), (3, 4))),  # onto a goal
        ((1, 5), "D", Outcome.PUSHED, (2, 5), ((2, 5), (3, 5))),
        ((1, 2), "D", Outcome.PUSHED, (2, 2), ((2, 2), (3, 2))),
        ((2, 1), "R", Outcome.PUSHED, (2, 2), ((2, 2), (2, 3))),
        ((1, 1), "L", Outcome.ILLEGAL_WALL, (1, 1), None),
        ((3, 2), "D", Outcome.MOVED, (4, 2), None),
    ],
)
def test_step_table(player, move, outcome, new_player, moved_box):
    s = State.from_xsb(LEVEL).with_player(player)
    nxt, got = step(s, move)
    assert got is outcome
    assert nxt.player == new_player
    if moved_box is None:
        assert nxt.boxes == s.boxes
    else:
        old, new = moved_box
        assert nxt.boxes == (s.boxes - {old}) | {new}
    if not outcome.legal:
        assert nxt is s


def test_out_of_bounds_walk_and_push():
    s = State.from_xsb("#_##\n#@$.\n####")
    assert step(s.with_player((0, 1)), "U")[1] is Outcome.OUT_OF_BOUNDS
    # push the box off the right edge: player (1,1) -> box (1,2) -> (1,3) goal; again -> off grid
    s1, o1 = step(s, "R")
    assert o1 is Outcome.PUSHED and s1.solved
    s2, o2 = step(s1, "R")
    assert o2 is Outcome.OUT_OF_BOUNDS and s2 is s1


def test_step_rejects_unknown_move():
    with pytest.raises(ValueError, match="unknown move"):
        step(State.from_xsb("#####\n#@$.#\n#####"), "X")


def test_simulate_stops_at_first_illegal_move():
    s = State.from_xsb("######\n#@$_.#\n######")
    sim = simulate(s, ["R", "U", "R"])
    assert sim.applied == 1 and sim.illegal_at == 1 and sim.final.boxes == {(1, 3)}
    assert [o.value for o in sim.outcomes] == ["pushed", "illegal_wall"]
    sim = simulate(s, ["R", "R"])
    assert sim.illegal_at is None and sim.final.solved and sim.deadlock_at is None


# ---------------------------------------------------------------- deadlocks

OPEN_ROOM = (
    "#######\n"
    "#_____#\n"
    "#_$___#\n"
    "#_@___#\n"
    "#___._#\n"
    "#######"
)


@pytest.mark.parametrize(
    "level,player,move,causes,reason",
    [
        # push the box against the top wall: row 1 has no goal -> dead square (not a corner)
        (OPEN_ROOM, (3, 2), "U", True, "wall line without a goal"),
        # same push with a goal on that wall line: still live
        (OPEN_ROOM.replace("#_____#\n#_$", "#____.#\n#_$").replace("#___._#", "#_____#"), (3, 2), "U", False, "goal on the wall line"),
        # push the box into the top-left corner
        ("#####\n#_$@#\n#___#\n#__.#\n#####", (1, 3), "L", True, "corner"),
        # a corner that is a goal is fine
        ("#####\n#.$@#\n#___#\n#####", (1, 3), "L", False, "corner goal"),
        # pushing away from walls, or walking, never causes a deadlock
        (OPEN_ROOM, (2, 1), "R", False, "push into the open"),
        (OPEN_ROOM, (3, 2), "D", False, "walk"),
        (OPEN_ROOM, (3, 2), "L", False, "walk"),
    ],
)
def test_move_causes_deadlock(level, player, move, causes, reason):
    s = State.from_xsb(level).with_player(player)
    assert move_causes_deadlock(s, move) is causes, reason
    nxt, outcome = step(s, move)
    assert outcome.legal
    assert is_deadlocked(nxt) is causes


def test_is_deadlocked_static_cases():
    corner = State.from_xsb("#####\n#$__#\n#_@.#\n#####")
    assert corner.board.is_corner((1, 1)) and is_deadlocked(corner)
    on_goal_corner = State.from_xsb("#####\n#*__#\n#_@_#\n#####")
    assert not is_deadlocked(on_goal_corner)
    # (1,2) on the top wall line of OPEN_ROOM is dead but not a corner; (2,2) is live
    board = State.from_xsb(OPEN_ROOM).board
    assert (1, 2) in board.dead_squares and not board.is_corner((1, 2))
    assert (2, 2) not in board.dead_squares and (4, 4) not in board.dead_squares
    # whole border ring of the 5x5 floor is dead except the goal's own row/column lines
    assert {(1, 1), (1, 5), (4, 1), (4, 5)} <= board.dead_squares
    assert (4, 2) not in board.dead_squares  # bottom row holds the goal (4,4): live
    assert not is_deadlocked(State.from_xsb(OPEN_ROOM))


def test_illegal_push_is_not_a_deadlock():
    s = State.from_xsb("######\n#@$$.#\n#___.#\n######")
    assert not move_causes_deadlock(s, "R")


# ---------------------------------------------------------------- solver


def reference_bfs(state: State, limit: int = 200_000) -> int | None:
    """An independent optimal-length check: plain BFS over State objects with rules.step."""
    seen, queue = {state}, deque([(state, 0)])
    while queue:
        s, d = queue.popleft()
        if s.solved:
            return d
        if len(seen) > limit:
            return None
        for move in "UDLR":
            nxt, outcome = step(s, move)
            if outcome.legal and nxt not in seen:
                seen.add(nxt)
                queue.append((nxt, d + 1))
    return None


SOLVER_LEVELS = [
    ("#####\n#@$.#\n#####", 1),
    ("######\n#@$_.#\n######", 2),
    ("######\n#.$@_#\n######", 1),
    ("######\n#@___#\n#_$__#\n#____#\n#__._#\n######", 6),
    ("#######\n#@$_._#\n#_$_._#\n#######", 7),
    ("#####\n#@_*#\n#####", 0),
    ("######\n#_.__#\n#_$@_#\n#____#\n######", 3),  # walk below the box, push it up
    ("#####\n#$__#\n#_@.#\n#####", None),  # box in a non-goal corner
    ("######\n#@$$.#\n#___.#\n######", None),  # top row boxes: the left one can never reach a goal
]


@pytest.mark.parametrize("level,optimal", SOLVER_LEVELS)
def test_solver_optimal_lengths(level, optimal):
    s = State.from_xsb(level)
    solution = solve(s)
    if optimal is None:
        assert solution is None
        assert reference_bfs(s) is None
        return
    assert solution is not None and len(solution) == optimal
    assert simulate(s, solution).final.solved and simulate(s, solution).illegal_at is None
    assert reference_bfs(s) == optimal


def test_solver_node_budget():
    s = State.from_xsb("######\n#@___#\n#_$__#\n#____#\n#__._#\n######")
    assert solve(s, max_nodes=3) is None
    assert solve(s, max_nodes=10_000) is not None


# ---------------------------------------------------------------- generator


@pytest.mark.parametrize("num_boxes", [1, 2])
def test_generated_levels_are_solvable_and_optimal(num_boxes):
    config = SokobanConfig(num_boxes=num_boxes)
    lengths = []
    for seed in range(200 if num_boxes == 1 else 60):
        inst = generate(instance_rng("sokoban_test", "train", seed), config)
        s = inst.state
        assert (s.height, s.width, s.num_boxes) == (6, 6, num_boxes)
        assert not s.solved and not is_deadlocked(s)
        assert config.min_solution_moves <= inst.optimal_length <= config.max_solution_moves
        sim = simulate(s, inst.solution)
        assert sim.illegal_at is None and sim.final.solved
        solved = solve(s)
        assert solved is not None and len(solved) == inst.optimal_length
        lengths.append(inst.optimal_length)
        assert State.from_xsb(inst.key()) == s
    if num_boxes == 1:
        # cross-check a sample against the independent BFS
        for seed in range(20):
            inst = generate(instance_rng("sokoban_test", "train", seed), config)
            assert reference_bfs(inst.state) == inst.optimal_length
    assert np.mean(lengths) >= 5  # not all trivial
    assert len(set(lengths)) >= 4


def test_generator_is_deterministic_and_uses_only_its_rng():
    config = SokobanConfig(num_boxes=2)
    a = [generate(instance_rng("sokoban", "val", s), config) for s in range(10)]
    np.random.seed(123)  # the global RNG must not matter
    b = [generate(instance_rng("sokoban", "val", s), config) for s in range(10)]
    assert a == b
    assert len({inst.key() for inst in a}) == 10


def test_generator_respects_size_and_walls():
    config = SokobanConfig(height=7, width=8, num_boxes=2, inner_walls=4, min_solution_moves=6, max_solution_moves=20)
    for seed in range(20):
        inst = generate(np.random.default_rng(seed), config)
        s = inst.state
        assert (s.height, s.width) == (7, 8)
        inner = {w for w in s.walls if 0 < w[0] < 6 and 0 < w[1] < 7}
        assert len(inner) == 4
        assert 6 <= inst.optimal_length <= 20


@pytest.mark.parametrize(
    "kwargs,fix",
    [
        ({"height": 2}, "at least 3x3"),
        ({"num_boxes": 0}, "num_boxes"),
        ({"inner_walls": 15}, "lower inner_walls"),
        ({"inner_walls": -1}, "inner_walls"),
        ({"min_solution_moves": 0}, "min_solution_moves"),
        ({"min_solution_moves": 9, "max_solution_moves": 5}, "max_solution_moves"),
        ({"pull_probability": 0.0}, "pull_probability"),
    ],
)
def test_bad_config_names_the_fix(kwargs, fix):
    with pytest.raises(ValueError, match=fix):
        SokobanConfig(**kwargs)


def test_impossible_config_raises_clearly():
    with pytest.raises(ValueError, match="loosen"):
        generate(np.random.default_rng(0), SokobanConfig(height=4, width=4, inner_walls=0, min_solution_moves=30, max_solution_moves=None))


def _per_cell_xsb(state, floor="_"):
    """The plain per-cell drawing `to_xsb` must reproduce (wall > player > box > goal > floor)."""
    rows = []
    for r in range(state.height):
        row = ""
        for c in range(state.width):
            goal = (r, c) in state.board.goals
            if (r, c) in state.board.walls:
                row += "#"
            elif (r, c) == state.player:
                row += "+" if goal else "@"
            elif (r, c) in state.boxes:
                row += "*" if goal else "$"
            else:
                row += "." if goal else floor
        rows.append(row)
    return "\n".join(rows)


def test_to_xsb_matches_the_per_cell_drawing():
    import numpy as np

    from llm_marl_envs.sokoban.rules import Board, State

    rng = np.random.default_rng(0)
    for _ in range(300):
        h, w = int(rng.integers(3, 8)), int(rng.integers(3, 8))
        cells = [(r, c) for r in range(h) for c in range(w)]
        pick = lambda p: frozenset(cell for cell in cells if rng.random() < p)
        walls, goals, boxes = pick(0.3), pick(0.2), pick(0.2)
        player = cells[int(rng.integers(len(cells)))]  # may sit on a wall, a box or a goal
        state = State(Board(h, w, walls, goals), boxes, player)
        for floor in ("_", " "):
            assert state.to_xsb(floor) == _per_cell_xsb(state, floor)


def test_generation_draws_the_same_instances_as_before():
    """Instance keys are XSB text: the cached-board drawing keeps v1's instances (digest recorded on main)."""
    from tests.support.digests import instance_digest

    assert instance_digest("sokoban", lambda rng: generate(rng, SokobanConfig()), seeds=30) == "60dee9b3d95b2200"
