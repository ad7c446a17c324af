"""Plan-Path rules and rewards, with values computed by hand from AT-GRPO appendix A.1.4."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.oracle import make_oracle
from llm_marl_envs import plan_path_v2
from llm_marl_envs.core.text import MAX_MOVES, MOVE_WORDS, extract_code, parse_moves
from llm_marl_envs.plan_path.generator import PlanPathConfig, PlanPathInstance, generate, two_distinct
from llm_marl_envs.plan_path.rules import Grid, bfs_distances, shortest_path, simulate
from llm_marl_envs.core.instances import instance_rng

# A . # .
# . . # G      start (0,0), goal (1,3): shortest path 6 moves, Manhattan d0 = 4
# . . . .
GRID = Grid(3, 4, frozenset({(0, 2), (1, 2)}))
INSTANCE = PlanPathInstance(GRID, (0, 0), (1, 3), 6)


def fresh(mode="mas", **kw):
    env = plan_path_v2.raw_env(mode=mode, **kw)
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


def in_a_list_item(reply: str, indent: str) -> str:
    """`reply` with its code block in a markdown list item: the fences and every non-blank line indented alike."""
    before, fence, block = reply.partition("```")
    return before + "\n\n1. The program:\n\n" + "".join(indent + line if line.strip() else line
                                                     for line in (fence + block).splitlines(True))


@pytest.mark.parametrize("variant", [lambda r: in_a_list_item(r, "   "), lambda r: in_a_list_item(r, "\t"),
                                     lambda r: r.replace("\n", "\r\n"), lambda r: in_a_list_item(r, "  ").replace("\n", "\r\n")],
                         ids=["spaces", "tab", "crlf", "crlf-spaces"])
def test_an_indented_or_crlf_tool_block_earns_what_the_flush_one_does(variant):
    """The oracle's BFS program in a list item or with CRLF line endings is the same program: the same
    proposal, reward and planner prompt (v1: an IndentationError, fmt = exec = shape = 0; a CRLF fence was no code, mask 0)."""
    flush, other = fresh(), fresh()
    reply = make_oracle("plan_path").act("tool", flush.observe("tool"))
    flush.step(reply)
    other.step(variant(reply))
    assert other.infos["tool"] == flush.infos["tool"] and flush.infos["tool"]["reward"] == pytest.approx(1.0)
    assert other.infos["tool"]["proposal"] == "[D, D, R, R, R, U]"
    assert other.observe("planner") == flush.observe("planner")


CODE = "x = 1\nif x:\n    print('[D, D, R]')\n"


@pytest.mark.parametrize("reply", [
    "Steps:\n\n1. Print the path:\n\n   ```python\n   x = 1\n   if x:\n       print('[D, D, R]')\n   ```\n",
    "- item\n\n\t```python\n\tx = 1\n\tif x:\n\t    print('[D, D, R]')\n\t```",
    "Code:\r\n```python\r\nx = 1\r\nif x:\r\n    print('[D, D, R]')\r\n```\r\n",
    "1. Code:\r\n\r\n   ```py\r\n   x = 1\r\n   if x:\r\n       print('[D, D, R]')\r\n   ```",
], ids=["list-item-spaces", "list-item-tab", "crlf", "crlf-list-item"])
def test_extract_code_reads_an_indented_or_crlf_block_as_the_flush_one(reply):
    assert extract_code(reply) == (CODE, None)


def test_extract_code_leaves_a_flush_block_as_written():
    """Dedenting it would empty the whitespace-only line inside its string literal."""
    flush = "```python\ns = \"\"\"a\n   \nb\"\"\"\nif s:\n    print(s)\n```"
    assert extract_code(flush) == (flush[len("```python\n"):-3], None)
    assert extract_code("no code") == (None, "no ```python code block found")


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
        plan_path_v2.raw_env(**kwargs)


def _reference_bfs(grid, source):
    """The plain BFS (dict + deque, per-cell neighbour calls) the flat-array one must agree with."""
    from collections import deque

    dist, queue = {source: 0}, deque([source])
    while queue:
        cell = queue.popleft()
        for _, nxt in grid.neighbours(cell):
            if nxt not in dist:
                dist[nxt] = dist[cell] + 1
                queue.append(nxt)
    return dist


def test_flat_bfs_matches_the_plain_bfs_on_random_grids():
    import numpy as np

    from llm_marl_envs.plan_path.rules import Grid, bfs_distances, flat_bfs, shortest_length

    rng = np.random.default_rng(0)
    for _ in range(300):
        h, w = int(rng.integers(1, 9)), int(rng.integers(1, 9))
        mask = rng.random((h, w)) < rng.random() * 0.6
        grid = Grid(h, w, frozenset((int(r), int(c)) for r, c in zip(*np.nonzero(mask))))
        sources = [(int(rng.integers(h)), int(rng.integers(w))), (-1, 0), (0, w)]  # a wall possibly, and off-grid
        for source in sources:
            assert bfs_distances(grid, source) == _reference_bfs(grid, source)
        source, target = sources[0], (int(rng.integers(h)), int(rng.integers(w)))
        early = flat_bfs(mask.ravel().tolist(), h, w, source[0] * w + source[1], target[0] * w + target[1])
        expected = _reference_bfs(grid, source).get(target, -1 if target != source else 0)
        assert early[target[0] * w + target[1]] == expected
        free = sum(1 << k for k, wall in enumerate(mask.ravel().tolist()) if not wall) | 1 << (source[0] * w + source[1])
        assert shortest_length(free, h, w, source[0] * w + source[1], target[0] * w + target[1]) == expected


@pytest.mark.parametrize("config,digest", [
    (dict(), "23f640013eed257e"),
    (dict(height=4, width=4, wall_density=0.15, min_path_length=2, max_path_length=4), "0be5512a38f7b17d"),
    (dict(height=7, width=13, wall_density=0.3, min_path_length=8), "c553392af9a881b7"),
])
def test_generation_draws_the_same_instances_as_before(config, digest):
    """The flat-array generator keeps v1's instances: digests of 40 seeds x 3 splits recorded before it."""
    from tests.support.digests import instance_digest

    cfg = PlanPathConfig(**config)
    assert instance_digest("plan_path", lambda rng: generate(rng, cfg), seeds=40) == digest


