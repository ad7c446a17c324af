"""Sudoku rules, exact solver, generator and answer parser (no PettingZoo).

Uniqueness of generated puzzles is checked by solvers that share no code with ours: a brute-force
enumeration of all 288 complete 4x4 grids, and a set-based backtracker for 9x9.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_marl_envs.core.instances import instance_rng
from llm_marl_envs.sudoku.generator import SudokuConfig, SudokuInstance, generate
from llm_marl_envs.sudoku.parse import MAX_STEPS, SudokuAnswer, parse_answer
from llm_marl_envs.sudoku.rules import (
    Shape, apply_grid, apply_steps, conflicts, is_complete, is_solved, is_valid, keeps_clues, progress,
)
from llm_marl_envs.sudoku.solver import count_solutions, random_solution, solve


def g(*rows: str):
    """A grid from strings of digits, '.' for blank."""
    return tuple(tuple(0 if ch == "." else int(ch) for ch in row) for row in rows)


S4 = Shape.for_size(4)
S9 = Shape.for_size(9)
SOLUTION4 = g("1234", "3412", "2143", "4321")
CLUES4 = g("1...", "..1.", ".1..", "...1")  # not unique; fine for rule tests

# A classic 9x9 puzzle and its unique solution.
PUZZLE9 = g("53..7....", "6..195...", ".98....6.", "8...6...3", "4..8.3..1", "7...2...6", ".6....28.", "...419..5", "....8..79")
SOLUTION9 = g("534678912", "672195348", "198342567", "859761423", "426853791", "713924856", "961537284", "287419635", "345286179")
# Arto Inkala's "hardest" puzzle: unique, deep search.
HARD9 = g("8........", "..36.....", ".7..9.2..", ".5...7...", "....457..", "...1...3.", "..1....68", "..85...1.", ".9....4..")


# ---------------------------------------------------------------------------------------- shape
@pytest.mark.parametrize("size,boxes", [(4, (2, 2)), (6, (2, 3)), (8, (2, 4)), (9, (3, 3)), (12, (3, 4))])
def test_default_box_shapes(size, boxes):
    shape = Shape.for_size(size)
    assert (shape.box_rows, shape.box_cols) == boxes and shape.size == size


@pytest.mark.parametrize("kwargs,fix", [
    ({"size": 5}, "no box shape"),
    ({"size": 3}, "no box shape"),
    ({"size": 6, "box_rows": 4}, "does not tile"),
    ({"size": 6, "box_rows": 1, "box_cols": 6}, "at least 2x2"),
    ({"size": 25}, "larger than"),
])
def test_bad_shapes_name_the_fix(kwargs, fix):
    with pytest.raises(ValueError, match=fix):
        Shape.for_size(**kwargs)


def test_explicit_box_shape_and_box_index():
    shape = Shape.for_size(6, box_rows=3)
    assert (shape.box_rows, shape.box_cols) == (3, 2)
    assert [shape.box_of(0, c) for c in range(6)] == [0, 0, 1, 1, 2, 2]
    assert shape.box_of(3, 0) == 3
    assert len(shape.units()) == 18 and all(len(u) == 6 for u in shape.units())
    assert len(S9.peers(4, 4)) == 20


# ---------------------------------------------------------------------------------------- validity
@pytest.mark.parametrize("grid,bad", [
    (SOLUTION4, set()),
    (g("12..", "....", "....", "...."), set()),
    (g("1.1.", "....", "....", "...."), {(0, 0), (0, 2)}),  # row
    (g("2...", "....", "....", "2..."), {(0, 0), (3, 0)}),  # column
    (g("3...", ".3..", "....", "...."), {(0, 0), (1, 1)}),  # box
    (g("....", "....", "..4.", "...."), set()),
])
def test_conflicts(grid, bad):
    assert conflicts(grid, S4) == bad
    assert is_valid(grid, S4) == (not bad)


def test_solved_requires_complete_valid_and_clues_kept():
    assert is_solved(SOLUTION4, CLUES4, S4)
    assert not is_solved(g("1234", "3412", "2143", "432."), CLUES4, S4)  # incomplete
    assert not is_solved(g("1234", "3412", "2143", "4312"), CLUES4, S4)  # duplicates
    # A different valid complete grid that changes a clue is not a solution.
    other = g("2143", "4321", "1234", "3412")
    assert is_complete(other) and is_valid(other, S4)
    assert not keeps_clues(other, CLUES4) and not is_solved(other, CLUES4, S4)
    assert is_solved(SOLUTION9, PUZZLE9, S9)


def test_progress_counts_newly_filled_cells_over_n_squared():
    before = g("1...", "....", "....", "....")
    after = g("12..", "3...", "....", "...4")
    assert progress(before, after) == pytest.approx(3 / 16)
    assert progress(after, before) == 0.0
    assert progress(SOLUTION4, SOLUTION4) == 0.0


# ---------------------------------------------------------------------------------------- applying answers
START = g("1...", "..1.", ".1..", "....")


@pytest.mark.parametrize("steps,after,out_of_range,clue_changes,edited", [
    ([(1, 2, 2)], g("12..", "..1.", ".1..", "...."), 0, (), ((0, 1),)),
    ([(1, 2, 2), (1, 2, 3)], g("13..", "..1.", ".1..", "...."), 0, (), ((0, 1),)),  # later step overwrites
    ([(1, 1, 1)], START, 0, (), ()),  # a clue's own value: harmless no-op
    ([(1, 1, 2)], START, 0, ((0, 0),), ()),  # overwrite a clue: rejected as a whole
    ([(4, 4, 2), (2, 3, 3)], START, 0, ((1, 2),), ()),  # one clue change rejects every step
    ([(0, 1, 2)], START, 1, (), ()),  # 1-based indices
    ([(5, 1, 2)], START, 1, (), ()),
    ([(1, 2, 5)], START, 1, (), ()),
    ([(1, 2, 0)], START, 1, (), ()),
    ([(1, 2, -3), (9, 9, 9)], START, 2, (), ()),
    ([(1, 2, 1)], g("11..", "..1.", ".1..", "...."), 0, (), ((0, 1),)),  # illegal placement is applied
])
def test_apply_steps(steps, after, out_of_range, clue_changes, edited):
    app = apply_steps(START, START, steps, S4)
    assert app.after == after
    assert len(app.out_of_range) == out_of_range
    assert app.clue_changes == clue_changes
    assert app.edited == edited
    assert app.applied == (not out_of_range and not clue_changes)
    assert app.blanks == sum(v == 0 for row in after for v in row)


def test_apply_steps_reports_illegal_placements_and_allows_fixing_them():
    app = apply_steps(START, START, [(1, 2, 1), (1, 3, 2)], S4)
    assert app.edited_conflicts(S4) == [(0, 1)]  # the 1 duplicates the clue in row 1 and box 1
    assert app.progress == pytest.approx(2 / 16)
    fixed = apply_steps(app.after, START, [(1, 2, 3)], S4)
    assert fixed.applied and fixed.edited_conflicts(S4) == [] and fixed.progress == 0.0


@pytest.mark.parametrize("new,applied,why", [
    (SOLUTION4, True, None),
    (g("2143", "4321", "1234", "3412"), False, "clue"),  # valid and complete, but changes the clues
    (g("1...", "..1.", ".1..", "...2"), True, None),
    (g("1...", "..1.", ".1..", "...5"), False, "range"),
    (g("1..", "..1", ".1."), False, "range"),
    (g(".234", "..1.", ".1..", "...."), False, "clue"),  # blanking a clue changes it
])
def test_apply_grid(new, applied, why):
    app = apply_grid(START, START, new, S4)
    assert app.applied == applied
    assert app.blanks == sum(v == 0 for row in app.after for v in row)
    if why == "clue":
        assert app.clue_changes and app.after == START
    if why == "range":
        assert app.out_of_range and app.after == START
    if applied:
        assert app.after == new
        assert app.edited == tuple((r, c) for r in range(4) for c in range(4) if new[r][c] != START[r][c])
        assert app.progress == progress(START, new)
    if why != "range":  # the environment's path: an answer already parsed and range-checked gives the same result
        assert apply_grid(START, START, new, S4, checked=True) == app
        assert apply_grid(START, START, new, S4, checked=True, digits=bytes(itertools.chain.from_iterable(new))) == app


@given(st.sampled_from([4, 6, 9]), st.data())
@settings(max_examples=300, deadline=None)
def test_apply_grid_on_the_parsers_digits_is_the_cell_by_cell_path(size, data):
    """With the parser's bytes of the answer, `apply_grid` compares whole integers; it must give what the
    cell-by-cell path gives: answers that keep the clues or change some, blanks, erasures and overwrites."""
    shape = Shape.for_size(size)
    cells = st.integers(0, size)
    clues = tuple(tuple(data.draw(st.sampled_from([0, 0, v])) for v in row) for row in
                  [[data.draw(cells) for _ in range(size)] for _ in range(size)])
    keep = lambda drawn: tuple(tuple(c or v for c, v in zip(crow, row)) for crow, row in zip(clues, drawn))
    grid = keep([[data.draw(cells) for _ in range(size)] for _ in range(size)])  # the state keeps every clue
    new = [[data.draw(cells) for _ in range(size)] for _ in range(size)]
    new = keep(new) if data.draw(st.booleans()) else tuple(map(tuple, new))  # often an answer that keeps them
    expected = apply_grid(grid, clues, new, shape, checked=True)
    assert expected.blanks == sum(v == 0 for row in expected.after for v in row)
    assert apply_grid(grid, clues, new, shape, checked=True, digits=bytes(itertools.chain.from_iterable(new))) == expected


# ---------------------------------------------------------------------------------------- solver
def test_solver_known_puzzles():
    assert solve(PUZZLE9) == SOLUTION9
    assert count_solutions(PUZZLE9) == 1
    solution = solve(HARD9)
    assert solution is not None and is_solved(solution, HARD9, S9)
    assert count_solutions(HARD9, limit=5) == 1


def test_solver_counts_zero_and_many():
    # Givens that already clash: no solution.
    assert count_solutions(g("11..", "....", "....", "....")) == 0
    # Consistent givens but no completion: cell (1,2) sees 1, 2 in its row and 3, 4 in its column.
    dead = g("1.2.", "....", ".4..", ".3..")
    assert count_solutions(dead) == 0 and solve(dead) is None
    # The empty 4x4 grid has exactly 288 completions (the number of 4x4 Sudoku grids).
    assert count_solutions(g("....", "....", "....", "...."), limit=10_000) == 288
    assert count_solutions(CLUES4, limit=10) >= 2
    two = tuple(row if r < 7 else (0,) * 9 for r, row in enumerate(SOLUTION9))  # last two rows blank: 2+ ways
    assert count_solutions(two, limit=10) >= 2
    assert count_solutions(SOLUTION9) == 1


def test_random_solution_uses_only_the_given_generator():
    a = random_solution(S9, np.random.default_rng(3))
    b = random_solution(S9, np.random.default_rng(3))
    c = random_solution(S9, np.random.default_rng(4))
    assert a == b != c
    assert is_complete(a) and is_valid(a, S9)
    state = np.random.get_state()[1].copy()
    random_solution(Shape.for_size(6), np.random.default_rng(0))
    assert (np.random.get_state()[1] == state).all()


# ---------------------------------------------------------------------------------------- independent checkers
def _all_4x4_grids() -> list[tuple[int, ...]]:
    """Every complete 4x4 Sudoku grid, flattened, by brute force over row permutations."""
    perms = list(itertools.permutations(range(1, 5)))
    grids = []
    for rows in itertools.product(perms, repeat=4):
        if any(len({rows[r][c] for r in range(4)}) != 4 for c in range(4)):
            continue
        if any(len({rows[br + i][bc + j] for i in range(2) for j in range(2)}) != 4 for br in (0, 2) for bc in (0, 2)):
            continue
        grids.append(tuple(v for row in rows for v in row))
    return grids


ALL_4X4 = _all_4x4_grids()


def brute_force_4x4(puzzle) -> list[tuple[int, ...]]:
    clues = [(i, v) for i, v in enumerate(v for row in puzzle for v in row) if v]
    return [grid for grid in ALL_4X4 if all(grid[i] == v for i, v in clues)]


def set_backtracker(puzzle, box_rows: int, box_cols: int, limit: int = 2) -> list[list[list[int]]]:
    """A second, deliberately different solver: Python sets, fewest-candidates cell, no bitmasks."""
    n = len(puzzle)
    grid = [list(row) for row in puzzle]
    found: list[list[list[int]]] = []

    def candidates(r: int, c: int) -> set[int]:
        used = set(grid[r]) | {grid[i][c] for i in range(n)}
        br, bc = r - r % box_rows, c - c % box_cols
        used |= {grid[br + i][bc + j] for i in range(box_rows) for j in range(box_cols)}
        return set(range(1, n + 1)) - used

    def search() -> None:
        empties = [(r, c) for r in range(n) for c in range(n) if grid[r][c] == 0]
        if not empties:
            found.append([row[:] for row in grid])
            return
        best: tuple[int, int, set[int]] | None = None
        for r, c in empties:
            cands = candidates(r, c)
            if best is None or len(cands) < len(best[2]):
                best = (r, c, cands)
                if len(cands) <= 1:
                    break
        r, c, cands = best
        for v in sorted(cands):
            grid[r][c] = v
            search()
            grid[r][c] = 0
            if len(found) >= limit:
                return

    search()
    return found


def test_brute_force_enumerator_is_right():
    assert len(ALL_4X4) == 288
    assert brute_force_4x4(SOLUTION4) == [tuple(v for row in SOLUTION4 for v in row)]


def test_300_generated_4x4_puzzles_have_exactly_one_solution():
    config = SudokuConfig(size=4)
    for seed in range(300):
        inst = generate(instance_rng("sudoku", "train", seed), config)
        completions = brute_force_4x4(inst.puzzle)
        assert completions == [tuple(v for row in inst.solution for v in row)], f"seed {seed}: {inst.key()}"
        assert keeps_clues(inst.solution, inst.puzzle) and is_solved(inst.solution, inst.puzzle, S4)


def test_30_generated_9x9_puzzles_have_exactly_one_solution():
    config = SudokuConfig(size=9)
    for seed in range(30):
        inst = generate(instance_rng("sudoku", "test", seed), config)
        assert count_solutions(inst.puzzle, S9, limit=2) == 1
        assert set_backtracker(inst.puzzle, 3, 3) == [[list(row) for row in inst.solution]], f"seed {seed}"
        assert is_solved(inst.solution, inst.puzzle, S9)
        assert 17 <= inst.num_clues <= 40


def test_generated_6x6_puzzles_are_unique():
    for seed in range(20):
        inst = generate(instance_rng("sudoku", "val", seed), SudokuConfig(size=6))
        assert set_backtracker(inst.puzzle, 2, 3) == [[list(row) for row in inst.solution]]


def test_a_uniqueness_proof_past_its_budget_answers_not_proven():
    from llm_marl_envs.sudoku.solver import has_other_solution

    inst = generate(instance_rng("sudoku", "test", 0), SudokuConfig(size=9))
    r, c = next((r, c) for r in range(9) for c in range(9) if not inst.puzzle[r][c])
    value = inst.solution[r][c]
    assert not has_other_solution(inst.puzzle, S9, r, c, value)
    assert not has_other_solution(inst.puzzle, S9, r, c, value, budget=100_000)
    assert has_other_solution(inst.puzzle, S9, r, c, value, budget=1)


def test_boards_above_12x12_are_unique_with_budgeted_proofs(monkeypatch):
    """A minimal 16x16 puzzle's proofs can take hours (generation never ended): above 12x12 a clue whose proof
    passes the budget stays; smaller boards are proven without one, so their puzzles stay minimal."""
    from llm_marl_envs.sudoku import generator, solver

    budgets = []

    def recorded(*args):
        budgets.append(args[5])
        return solver.has_other_solution(*args)

    monkeypatch.setattr(generator, "has_other_solution", recorded)
    monkeypatch.setattr(generator, "UNIQUENESS_BUDGET", 50)  # quick: more clues stay
    inst = generate(instance_rng("sudoku", "test", 0), SudokuConfig(size=16))
    assert set(budgets) == {50}
    assert count_solutions(inst.puzzle, inst.shape, limit=2) == 1 and is_solved(inst.solution, inst.puzzle, inst.shape)
    for size in (9, 12):
        budgets.clear()
        generate(instance_rng("sudoku", "test", 0), SudokuConfig(size=size, max_removals=40))
        assert set(budgets) == {None}


@pytest.mark.parametrize("size", [6, 9, 12])
def test_exact_cover_and_cell_search_agree_on_other_solutions(size):
    """The two exact proofs answer alike: random partial grids of random solutions, a removed cell's digit
    forbidden, clashing givens included (no solution at all: False)."""
    from llm_marl_envs.sudoku.solver import _other_cover, _Search, random_solution

    shape, rng, answers = Shape.for_size(size), np.random.default_rng(size), []
    for trial in range(60):
        solution = random_solution(shape, rng)
        puzzle = [list(row) for row in solution]
        for i in rng.permutation(size * size)[: rng.integers(size * size // 3, size * size * 2 // 3)].tolist():
            puzzle[i // size][i % size] = 0
        r, c = divmod(int(rng.integers(size * size)), size)
        value, puzzle[r][c] = solution[r][c], 0
        if trial % 10 == 9:  # a clash among the givens
            r2, c2 = next((i // size, i % size) for i in range(size * size) if puzzle[i // size][i % size] and i // size != r)
            puzzle[r2][(c2 + 1) % size] = puzzle[r2][c2]
        search = _Search(puzzle, shape)
        search.forbidden_cell, search.forbidden_bits = r * size + c, 1 << value
        found: list[list[int]] = []
        if search.consistent:
            search.run(1, None, found)
        answers.append(bool(found))
        assert _other_cover(puzzle, shape, r, c, value) == bool(found), (trial, puzzle, r, c, value)
    assert 0 < sum(answers) < len(answers)  # both answers were met


def test_12x12_puzzles_are_those_the_cell_search_proved():
    """12x12 proofs went from the cell search (3.4 s a puzzle by median) to exact cover (0.35 s): the same puzzles
    (sha256 of their keys, recorded with the cell search)."""
    import hashlib

    recorded = ["88db40152ffd6be6", "c0a9cfc0b949e750", "5526a05d916b78f0", "7263cc695d9b5238"]
    keys = [generate(np.random.default_rng(seed), SudokuConfig(size=12)).key() for seed in range(4)]
    assert [hashlib.sha256(key.encode()).hexdigest()[:16] for key in keys] == recorded


def test_generated_puzzles_are_minimal_by_default():
    for seed in range(20):
        inst = generate(instance_rng("sudoku", "train", seed), SudokuConfig(size=4))
        for r, c in [(r, c) for r in range(4) for c in range(4) if inst.puzzle[r][c]]:
            fewer = [list(row) for row in inst.puzzle]
            fewer[r][c] = 0
            assert len(brute_force_4x4(fewer)) > 1


def test_same_seed_same_instance():
    for config in (SudokuConfig(size=4), SudokuConfig(size=9, min_clues=30)):
        a = generate(instance_rng("sudoku", "train", 11), config)
        b = generate(instance_rng("sudoku", "train", 11), config)
        c = generate(instance_rng("sudoku", "train", 12), config)
        assert a == b and a.key() == b.key()
        assert a.key() != c.key()


def test_key_is_canonical():
    inst = SudokuInstance(S4, START, g("1234", "3412", "2143", "4321"))
    assert inst.key() == "sudoku:4:2x2:1.../..1./.1../...."
    assert inst.num_clues == 3


@pytest.mark.parametrize("config,low,high", [
    (SudokuConfig(size=4, min_clues=8), 8, 8),
    (SudokuConfig(size=4, max_removals=5), 11, 11),
    (SudokuConfig(size=4, max_clues=4), 4, 4),
    (SudokuConfig(size=9, min_clues=36), 36, 36),
])
def test_difficulty_knobs(config, low, high):
    for seed in range(10):
        inst = generate(instance_rng("sudoku", "train", seed), config)
        assert low <= inst.num_clues <= high
        assert count_solutions(inst.puzzle, config.shape) == 1


@pytest.mark.parametrize("kwargs,fix", [
    ({"size": 7}, "no box shape"),
    ({"min_clues": 17}, "min_clues"),
    ({"max_removals": -1}, "max_removals"),
    ({"max_clues": 3}, "at least 4 clues"),
    ({"size": 9, "max_clues": 16}, "at least 17 clues"),
    ({"min_clues": 8, "max_clues": 6}, "below the clue floor"),
])
def test_bad_generator_config_names_the_fix(kwargs, fix):
    with pytest.raises(ValueError, match=fix):
        SudokuConfig(**kwargs)


# ---------------------------------------------------------------------------------------- parser
GRID_TEXT = "[[1,2,3,4],[3,4,1,2],[2,1,4,3],[4,3,2,1]]"


@pytest.mark.parametrize("text,kind,value", [
    (GRID_TEXT, "grid", SOLUTION4),
    (f"Here is the grid:\n```json\n{GRID_TEXT}\n```\nIt is valid.", "grid", SOLUTION4),
    ("[[1, 2, 3, 4], [3, 4, 1, 2],\n [2, 1, 4, 3], [4, 3, 2, 1],]", "grid", SOLUTION4),  # trailing comma
    ('["1234", "3412", "2143", "4321"]', "grid", SOLUTION4),
    ('["1...", "..1.", ".1..", "...."]', "grid", START),
    ("[[1,null,0,0],[0,0,1,0],[0,1,0,0],[0,0,0,0]]", "grid", START),
    ("[[1,2,3],[2,1,4]]", "steps", ((1, 2, 3), (2, 1, 4))),
    ("[(1, 2, 3), (2, 1, 4)]", "steps", ((1, 2, 3), (2, 1, 4))),
    ("[[1,3,4],[2,1,6],[9,9,1]]", "steps", ((1, 3, 4), (2, 1, 6), (9, 9, 1))),  # the paper's example: steps
    ("[[1,2,3],[2,3,4],[3,4,1],[4,1,2]]", "steps", ((1, 2, 3), (2, 3, 4), (3, 4, 1), (4, 1, 2))),  # 4 triples, N=4
    ("fill [[1,2,9]] (out of range is checked later)", "steps", ((1, 2, 9),)),
    ("first [1, 2] then [[2,2,2]]", "steps", ((2, 2, 2),)),  # the first span that is an answer
])
def test_parse_accepts(text, kind, value):
    answer, error = parse_answer(text, size=4)
    assert error is None, error
    assert answer.kind == kind
    assert (answer.grid if kind == "grid" else answer.steps) == value


@pytest.mark.parametrize("text,why", [
    ("", "no [...] list"),
    ("the answer is 1 2 3 4", "no [...] list"),
    ("[]", "empty list"),
    ("[1, 2, 3]", "expected a grid"),
    ("[[1,2,3,4],[3,4,1,2],[2,1,4,3]]", "4x4 grid"),
    ("[[1,2,3,4,5],[3,4,1,2],[2,1,4,3],[4,3,2,1]]", "4x4 grid"),
    ("[[1,2,'x'],[1,1,1]]", "three integers"),
    ("[[1,2,true],[1,1,1]]", "three integers"),
    ("[[1.0,2,3]]", "three integers"),
    ("[[1,2,3]", "no [...] list"),  # unbalanced
    ("[" * 50 + "]" * 50, "nested"),
    ("[__import__('os').system('true')]", "not a JSON or Python list"),
    ("[" + ",".join(["[1,1,1]"] * (MAX_STEPS + 1)) + "]", "more than"),
])
def test_parse_rejects(text, why):
    answer, error = parse_answer(text, size=4)
    assert answer is None and why in error


def test_parse_without_size_infers_the_grid():
    answer, _ = parse_answer("[[1,2,3,4,5,6],[4,5,6,1,2,3],[2,3,1,5,6,4],[5,6,4,2,3,1],[3,1,2,6,4,5],[6,4,5,3,1,2]]")
    assert answer.kind == "grid" and len(answer.grid) == 6
    answer, error = parse_answer("[[1,2,3,4],[3,4,1,2],[2,1,4,3],[4,3,2,1]]", size=9)
    assert answer is None and "9x9" in error


_GRID_TOKENS = ["[", "]", ",", " ", "\n", "\t", "\r", "\f", "0", "4", "7", "9", "12", "-1", "1.0", "null", "x"]


@st.composite
def grid_like_texts(draw):
    """JSON grids of one-digit numbers with random JSON whitespace, and near misses of them."""
    size = draw(st.integers(3, 10))
    rows = [[draw(st.integers(0, 9)) for _ in range(size)] for _ in range(size)]
    space = st.sampled_from(["", " ", "\n", "\t", "\r", "  "])
    text = "[" + ",".join(draw(space) + "[" + ",".join(draw(space) + str(v) + draw(space) for v in row) + "]" + draw(space)
                          for row in rows) + "]" + draw(space)
    if draw(st.booleans()):  # a near miss: one token inserted, replaced or removed somewhere
        i = draw(st.integers(0, len(text) - 1))
        token = draw(st.sampled_from(_GRID_TOKENS))
        text = draw(st.sampled_from([text[:i] + token + text[i:], text[:i] + token + text[i + 1:], text[:i] + text[i + 1:]]))
    return text, draw(st.sampled_from([size, size, None, 4, 9]))


@given(grid_like_texts())
@settings(max_examples=500, deadline=None)
def test_the_one_digit_grid_reader_parses_as_the_json_path_does(case):
    """The reader of one-digit grids gives what the JSON path gives, or leaves the text to it."""
    from llm_marl_envs.sudoku import parse as module

    text, size = case
    fast, _ = parse_answer(text, size)
    if fast is not None and fast.in_range:  # the reader's promise: nothing out of 0..N for the range check to find
        assert size is not None and all(0 <= v <= size for row in fast.grid for v in row)
        assert fast.digits == bytes(itertools.chain.from_iterable(fast.grid))  # what `apply_grid` compares
    fast = parse_answer(text, size)
    reader = module._digit_grid_values
    module._digit_grid_values = lambda text, size: None  # reads nothing: every text takes the JSON path
    try:
        assert fast == parse_answer(text, size)
    finally:
        module._digit_grid_values = reader


@given(st.text(max_size=300))
@settings(max_examples=300, deadline=None)
def test_parse_never_raises_on_arbitrary_text(text):
    answer, error = parse_answer(text, size=4)
    assert (answer is None) != (error is None)


@given(st.text(alphabet="[](),0123456789 .-'\"nulTrFe\n#", max_size=200))
@settings(max_examples=400, deadline=None)
def test_parse_never_raises_on_bracket_soup(text):
    answer, error = parse_answer(text, size=4)
    assert (answer is None) != (error is None)
    if answer is not None and answer.kind == "grid":
        assert len(answer.grid) == 4 and all(len(row) == 4 for row in answer.grid)


JSON_LISTS = st.lists(st.lists(st.one_of(st.integers(-1, 6), st.none(), st.booleans(), st.sampled_from(["1.3.", "x", "[1]"])),
                               max_size=5), min_size=1, max_size=5).map(lambda rows: json.dumps(rows, separators=(",", ":")))


@given(st.one_of(st.text(alphabet="[],0123456789 .-'\"nul\n", max_size=120).map(lambda t: "[[" + t),
                 st.tuples(JSON_LISTS, st.sampled_from(["", " ", "]", " [[1,2,3]]", ",", "x"])).map("".join)))
@settings(max_examples=500, deadline=None)
def test_a_whole_json_list_parses_as_the_span_scan_parses_it(text):
    # A text that starts with "[[" takes a shortcut (json.loads of all of it); a leading space takes the
    # scan of bracketed spans: both must give the same answer or the same error.
    assert parse_answer(text, size=4) == parse_answer(" " + text, size=4)


@given(st.lists(st.tuples(st.integers(-5, 20), st.integers(-5, 20), st.integers(-5, 20)), min_size=1, max_size=30))
@settings(max_examples=200, deadline=None)
def test_parse_round_trips_steps(steps):
    answer = SudokuAnswer("steps", steps=tuple(steps))
    parsed, error = parse_answer("#### " + answer.to_text() + " done", size=4)
    assert error is None and parsed == answer


def test_small_board_table_agrees_with_the_search():
    """The bitsets of all 288 complete 4x4 grids (what remove_clues narrows on 4x4) against the search:
    the grids fitting a puzzle's givens are its completions, and has_other_solution (a search that
    excludes one digit at one cell) is "one of them differs there"."""
    from llm_marl_envs.sudoku import solver

    every, table = solver.solution_table(S4)
    assert every == (1 << 288) - 1
    rng = np.random.default_rng(0)
    for _ in range(400):
        solution = solver.random_solution(S4, rng)
        puzzle = [[v if rng.random() < rng.random() else 0 for v in row] for row in solution]
        if rng.random() < 0.2:  # duplicated givens: no solution at all
            puzzle[0][0], puzzle[0][1] = 1, 1
        r, c = int(rng.integers(4)), int(rng.integers(4))
        value = solution[r][c]
        if rng.random() < 0.8:
            puzzle[r][c] = 0
        fitting = every
        for i, v in enumerate(v for row in puzzle for v in row):
            if v:
                fitting &= table[i][v]
        assert fitting.bit_count() == count_solutions(puzzle, S4, limit=300)
        expected = bool(fitting & ~table[r * 4 + c][value]) if puzzle[r][c] == 0 else bool(fitting)
        assert solver.has_other_solution(puzzle, S4, r, c, value) == expected


@pytest.mark.parametrize("min_clues,max_removals", [(0, None), (0, 9), (7, None), (5, 8)])
def test_small_board_removal_keeps_the_clues_a_uniqueness_search_keeps(min_clues, max_removals):
    """remove_clues' incremental bitsets on 4x4 against the plain loop: remove each clue in the drawn
    order when the puzzle still has exactly one solution (count_solutions), within the limits."""
    from llm_marl_envs.sudoku.generator import remove_clues

    limit = 16 - min_clues if max_removals is None else min(16 - min_clues, max_removals)
    for seed in range(60):
        solution = random_solution(S4, np.random.default_rng(seed))
        puzzle, removals = [list(row) for row in solution], 0
        for i in np.random.default_rng(1000 + seed).permutation(16).tolist():
            if removals >= limit:
                break
            r, c = divmod(i, 4)
            value, puzzle[r][c] = puzzle[r][c], 0
            if count_solutions(puzzle, S4, limit=2) == 1:
                removals += 1
            else:
                puzzle[r][c] = value
        got = remove_clues(solution, S4, np.random.default_rng(1000 + seed), min_clues=min_clues, max_removals=max_removals)
        assert got == tuple(map(tuple, puzzle)), f"seed {seed}"


@pytest.mark.parametrize("config,digest", [
    (dict(size=6), "9e7249eb0745d681"),
    (dict(size=6, box_rows=3), "ca2f49f1646ac9fd"),
    (dict(size=9, max_removals=40), "f08573da19b3163d"),
])
def test_generation_draws_the_same_larger_instances_as_before(config, digest):
    """6x6 and 9x9 keep their instances through solver rewrites: digests of 10 seeds x 3 splits."""
    from tests.support.digests import instance_digest

    cfg = SudokuConfig(**config)
    assert instance_digest("sudoku", lambda rng: generate(rng, cfg), seeds=10) == digest


@pytest.mark.parametrize("config,digest", [
    (dict(), "02a62c3c10dd6f90"),
    (dict(max_removals=8), "efb74770ee0bcf03"),
    (dict(min_clues=6), "d25529daa24d575f"),
])
def test_generation_draws_the_same_4x4_instances_as_before(config, digest):
    """The table-based uniqueness check keeps v0's instances: digests of 60 seeds x 3 splits recorded before it."""
    from llm_marl_envs.sudoku.generator import SudokuConfig, generate
    from tests.support.digests import instance_digest

    cfg = SudokuConfig(**config)
    assert instance_digest("sudoku", lambda rng: generate(rng, cfg), seeds=60) == digest


