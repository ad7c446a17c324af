"""Throughput: how many operations per second the runtime sustains on this machine.

    python benchmarks/throughput.py --n 200                          # print the table
    python benchmarks/throughput.py --n 200 --write benchmarks.md    # and record it

Sandbox: executions per second of a trivial program (`print(sum(range(100)))`), on warm workers
(a fork server per worker: one fork per run) and with a fresh interpreter per run (`warm=False`),
with the same limits and isolation layers. Each measurement is one line of one table, so other
measurements (environment steps per second...) can be added to `measure()` and show up with them.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout: python benchmarks/...

from benchmarks._report import write_section  # noqa: E402
from llm_marl_envs.sandbox import Sandbox, SandboxLimits  # noqa: E402

PROGRAM = "print(sum(range(100)))"


@dataclass(frozen=True)
class Row:
    """One line of the table: `count` operations of `what` took `seconds` in all."""

    what: str
    count: int
    seconds: float
    median_ms: float | None = None
    note: str = ""

    @property
    def per_second(self) -> float:
        return self.count / self.seconds


def _timed_runs(sandbox: Sandbox, n: int) -> tuple[float, list[float]]:
    """Total seconds and per-run milliseconds of n sequential runs; every run must succeed."""
    latencies = []
    start = time.perf_counter()
    for _ in range(n):
        t = time.perf_counter()
        result = sandbox.run(PROGRAM)
        latencies.append((time.perf_counter() - t) * 1000)
        if result.stdout != "4950\n":
            raise RuntimeError(f"benchmark program failed: {result}")
    return time.perf_counter() - start, latencies


def sandbox_throughput(n: int) -> dict:
    """Executions/s of PROGRAM: warm workers (one at a time, and `run_many` over 2 workers) and a
    fresh interpreter per run, in one process. Worker start-up is excluded from the warm numbers
    (the workers are started once and reused for the process's lifetime) and included in the
    fresh-interpreter numbers (it is the whole point of that mode)."""
    limits = SandboxLimits()
    out: dict = {"n": n, "program": PROGRAM}
    with Sandbox(limits, workers=2) as warm:
        warm.run_many([(PROGRAM, "")] * 2)  # start both workers
        out["isolation"] = warm.isolation()
        seconds, latencies = _timed_runs(warm, n)
        out["warm_sequential"] = {"runs": n, "seconds": seconds, "median_ms": statistics.median(latencies)}
        start = time.perf_counter()
        results = warm.run_many([(PROGRAM, "")] * n)
        seconds = time.perf_counter() - start
        if not all(r.stdout == "4950\n" for r in results):
            raise RuntimeError("benchmark program failed under run_many")
        out["warm_run_many"] = {"runs": n, "seconds": seconds, "workers": 2}
    with Sandbox(limits, warm=False) as cold:
        seconds, latencies = _timed_runs(cold, n)
        out["fresh_interpreter"] = {"runs": n, "seconds": seconds, "median_ms": statistics.median(latencies)}
    return out


def sandbox_rows(result: dict) -> list[Row]:
    return [
        Row("sandbox run, warm worker (sequential)", result["warm_sequential"]["runs"],
            result["warm_sequential"]["seconds"], result["warm_sequential"]["median_ms"], "one fork per run"),
        Row("sandbox run_many, 2 warm workers", result["warm_run_many"]["runs"], result["warm_run_many"]["seconds"],
            None, "2 runs in flight"),
        Row("sandbox run, fresh interpreter (warm=False)", result["fresh_interpreter"]["runs"],
            result["fresh_interpreter"]["seconds"], result["fresh_interpreter"]["median_ms"], "`python -I` per run"),
    ]


def table(rows: list[Row]) -> str:
    lines = ["| measurement | operations | seconds | per second | median latency | note |",
             "|---|---:|---:|---:|---:|---|"]
    for r in rows:
        median = f"{r.median_ms:.1f} ms" if r.median_ms is not None else ""
        lines.append(f"| {r.what} | {r.count} | {r.seconds:.2f} | {r.per_second:.1f} | {median} | {r.note} |")
    return "\n".join(lines)


ENV_STEP_CASES = [
    ("plan_path", {"mode": "planner"}, "#### [U, R]"),
    ("sokoban", {"mode": "planner"}, "#### [L, D]"),
    ("sudoku", {"mode": "planner"}, "#### [[1, 1, 1]]"),
    ("math", {"mode": "reasoner"}, "#### \\boxed{7}"),
]


def env_steps_per_second(n: int) -> list[Row]:
    """Agent steps per second of each environment (an observe + step each; resets included)."""
    from llm_marl_envs import registry

    rows = []
    for name, kwargs, reply in ENV_STEP_CASES:
        env = registry.make_raw(name, **kwargs)
        steps, seed = 0, 0
        start = time.perf_counter()
        while steps < n:
            env.reset(seed=seed)
            seed += 1
            for agent in env.agent_iter():
                _, _, terminated, truncated, _ = env.last()
                env.step(None if terminated or truncated else reply)
                steps += not (terminated or truncated)
        rows.append(Row(f"{name} env step ({', '.join(f'{k}={v}' for k, v in kwargs.items())})", steps,
                        time.perf_counter() - start, note=f"{seed} episodes"))
    return rows


def measure(args: argparse.Namespace) -> tuple[list[Row], list[str]]:
    """Every measurement of this script: rows of the one table, and notes printed under it."""
    rows: list[Row] = []
    notes: list[str] = []

    # --- sandbox --------------------------------------------------------------------------
    sandbox = sandbox_throughput(args.n)
    rows += sandbox_rows(sandbox)
    speedup = (sandbox["warm_sequential"]["runs"] / sandbox["warm_sequential"]["seconds"]) / (
        sandbox["fresh_interpreter"]["runs"] / sandbox["fresh_interpreter"]["seconds"])
    layers = ", ".join(f"{k}={v}" for k, v in sandbox["isolation"].items())
    notes.append(f"Sandbox program: `{PROGRAM}`, default limits; a warm worker is {speedup:.0f}x a fresh "
                 f"interpreter. Isolation layers active during the measurement: {layers}.")

    # --- environment steps (no code execution) ------------------------------------------
    rows += env_steps_per_second(args.n)
    notes.append("Environment steps: reset + observe + step with a fixed well-formed reply until the episode "
                 "ends, in each environment's single-agent variant that runs no code (planner / reasoner), so "
                 "the rows measure the environment itself: parsing, rules, rewards, prompts.")

    return rows, notes


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200, help="operations per measurement (default 200)")
    parser.add_argument("--write", metavar="PATH", help="also write the 'throughput' section of this markdown file")
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error("--n must be >= 1")
    load_before = os.getloadavg()[0]
    rows, notes = measure(args)
    notes.append(f"Load average (1 min) before / after: {load_before:.2f} / {os.getloadavg()[0]:.2f} "
                 "(other processes on the machine slow every row).")
    body = table(rows) + "\n\n" + "\n\n".join(notes)
    print(body)
    if args.write:
        command = shlex.join(["python", "benchmarks/throughput.py", *(sys.argv[1:] if argv is None else argv)])
        write_section(args.write, "throughput", "Throughput", command, body)


if __name__ == "__main__":
    main()