def test_generated_key_is_the_key_built_from_the_walls():
    """`generate` writes each instance's key from its wall mask; it must be the key `key()` builds from
    the grid's walls (the split of an instance depends on it), on square and other grids."""
    import dataclasses

    import numpy as np

    for config in (PlanPathConfig(), PlanPathConfig(height=7, width=13, wall_density=0.3, min_path_length=8),
                   PlanPathConfig(height=12, width=3, wall_density=0.1, min_path_length=2)):
        for seed in range(60):
            inst = generate(np.random.default_rng(seed), config)
            rebuilt = PlanPathInstance(inst.grid, inst.start, inst.goal, inst.shortest_length)
            assert "_key" in inst.__dict__ and "_key" not in rebuilt.__dict__
            assert inst.key() == rebuilt.key() and inst == rebuilt
            moved = dataclasses.replace(inst, start=inst.goal, goal=inst.start)
            assert moved.key() == f"{inst.goal}|{inst.start}|" + inst.key().split("|", 2)[2]


def test_grid_text_draws_every_cell_as_the_cell_by_cell_rendering():
    """`grid_text` places A on rows built once per episode; it must equal the plain per-cell drawing."""
    env = plan_path_v2.raw_env()
    for seed in range(20):
        env.reset(seed=seed)
        inst = env.instance
        for position in [inst.start, inst.goal, *sorted(env.to_goal)[:5]]:
            env.position = position
            plain = "\n".join("".join("A" if (r, c) == position else "G" if (r, c) == inst.goal
                                      else "#" if (r, c) in inst.grid.walls else "." for c in range(inst.grid.width))
                              for r in range(inst.grid.height))
            assert env.grid_text() == plain


