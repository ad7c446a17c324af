"""Sudoku generation per board size: this tree against a base revision, and whether both drew the same puzzles.

    python benchmarks/sudoku_generation.py --base 2a0f209 --sizes 9 10 12 --seeds 4 --rounds 3 --write benchmarks.md

`--base REV` exports that commit's tree with `git archive`; each round runs one measuring subprocess on
the base tree and one on this tree (alternating, so a load change hits both). A subprocess generates the
puzzles of seeds 0..S-1 (`numpy.random.default_rng(seed)`, the default `SudokuConfig(size=N)`: minimal
puzzles) and times each one; the table gives, per size, the time a puzzle takes (median over seeds of
each seed's best round) in both trees and their ratio, and whether the two trees drew the same puzzles
(the sha256 of every puzzle's key).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def worker(sizes: list[int], seeds: int) -> dict[str, dict[str, list]]:
    import numpy as np

    from llm_marl_envs.sudoku.generator import SudokuConfig, generate

    out: dict[str, dict[str, list]] = {}
    for size in sizes:
        config, times, keys = SudokuConfig(size=size), [], []
        for seed in range(seeds):
            start = time.perf_counter()
            instance = generate(np.random.default_rng(seed), config)
            times.append(time.perf_counter() - start)
            keys.append(hashlib.sha256(instance.key().encode()).hexdigest())
        out[str(size)] = {"seconds": times, "keys": keys}
    return out


def _run_worker(tree: Path, sizes: list[int], seeds: int) -> dict[str, dict[str, list]]:
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, str(ROOT / "benchmarks" / "sudoku_generation.py"), "--worker", "--seeds", str(seeds),
           "--sizes", *map(str, sizes)]
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"worker on {tree} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _per_seed_best(rounds: list[dict[str, dict[str, list]]], size: str) -> list[float]:
    return [min(r[size]["seconds"][i] for r in rounds) for i in range(len(rounds[0][size]["seconds"]))]


def table(before: list[dict[str, dict[str, list]]], after: list[dict[str, dict[str, list]]], base: str) -> str:
    lines = [f"| board | puzzles | base {base}: s per puzzle, median (min-max) | this tree: median (min-max) "
             "| this / base (medians) | same puzzles |", "|---|---|---|---|---|---|"]
    for size in after[0]:
        old, new = _per_seed_best(before, size), _per_seed_best(after, size)
        same = all(r[size]["keys"] == before[0][size]["keys"] for r in before + after)
        lines.append(f"| {size}x{size} | {len(new)} | {statistics.median(old):.3f} ({min(old):.3f}-{max(old):.3f}) "
                     f"| {statistics.median(new):.3f} ({min(new):.3f}-{max(new):.3f}) "
                     f"| {statistics.median(new) / statistics.median(old):.2f} | {'yes' if same else 'no'} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="2a0f209", help="git revision to compare with (exported with git archive; "
                    "2a0f209: the cell search on every board)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[9, 10, 12], help="board sizes")
    ap.add_argument("--seeds", type=int, default=4, help="puzzles per size (seeds 0..S-1)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating measuring rounds per tree")
    ap.add_argument("--write", metavar="FILE", help="write the table into this benchmarks.md section")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        sys.path.insert(0, os.getcwd())
        print(json.dumps(worker(args.sizes, args.seeds)))
        return
    sys.path.insert(0, str(ROOT))
    from benchmarks._base_tree import exported_tree

    with exported_tree(args.base, prefix="sudoku-generation-base-") as tmp:
        load0 = os.getloadavg()[0]
        before, after = [], []
        for _ in range(args.rounds):
            before.append(_run_worker(Path(tmp), args.sizes, args.seeds))
            after.append(_run_worker(ROOT, args.sizes, args.seeds))
        load1 = os.getloadavg()[0]
    body = table(before, after, args.base)
    print(body)
    if args.write:
        from benchmarks._report import write_section

        command = "python benchmarks/sudoku_generation.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        note = (f"{args.rounds} alternating rounds per tree; a seed's time is its best round. 1-minute load average "
                f"{load0:.1f} before and {load1:.1f} after.")
        write_section(args.write, "sudoku-generation", "Sudoku generation by board size", command, body + "\n\n" + note)


if __name__ == "__main__":
    main()
