"""benchmarks/sudoku_generation.py: the table it writes (the timings themselves are the benchmark's, not a test's)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import sudoku_generation  # noqa: E402


def _round(seconds: list[float], keys: list[str]) -> dict[str, dict[str, list]]:
    return {"12": {"seconds": seconds, "keys": keys}}


def test_per_seed_best_rounds_their_median_and_the_same_puzzles():
    before = [_round([4.0, 9.0, 1.0], ["a", "b", "c"]), _round([3.0, 10.0, 2.0], ["a", "b", "c"])]  # bests 3, 9, 1
    after = [_round([0.4, 0.3, 0.2], ["a", "b", "c"]), _round([0.3, 0.5, 0.3], ["a", "b", "c"])]  # bests 0.3, 0.3, 0.2
    row = sudoku_generation.table(before, after, "abc1234").splitlines()[-1]
    assert row == "| 12x12 | 3 | 3.000 (1.000-9.000) | 0.300 (0.200-0.300) | 0.10 | yes |"
    after[1]["12"]["keys"] = ["a", "x", "c"]  # one round of this tree drew another puzzle
    assert sudoku_generation.table(before, after, "abc1234").splitlines()[-1].endswith("| no |")
