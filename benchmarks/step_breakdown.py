"""Where the main job's training steps spend their time: the step-time parts the trainer logs
(`perf/<part>_s`, `llm_marl.step_time`), summed over N steps, and the share of environment + sandbox
+ credit (`perf/env_s + perf/tool_s + perf/credit_s`) in the step.

    python benchmarks/step_breakdown.py --steps 4 --write benchmarks.md
    python benchmarks/step_breakdown.py --steps 2 --init-adapters runs/<sft-run>  # an existing warm start
    python benchmarks/step_breakdown.py --steps 4 --device cuda --write benchmarks.md  # on a GPU (hf engine)

Without `--init-adapters` it first builds the warm start as `make train` does (`llm-marl sft --config
configs/main-sft.yaml`; `--demos`, `--epochs` and `--heldout-demos` shorten it). The RL steps are the
main job's (`llm-marl train --config configs/main-train.yaml --init-adapters ...`) with `--steps N` and
no held-out evaluation (it is not part of a step). `--device` is passed to both commands; a run on a
GPU writes its own section (`step_breakdown_cuda`), next to the CPU one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._report import write_section  # noqa: E402
from llm_marl.step_time import PARTS  # noqa: E402

SFT_CONFIG, TRAIN_CONFIG = ROOT / "configs" / "main-sft.yaml", ROOT / "configs" / "main-train.yaml"
GOAL = ("env", "tool", "credit")
"""The parts the Performance goal bounds: environment + sandbox + credit <= 5 % of a step."""
NAMES = {"generate": "generation (engine calls)", "env": "environments (reset, observe, fork, step)",
         "tool": "sandbox and tool calls (prefetched included)", "credit": "credit and advantages",
         "update": "update (and adapters pushed to the engine)", "other": "other (driver bookkeeping, step metrics)"}


def cli(*args: str) -> dict:
    """Run `llm-marl ARGS`; its last stdout line is the JSON summary."""
    proc = subprocess.run([sys.executable, "-m", "llm_marl.cli", *args], cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"llm-marl {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(steps: int, out: Path, init_adapters: str | None, sft_args: list[str], seed: int,
            device: str = "auto") -> tuple[list[dict], str]:
    """The metrics of `steps` main-job steps, and the warm start they began from."""
    if init_adapters is None:
        sft = cli("sft", "--config", str(SFT_CONFIG), *sft_args, "--seed", str(seed), "--device", device,
                  "--out-dir", str(out), "--run-name", "sft")
        init_adapters = sft["run_dir"]
    cli("train", "--config", str(TRAIN_CONFIG), "--init-adapters", init_adapters, "--steps", str(steps), "--eval-episodes", "0",
        "--seed", str(seed), "--device", device, "--report-to", "none", "--no-progress", "--out-dir", str(out), "--run-name", "rl")
    rows = [json.loads(line) for line in (out / "rl" / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return rows, init_adapters


def table(rows: list[dict]) -> tuple[str, float]:
    """The parts' table, and the share (in %) of environment + sandbox + credit in the step time."""
    step_s = sum(r["perf/step_s"] for r in rows)
    total = {part: sum(r[f"perf/{part}_s"] for r in rows) for part in PARTS}
    lines = ["| part | metric | seconds (all steps) | mean per step (s) | % of step time |", "|---|---|---:|---:|---:|"]
    for part in PARTS:
        lines.append(f"| {NAMES[part]} | `perf/{part}_s` | {total[part]:.2f} | {total[part] / len(rows):.3f} | "
                     f"{100 * total[part] / step_s:.2f} |")
    goal = sum(total[p] for p in GOAL)
    share = 100 * goal / step_s
    lines.append(f"| **environment + sandbox + credit** | | {goal:.2f} | {goal / len(rows):.3f} | **{share:.2f}** |")
    lines.append(f"| step (`perf/step_s`) | | {step_s:.2f} | {step_s / len(rows):.3f} | 100 |")
    per_step = ", ".join(f"{100 * sum(r[f'perf/{p}_s'] for p in GOAL) / r['perf/step_s']:.2f}" for r in rows)
    lines += ["", f"Environment + sandbox + credit, % of each step: {per_step}. Prefetched sandbox runs per step: "
              + ", ".join(str(int(r.get("rollout/prefetched_calls", 0))) for r in rows)
              + "; generated tokens per step: " + ", ".join(str(int(r["perf/generated_tokens"])) for r in rows) + "."]
    return "\n".join(lines), share


