"""Time of one full coder-tester turn of `code_v4` (issue 3): the coder's program runs on every hidden
test and the smoke example, the tester's test is checked against the reference solution and run
on every mutant, and the program runs on the tester's suite.

    python benchmarks/code_turn.py                       # print the table
    python benchmarks/code_turn.py --write benchmarks.md # and write its section

Per problem (spread over the three difficulty tiers) it measures, in a fresh process-wide cache
state for that problem:
- cold turn: the first turn on the problem in a process, which also runs the one-time mutation
  analysis (mutant generation and equivalence filtering on the mutation pool);
- warm turns: later turns on new instances of the problem (new hidden-test draw, new tester input;
  only the mutant list is reused), split into the coder's step (hidden-test outputs of the new
  instance + running the program) and the tester's step (validity + mutants on the new input +
  the suite run).
The coder submits the reference solution, the tester a fresh generated input with its reference
output, as the scripted oracle does. Medians are over problems.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import zlib
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._report import write_section  # noqa: E402
from llm_marl_envs.code import bank  # noqa: E402
from llm_marl_envs.code.env import instance_for, mutation_analysis, raw_env  # noqa: E402
from llm_marl_envs.code.parse import format_test  # noqa: E402
from llm_marl_envs.code.problems import TestCase, with_newline  # noqa: E402
from llm_marl_envs.code.runner import run_trusted  # noqa: E402
from llm_marl_envs.sandbox import Sandbox  # noqa: E402


def pick_problems(count: int) -> list:
    by_level = {level: [p for p in bank.PROBLEMS if p.difficulty == level] for level in (1, 2, 3)}
    chosen = []
    for i in range(count):
        level = by_level[1 + i % 3]
        chosen.append(level[(i // 3 * 7) % len(level)])
    return chosen


def tester_reply(problem, sandbox, salt: int) -> str:
    rng = np.random.default_rng(np.random.SeedSequence([zlib.crc32(problem.key.encode()), 0xBE7C, salt]))
    stdin = with_newline(problem.generate(rng))
    (status, out), = run_trusted(sandbox, problem.reference, [stdin], 2.0)
    assert status == "ok", problem.id
    return format_test(TestCase(stdin, out))


def one_turn(problem, sandbox, variant: int) -> tuple[float, float, dict]:
    """(coder step seconds, tester step seconds, tester info) on a new instance of `problem`."""
    env = raw_env(problems=[problem], sandbox=sandbox)
    env.reset(options={"instance": instance_for(problem, variant)})
    reply = tester_reply(problem, sandbox, variant)  # prepared outside the timed steps
    t0 = time.perf_counter()
    env.step(f"Code:\n```python\n{problem.reference}```")
    t1 = time.perf_counter()
    env.step(reply)
    t2 = time.perf_counter()
    assert env.success, problem.id
    return t1 - t0, t2 - t1, env.infos["tester"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", type=int, default=12, help="problems measured (spread over the tiers)")
    parser.add_argument("--warm", type=int, default=5, help="warm turns per problem (new instances)")
    parser.add_argument("--workers", type=int, default=2, help="sandbox workers")
    parser.add_argument("--write", type=str, default=None, help="markdown file to write the section into")
    args = parser.parse_args()

    rows = []
    load_before = os.getloadavg()[0]
    with Sandbox(workers=args.workers) as sandbox:
        sandbox.run("print(1)")  # start the workers
        for problem in pick_problems(args.problems):
            coder, tester, _ = one_turn(problem, sandbox, 0)  # cold: the tester's step runs the mutation analysis
            cold = coder + tester
            analysis = mutation_analysis(problem, sandbox, 1.0)
            warm = [one_turn(problem, sandbox, 1000 * (k + 1)) for k in range(args.warm)]
            rows.append({
                "id": problem.id, "level": problem.difficulty, "cold": cold,
                "coder": statistics.median(w[0] for w in warm), "tester": statistics.median(w[1] for w in warm),
                "turn": statistics.median(w[0] + w[1] for w in warm),
                "mutants": len(analysis.mutants), "generated": analysis.generated,
            })
            print(f"{problem.id:22s} L{problem.difficulty} cold {cold * 1000:7.0f} ms  warm turn {rows[-1]['turn'] * 1000:6.0f} ms "
                  f"(coder {rows[-1]['coder'] * 1000:5.0f}, tester {rows[-1]['tester'] * 1000:5.0f})  "
                  f"mutants {analysis.generated} -> {len(analysis.mutants)}", flush=True)

    load_after = os.getloadavg()[0]
    med = {k: statistics.median(r[k] for r in rows) for k in ("cold", "turn", "coder", "tester")}
    lines = [
        "| problem | tier | mutants (generated -> kept) | cold turn (ms) | warm turn (ms) | coder step (ms) | tester step (ms) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['id']} | {r['level']} | {r['generated']} -> {r['mutants']} | {r['cold'] * 1000:.0f} | "
                     f"{r['turn'] * 1000:.0f} | {r['coder'] * 1000:.0f} | {r['tester'] * 1000:.0f} |")
    lines.append(f"| **median** | | | **{med['cold'] * 1000:.0f}** | **{med['turn'] * 1000:.0f}** | "
                 f"**{med['coder'] * 1000:.0f}** | **{med['tester'] * 1000:.0f}** |")
    body = (
        f"One coder-tester turn of `code_v4` with the default 10 hidden tests, {args.workers} sandbox workers, "
        f"over {len(rows)} bank problems; warm values are medians of {args.warm} new instances per problem. The cold "
        "turn is the first on a problem in a process and includes its one-time mutation analysis; a warm turn "
        "draws and computes the new instance's hidden tests, runs the program on them and on the example, "
        "checks the tester's new test, runs every mutant on it and runs the program on the suite. "
        f"1-minute load average {load_before:.1f} before and {load_after:.1f} after the run (the machine is shared; "
        "sandboxed runs are wall-clock bound, so a loaded machine inflates every number).\n\n" + "\n".join(lines)
    )
    print(body)
    if args.write:
        command = "python benchmarks/code_turn.py" + (f" --problems {args.problems}" if args.problems != 12 else "") + f" --write {args.write}"
        write_section(args.write, "code_turn", "Code env: one coder-tester turn", command, body)
        print(f"wrote section code_turn to {args.write}")


if __name__ == "__main__":
    main()