def test_fast_conflicts_agree_with_the_unit_scan():
    """`conflicts` answers tuple grids from a pass over the rows' unit masks (remembered per row); the plain scan must agree,
    on random grids (mostly in conflict, some with non-digits) and on solutions with blanks and one
    changed cell (mostly free of conflicts)."""
    import numpy as np

    from llm_marl_envs.sudoku.rules import Shape, _find_conflicts, conflicts

    rng = np.random.default_rng(1)
    for size in (4, 6, 9):
        shape = Shape.for_size(size)
        solution = generate(rng, SudokuConfig(size=size)).solution
        for i in range(400):
            if i % 2:
                values = [0, *range(1, size + 1)] + ([-1, size + 1, 2.0, True] if rng.random() < 0.2 else [])
                grid = tuple(tuple(values[int(rng.integers(len(values)))] for _ in range(size)) for _ in range(size))
            else:
                keep = rng.random((size, size)) < rng.random()
                rows = [[v if keep[r][c] else 0 for c, v in enumerate(row)] for r, row in enumerate(solution)]
                if i % 4 == 0:
                    rows[int(rng.integers(size))][int(rng.integers(size))] = int(rng.integers(size + 1))
                grid = tuple(map(tuple, rows))
            assert conflicts(grid, shape) == _find_conflicts(grid, shape)
            as_lists = [list(row) for row in grid]
            assert conflicts(as_lists, shape) == _find_conflicts(grid, shape)