def gpu_name(device: str) -> str | None:
    """The GPU's name when `device` (llm-marl's --device) resolves to CUDA here, else None."""
    from llm_marl.models import resolve_device

    resolved = resolve_device(device)
    if not resolved.startswith("cuda"):
        return None
    import torch

    return torch.cuda.get_device_name(torch.device(resolved))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=4, help="RL steps to time (default: 4)")
    parser.add_argument("--init-adapters", metavar="DIR", help="start from this warm start instead of building one")
    parser.add_argument("--demos", type=int, help="SFT demonstrations (default: the config's)")
    parser.add_argument("--epochs", type=int, help="SFT epochs (default: the config's)")
    parser.add_argument("--heldout-demos", type=int, help="SFT held-out demonstrations (default: the config's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="auto", help="where the model runs (llm-marl's --device; default: auto)")
    parser.add_argument("--write", metavar="PATH", help="write the section into this markdown file")
    parser.add_argument("--keep", metavar="DIR", help="keep the run directories here (default: a temporary folder)")
    parser.add_argument("--note", default="", help="a sentence for the section, e.g. what else the machine was running")
    args = parser.parse_args(argv)
    sft_args = [f for name in ("demos", "epochs", "heldout_demos") if getattr(args, name) is not None
                for f in (f"--{name.replace('_', '-')}", str(getattr(args, name)))]
    gpu = gpu_name(args.device)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.keep or tmp)
        rows, warm = measure(args.steps, out, args.init_adapters, sft_args, args.seed, args.device)
    load_after = os.getloadavg()
    body, share = table(rows)
    start = (f"from `{args.init_adapters}`" if args.init_adapters else
             "from a warm start built by `llm-marl sft --config configs/main-sft.yaml" + "".join(f" {a}" for a in sft_args) + "`")
    body = ((f"On a GPU: {gpu} (`--device {args.device}`, the hf engine). " if gpu else "")
            + f"{len(rows)} steps of the main job's RL stage (`configs/main-train.yaml`, seed {args.seed}) {start}; the parts "
            "of each step as the trainer logs them (`llm_marl/step_time.py`: they add up to `perf/step_s`). Counterfactual "
            "replays, when an algorithm plays any, are in the rollout's parts (generation, environments, sandbox). "
            f"Load average (1, 5, 15 min) before: {', '.join(f'{x:.2f}' for x in load_before)}; after: "
            f"{', '.join(f'{x:.2f}' for x in load_after)}.\n\n{body}\n\n"
            f"Goal (environment + sandbox + credit <= 5 % of a step): {'met' if share <= 5 else 'not met'} ({share:.2f} %)."
            + (f"\n\n{args.note}" if args.note else ""))
    print(body)
    if args.write:
        command = " ".join(["python benchmarks/step_breakdown.py", "--steps", str(args.steps), *sft_args, "--seed", str(args.seed),
                            *(["--init-adapters", args.init_adapters] if args.init_adapters else []),
                            *(["--device", args.device] if args.device != "auto" else []), "--write", args.write])
        if gpu:
            write_section(args.write, "step_breakdown_cuda", "Step-time breakdown of the main job on a GPU", command, body)
        else:
            write_section(args.write, "step_breakdown", "Step-time breakdown of the main job", command, body)


if __name__ == "__main__":
    main()
