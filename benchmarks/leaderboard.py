"""The papers' comparison at CPU scale: AT-GRPO's Table 1 rows on Plan-Path and Sokoban with the embedded
model, several seeds, mean ± std, the same budget for every trained row (issue: learning you can see,
item 5).

    python benchmarks/leaderboard.py --write benchmarks.md

For each environment it runs `llm-marl leaderboard` (single agent prompt-only, single agent + GRPO,
multi-agent prompt-only, multi-agent + AT-GRPO with a shared and with per-role policies), every row of
a seed warm-started by SFT on a few oracle episodes of its own variant, with the main job's RL settings
(`configs/main-train.yaml`: K=4, 4 tasks per step, temperature 0.5, lr 2e-5). Plan-Path plays the main
job's quick configuration (4x4, paths of 2-4 moves, one turn); Sokoban a 5x5 board with one box, 2-4
moves' solutions and one turn, its tool warm-started on the one-line program that prints the moves. It
then writes, per environment, the table, the bar chart (next to the leaderboard's own files, and
copied to `benchmarks/figures/`), the exact command, and whether the papers' ordering (single <
single + GRPO <= MAS < MAS + AT-GRPO) holds on held-out greedy success.

With the default budget, Sokoban's 3 seeds took 92 minutes on a 2-core machine (seeds 0 and 1 side by
side, each pinned to one core, in 41 minutes; then seed 2 on one core in 51); Plan-Path's take longer
(each of its trained team rows 15-17 minutes of training alone, on a machine running other work). A
killed run continues where it stopped when the same command is run again (finished rows are reused, a
row's training resumes from its checkpoint).
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._report import write_section  # noqa: E402

ENV_ARGS = {  # every row of an environment plays these tasks (Plan-Path: none given = the quick configuration)
    "plan_path": [],
    "sokoban": ["height=5", "width=5", "inner_walls=0", "min_solution_moves=2", "max_solution_moves=4", "max_turns=1"],
}
# The tool's program style in every warm start: Plan-Path's is the main job's (configs/main-sft.yaml);
# Sokoban's search program is a few hundred tokens, beyond the 128-token reply budget, so its tool
# learns the one-line program that prints the moves.
SOKOBAN_ORACLE_ARGS = ["program=answer"]
ORDER = ("single agent", "single agent + GRPO", "MAS, prompt only", "MAS + AT-GRPO")


def main_job_args(env: str) -> tuple[list[str], list[str]]:
    """The main job's warm-start and RL settings (configs/main-sft.yaml, configs/main-train.yaml) as the
    extra `sft` and `train` flags of every row. Group size: AT-GRPO's K and GRPO's G both default to 4."""
    import yaml

    sft = yaml.safe_load((ROOT / "configs" / "main-sft.yaml").read_text())["sft"]
    train = yaml.safe_load((ROOT / "configs" / "main-train.yaml").read_text())
    sft_args = [f"--{k.replace('_', '-')}={sft[k]}" for k in ("epochs", "batch_size", "lr")] + ["--heldout-demos=0"]
    if env == sft["env"]:  # the oracle's options are the main job's environment's (Plan-Path's tool program)
        sft_args += [f"--oracle-arg={k}={v}" for k, v in sft.get("oracle_args", {}).items()]
    elif env == "sokoban":
        sft_args += [f"--oracle-arg={a}" for a in SOKOBAN_ORACLE_ARGS]
    train_args = [f"--envs-per-step={train['run']['envs_per_step']}", f"--temperature={train['sampling']['temperature']}",
                  f"--lr={train['optim']['lr']}", f"--minibatch-size={train['optim']['minibatch_size']}", "--eval-episodes=0"]
    return sft_args, train_args


def command(env: str, args: argparse.Namespace) -> list[str]:
    sft_args, train_args = main_job_args(env)
    return ["leaderboard", "--env", env, "--model", args.model, "--steps", str(args.steps), "--n", str(args.n),
            "--seeds", args.seeds, "--warm-start-demos", str(args.demos), "--max-new-tokens", str(args.max_new_tokens),
            "--out-dir", args.out_dir, *(f"--env-arg={a}" for a in ENV_ARGS[env]),
            *(f"--sft-arg={a}" for a in sft_args), *(f"--train-arg={a}" for a in train_args)]


def ordering(results: list[dict]) -> str:
    """Say, link by link, whether single < single + GRPO <= MAS < MAS + AT-GRPO (the better of its two
    rows) holds on mean held-out success. A difference within the larger of the two rows' std over seeds
    is a tie: it satisfies "<=" but not "<"."""
    by_row = {r["row"]: r["success_rate"] for r in results}
    at_grpo = max((r for r in results if r["row"].startswith(ORDER[3])), key=lambda r: r["success_rate"]["mean"])
    chain = [(name, by_row[name]) for name in ORDER[:3]] + [(at_grpo["row"], at_grpo["success_rate"])]
    links, failed = [], []
    for ((na, a), (nb, b)), relation in zip(zip(chain, chain[1:]), ("<", "<=", "<")):
        diff, spread = b["mean"] - a["mean"], max(a["std"], b["std"])
        verdict = "holds" if diff > spread else "reversed" if diff < -spread else "tie"
        text = f"{na} {relation} {nb}: {verdict} ({a['mean']:.3f} vs {b['mean']:.3f}, seeds' spread {spread:.3f})"
        links.append(text)
        if verdict == "reversed" or (verdict == "tie" and relation == "<"):
            failed.append(text.split(":")[0])
    head = ("The papers' ordering holds here." if not failed else
            f"The papers' ordering does not hold here: {'; '.join(failed)}.")
    return head + " Link by link: " + "; ".join(links) + "."


def section(env: str, args: argparse.Namespace, results: list[dict], figure: Path) -> str:
    from llm_marl.leaderboard import markdown

    return (f"### {env}\n\n`llm-marl {shlex.join(command(env, args))}`\n\n{markdown(env, results)}\n\n"
            f"{ordering(results)}\n\n![{env} leaderboard]({figure.relative_to(ROOT) if figure.is_relative_to(ROOT) else figure})")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--envs", default="plan_path,sokoban", help="comma-separated: plan_path, sokoban")
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--steps", type=int, default=12,
                   help="RL steps of every trained row (12: the budget of the table in benchmarks.md; the main job takes 8)")
    p.add_argument("--n", type=int, default=32, help="held-out test episodes per row")
    p.add_argument("--demos", type=int, default=16, help="oracle episodes of each warm start (the main job's 16)")
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--out-dir", default=str(ROOT / "runs" / "leaderboard-bench"))
    p.add_argument("--figures", default=str(ROOT / "benchmarks" / "figures"), help="where the bar charts are copied")
    p.add_argument("--write", default=None, help="markdown file whose 'leaderboard' section to replace (benchmarks.md)")
    p.add_argument("--note", default="", help="a sentence for the section, e.g. how and where the rows were run")
    args = p.parse_args(argv)
    envs = [e for e in args.envs.split(",") if e]
    unknown = set(envs) - set(ENV_ARGS)
    if unknown:
        p.error(f"unknown env(s) {sorted(unknown)}: choose from {', '.join(ENV_ARGS)}")
    parts = []
    for env in envs:
        subprocess.run([sys.executable, "-m", "llm_marl.cli", *command(env, args)], cwd=ROOT, check=True)
        folder = Path(args.out_dir) / env
        results = json.loads((folder / "leaderboard.json").read_text())
        figure = Path(args.figures) / f"leaderboard_{env}.png"
        figure.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(folder / "leaderboard.png", figure)
        parts.append(section(env, args, results, figure))
        print(parts[-1], flush=True)
    body = (f"Model `{args.model}`, seeds {args.seeds}, {args.steps} RL steps per trained row, {args.n} held-out test "
            f"episodes per row (greedy), warm starts on {args.demos} oracle episodes of each row's variant. Mean ± std over "
            "seeds; \"format errors\" is the share of a role's replies that missed the answer format (mean over roles); "
            "\"train s\" is the mean wall time of a row's training (\"resumed\": it covers the last part only)."
            + (f" {args.note}" if args.note else "") + "\n\n" + "\n\n".join(parts))
    if args.write:
        write_section(args.write, "leaderboard", "The papers' comparison at CPU scale (AT-GRPO Table 1 rows)",
                      f"python benchmarks/leaderboard.py {shlex.join(argv if argv is not None else sys.argv[1:])}", body)


if __name__ == "__main__":
    main()