def test_two_distinct_draws_what_numpy_choice_draws():
    """The generator's pair of cells must stay the pair `Generator.choice(n, 2, replace=False)` gives
    (which instances exist depends on it): same values and the same generator state afterwards."""
    import numpy as np

    for seed in range(600):
        n = 2 + seed % 120
        ours, numpy_choice = np.random.default_rng(seed), np.random.default_rng(seed)
        for _ in range(3):  # each pair takes three 32-bit draws: every other round starts with one buffered
            ours.random(5), numpy_choice.random(5)
            expected = tuple(int(v) for v in numpy_choice.choice(n, size=2, replace=False))
            assert two_distinct(ours, n) == expected
            assert ours.bit_generator.state == numpy_choice.bit_generator.state


def test_pcg64_pair_draws_are_two_distinct_without_numpy_calls():
    """`_PairDraws` must hand out what `two_distinct` draws from a fresh PCG64 generator between 64-bit
    draws, ranges with heavy rejection included, using the same 64-bit outputs and leaving numpy's spare
    32-bit half empty."""
    import numpy as np

    from llm_marl_envs.plan_path.generator import _PairDraws

    for seed in range(200):
        for n in (2, 3, 4, 77, 78, 128, 1000, 2**31 + 1, 3 * 2**30, 2**32 - 1):  # 2**31 + 1: about half rejected
            numpy_draws, raw_draws = np.random.default_rng(seed), np.random.default_rng(seed)
            pairs = _PairDraws(raw_draws)
            for _ in range(4):
                numpy_draws.random(3), raw_draws.random(3)
                assert pairs.two_distinct(n) == two_distinct(numpy_draws, n), (seed, n)
            assert raw_draws.bit_generator.state["state"] == numpy_draws.bit_generator.state["state"]
            assert raw_draws.bit_generator.state["has_uint32"] == 0


def test_generation_on_another_bit_generator_draws_the_pair_with_numpy(monkeypatch):
    """Only PCG64 hands out 32-bit halves the way `_PairDraws` reads them: any other bit generator gets
    numpy's own `integers` calls."""
    import numpy as np

    from llm_marl_envs.plan_path import generator

    calls = []
    monkeypatch.setattr(generator, "two_distinct", lambda rng, n: calls.append(n) or two_distinct(rng, n))
    generate(np.random.default_rng(0), PlanPathConfig())
    assert calls == []
    for bit_generator in (np.random.MT19937(0), np.random.Philox(0)):
        inst = generate(np.random.Generator(bit_generator), PlanPathConfig())
        assert calls and inst.shortest_length >= PlanPathConfig().min_path_length
        calls.clear()


def _moves_as_specified(text: str, alphabet: str) -> list[str] | None:
    """What `parse_moves` reads, written plainly: the first bracketed list (else the whole text), its
    runs between separators (whitespace, commas, semicolons), each a move word once quotes, backticks
    and dots around it are stripped; None when there is no run, too many, or one that is not a move."""
    m = re.search(r"\[([^\[\]]*)\]", text)
    tokens = re.findall(r"[^\s,;]+", m.group(1) if m else text)
    if not tokens or len(tokens) > MAX_MOVES:
        return None
    moves = [MOVE_WORDS.get(token.strip("'\"`.").upper()) for token in tokens]
    return moves if all(move is not None and move in alphabet for move in moves) else None


_MOVE_PIECES = ["U", "D", "L", "R", "up", "LEFT", "'U'", "`R`.", "UU", "x", "", " ", ",", ";", "\t", "\n", "[", "]",
                "\u00a0", "\u2003", "\x1c", "\x85"]  # Unicode whitespace (str.split and \s split on it) included


@given(st.one_of(st.lists(st.sampled_from(_MOVE_PIECES), max_size=30).map("".join),
                 st.text(alphabet="".join(_MOVE_PIECES) + "dlrpoefgihtw'\"", max_size=60)),
       st.sampled_from(["UDLR", "UD"]))
@settings(max_examples=1500, deadline=None)
def test_move_lists_parse_as_specified(text, alphabet):
    moves, error = parse_moves(text, alphabet)
    assert moves == _moves_as_specified(text, alphabet), text
    assert (moves is None) != (error is None)
