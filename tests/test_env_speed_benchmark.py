"""benchmarks/env_speed.py: the tables it writes (the timings themselves are the benchmark's, not a test's)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import env_speed  # noqa: E402


def _runs(values: list[float], extra: dict[str, float] | None = None) -> list[dict[str, float]]:
    return [{"turn/sudoku": v, "fork/sudoku": v / 4, **(extra or {})} for v in values]


def test_ratios_of_minimums_and_of_medians():
    # A slow spell hits one of three rounds of this tree and of PettingLLMs: it moves the medians, not the minimums.
    before, after = _runs([100.0, 110.0, 120.0]), _runs([40.0, 50.0, 100.0], {"turn_moves/plan_path": 9})
    peer = _runs([90.0, 100.0, 400.0], {"turn_moves/plan_path": 7})
    lines = env_speed.table(before, after, "abc1234", pettingllms=peer).splitlines()
    base_row, peer_row = [line for line in lines if line.startswith("| agent turn") and "Sudoku" in line]
    assert base_row.endswith("| 100.0 µs / 110.0 µs | 40.0 µs / 50.0 µs | 0.40; 0.45 |")  # 40/100; 50/110
    assert peer_row.endswith("| 90.0 µs / 100.0 µs | 110.0 µs | 40.0 µs / 50.0 µs | 0.44; 0.50 |")  # 40/90; 50/100
    assert "Moves in the turn's reply: Plan-Path 10x10 9 (ours) and 7 (PettingLLMs)." in lines


def test_generation_rates_against_reasoning_gym_best_and_median():
    # Per-instance times (µs): the best round and the median round each give a rate; higher is faster.
    label = "Plan-Path 10x10, train"
    before = [{f"gen/{label}": v} for v in (200.0, 250.0, 300.0)]
    after = [{f"gen/{label}": v} for v in (50.0, 80.0, 200.0)]
    peer = [{f"gen/{label}": v} for v in (40.0, 100.0, 110.0)]
    lines = env_speed.table(before, after, "abc1234", peers=peer).splitlines()
    row = next(line for line in lines if line.startswith(f"| {label} | maze"))
    # reasoning-gym 25,000 / 10,000 per s, our base's median 4,000, this tree 20,000 / 12,500: 40/50; 100/80.
    assert row.endswith("| 25,000 / 10,000 | 4,000 | 20,000 / 12,500 | 0.80; 1.25 |")
