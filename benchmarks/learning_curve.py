"""The learning curve of one training run as a table: what `learning_curve.png` draws, step by step.

    python benchmarks/learning_curve.py runs/<run> --write benchmarks.md --figure benchmarks/figures/main_job_curve.png

Reads the run's `metrics.jsonl` (one line per step) and `summary.json` (held-out evaluations before
and after training); `--figure` copies the run's `learning_curve.png` there.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._report import write_section  # noqa: E402


def curve_table(run: Path) -> str:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    if not rows:
        raise SystemExit(f"{run / 'metrics.jsonl'} has no steps")
    roles = sorted(k.rsplit("/", 1)[1] for k in rows[0] if k.startswith("reward/reward/"))
    lines = ["| step | success | " + " | ".join(f"{r} reward" for r in roles)
             + " | groups with variance | optimiser steps | seconds |",
             "|---:|---:|" + "---:|" * (len(roles) + 3)]
    for m in rows:
        updates = sum(v for k, v in m.items() if k.startswith("update/") and k.endswith("/optimizer_steps"))
        lines.append(f"| {m['step']} | {m['reward/success_rate']:.2f} | "
                     + " | ".join(f"{m[f'reward/reward/{r}']:.3f}" for r in roles)
                     + f" | {m['signal/frac_groups_with_variance']:.2f} | {updates:g} | {m['perf/step_s']:.0f} |")
    summary_path = run / "summary.json"
    if summary_path.exists():
        summary = json.loads(summary_path.read_text())
        evals = [(name, summary.get(f"eval_{name}")) for name in ("before", "after")]
        evals = [(name, e) for name, e in evals if e]
        if evals:
            lines += ["", "| held-out (test split, greedy) | episodes | success | "
                      + " | ".join(f"{r} reward" for r in evals[0][1]["mean_reward"]) + " |",
                      "|---|---:|---:|" + "---:|" * len(evals[0][1]["mean_reward"])]
            for name, e in evals:
                lines.append(f"| {name} training | {e['episodes']} | {e['success_rate']:.3f} | "
                             + " | ".join(f"{v:.3f}" for v in e["mean_reward"].values()) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a run directory (holds metrics.jsonl)")
    parser.add_argument("--write", metavar="PATH", help="write the section into this markdown file")
    parser.add_argument("--figure", type=Path, help="copy the run's learning_curve.png here")
    parser.add_argument("--note", default="", help="a sentence for the section, e.g. which run this is")
    args = parser.parse_args(argv)
    body = ("Per training step (sampled episodes of the step; rewards are each role's mean reward): "
            f"`{args.run.name}/metrics.jsonl`.\n\n" + curve_table(args.run) + (f"\n\n{args.note}" if args.note else ""))
    if args.figure:
        args.figure.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(args.run / "learning_curve.png", args.figure)
        where = Path(os.path.relpath(args.figure, Path(args.write).parent if args.write else Path.cwd()))
        body += f"\n\n![learning curve]({where.as_posix()})"
    print(body)
    if args.write:
        write_section(args.write, "learning_curve", "Learning curve of the main job",
                      "python benchmarks/learning_curve.py " + shlex.join(argv if argv is not None else sys.argv[1:]), body)


if __name__ == "__main__":
    main()
