"""The main job (`make train`) with several seeds: held-out greedy success and mean reward before and
after RL, per seed and as mean ± std.

    python benchmarks/main_job.py --seeds 0 1 2 --write benchmarks.md

Each seed runs exactly what `make train` runs, with `--seed S` added to both commands: the supervised
warm start (`llm-marl sft --config configs/main-sft.yaml`, S also picks its demonstration instances),
then AT-GRPO from its adapters (`llm-marl train --config configs/main-train.yaml --init-adapters ...`),
whose held-out evaluation (test split, greedy) runs before the first step and after the last. "Before"
is therefore the warm-started model, and the gain is what RL added to it.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._report import write_section  # noqa: E402

SFT_CONFIG, TRAIN_CONFIG = ROOT / "configs" / "main-sft.yaml", ROOT / "configs" / "main-train.yaml"


def cli(*args: str) -> dict:
    """Run `llm-marl ARGS`; its last stdout line is the JSON summary."""
    proc = subprocess.run([sys.executable, "-m", "llm_marl.cli", *args], cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"llm-marl {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_seed(seed: int, out: Path) -> dict:
    """One seed's SFT then RL; with --keep, a seed killed part-way continues where it stopped."""
    start, resumed = time.perf_counter(), False
    sft_dir, rl_dir = out / f"sft{seed}", out / f"rl{seed}"
    if (sft_dir / "summary.json").exists():
        resumed = True
    else:
        cli("sft", "--config", str(SFT_CONFIG), "--seed", str(seed), "--out-dir", str(out), "--run-name", sft_dir.name)
    sft_s = json.loads((sft_dir / "summary.json").read_text())["train_s"]
    if not (rl_dir / "summary.json").exists():
        if (rl_dir / "config.json").exists():
            resumed = True
            cli("train", "--resume", str(rl_dir), "--no-progress")
        else:
            cli("train", "--config", str(TRAIN_CONFIG), "--seed", str(seed), "--init-adapters", str(sft_dir),
                "--out-dir", str(out), "--run-name", rl_dir.name, "--no-progress")
    summary = json.loads((rl_dir / "summary.json").read_text())
    wall = rl_dir / "main_job_wall.json"  # a seed timed in one piece keeps its wall time for later reruns of the table
    if not resumed:
        wall.write_text(json.dumps({"total_s": time.perf_counter() - start}))
    total_s = json.loads(wall.read_text())["total_s"] if wall.exists() else None
    return {"seed": seed, "before": summary["eval_before"], "after": summary["eval_after"], "sft_s": sft_s,
            "train_s": summary["train_s"], "total_s": total_s,
            "steps_without_signal": summary["steps_without_signal"], "steps": summary["steps"]}


def mean_std(values: list[float]) -> str:
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values) if len(values) > 1 else 0.0:.3f}"


def report(rows: list[dict]) -> str:
    roles = list(rows[0]["before"]["mean_reward"])
    metrics = [("success", lambda e: e["success_rate"])] + [(f"{r} reward", lambda e, r=r: e["mean_reward"][r]) for r in roles]
    lines = ["| seed | " + " | ".join(f"{name} before → after" for name, _ in metrics)
             + " | steps without signal | minutes: SFT + RL steps + evals before/after | minutes: wall |",
             "|---:|" + "---:|" * (len(metrics) + 3)]
    for row in rows:
        cells = [f"{get(row['before']):.3f} → {get(row['after']):.3f}" for _, get in metrics]
        parts = [row["sft_s"], row["train_s"], row["before"]["seconds"], row["after"]["seconds"]]
        lines.append(f"| {row['seed']} | " + " | ".join(cells) + f" | {row['steps_without_signal']}/{row['steps']} | "
                     f"{' + '.join(f'{x / 60:.1f}' for x in parts)} = {sum(parts) / 60:.1f}"
                     f" | {'resumed' if row['total_s'] is None else format(row['total_s'] / 60, '.1f')} |")
    lines += ["", "| metric | before (mean ± std) | after (mean ± std) | gain after − before (mean ± std) |", "|---|---:|---:|---:|"]
    for name, get in metrics:
        before = [get(r["before"]) for r in rows]
        after = [get(r["after"]) for r in rows]
        lines.append(f"| {name} | {mean_std(before)} | {mean_std(after)} | {mean_std([a - b for a, b in zip(after, before)])} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--write", metavar="PATH", help="write the section into this markdown file")
    parser.add_argument("--keep", metavar="DIR", help="keep the run directories here (default: a temporary folder)")
    parser.add_argument("--note", default="", help="a sentence for the section, e.g. what else the machine was running")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.keep or tmp)
        rows = []
        for seed in args.seeds:
            rows.append(run_seed(seed, out))
            print(json.dumps({k: rows[-1][k] for k in ("seed", "sft_s", "train_s", "total_s")}), flush=True)
    body = (f"The main job, `make train` (settings: `configs/main-sft.yaml`, `configs/main-train.yaml`), once per seed. "
            "Held-out evaluation: the test split, greedy; \"before\" is the warm-started (SFT) model, \"after\" the same "
            "model after AT-GRPO. \"resumed\": the seed's runs were found in the --keep folder, done or part-done, so its "
            "wall time was not measured in one piece (a seed that was, by an earlier run of this script, keeps it).\n\n"
            + report(rows) + (f"\n\n{args.note}" if args.note else ""))
    print(body)
    if args.write:
        write_section(args.write, "main_job", f"Main job: held-out success before and after RL, {len(args.seeds)} seed(s)",
                      "python benchmarks/main_job.py " + shlex.join(argv if argv is not None else sys.argv[1:]), body)


if __name__ == "__main__":
    main()
