"""`llm-marl leaderboard`: run a paper's comparison rows (`baselines.rows`) and tabulate them.

    llm-marl leaderboard --env mass --model tiny-random --steps 1 --n 4

Each train row trains, then evaluates its adapters on the test split with the environment options
its run resolved (so the single-agent GRPO row is scored on the single-agent variant it trained on);
prompt-only rows evaluate the base model. The table (success rate, mean return of each role, train
and evaluation seconds, the exact command of each row) is printed as markdown and written to
`<out-dir>/<env>/leaderboard.md` and `leaderboard.json`. `--dry-run` prints the commands only.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def run_rows(env: str, model: str, engine: str, steps: int, n: int, out_dir: str | Path, env_args: Sequence[str] = (),
             max_new_tokens: int = 96, log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Train and evaluate every row of `env`; returns one result per row."""
    from baselines import rows
    from llm_marl.cli import UserError, main

    base = Path(out_dir) / env
    base.mkdir(parents=True, exist_ok=True)
    user = [*(f"--env-arg={a}" for a in env_args), "--max-new-tokens", str(max_new_tokens)]
    results = []
    for name, argv in rows(env, model=model, engine=engine, steps=steps, n_eval=n):
        key = slug(name)
        log(f"[{name}] llm-marl {shlex.join(argv)}")
        t0 = time.perf_counter()
        train_s = 0.0
        if argv[0] == "train":
            if main([*argv, *user, "--out-dir", str(base), "--run-name", key, "--no-progress"]) != 0:
                raise UserError(f"row {name!r} failed to train; its command: llm-marl {shlex.join(argv)}")
            train_s = time.perf_counter() - t0
            saved = json.loads((base / key / "config.json").read_text())
            evaluation = ["eval", "--env", env, "--model", model, "--engine", engine, "--n", str(n), "--split", "test",
                          "--adapters", str(base / key / "adapters"), "--policy", saved["model"]["policy"],
                          "--max-new-tokens", str(max_new_tokens),
                          *(f"--env-arg={k}={v!r}" for k, v in saved["resolved_env_args"].items())]
        else:
            evaluation = [*argv, *user]
        t1 = time.perf_counter()
        scores = base / f"{key}.eval.json"
        if main([*evaluation, "--out", str(scores)]) != 0:
            raise UserError(f"row {name!r} failed to evaluate; its command: llm-marl {shlex.join(evaluation)}")
        result = json.loads(scores.read_text())
        results.append({"row": name, "command": "llm-marl " + shlex.join(argv), "success_rate": result["success_rate"],
                        "mean_return": result["mean_return"], "episodes": result["episodes"],
                        "train_s": round(train_s, 1), "eval_s": round(time.perf_counter() - t1, 1)})
    return results


def markdown(env: str, results: list[dict[str, Any]]) -> str:
    roles = sorted({r for res in results for r in res["mean_return"]})
    lines = [f"| {env} row | success | " + " | ".join(f"return {r}" for r in roles) + " | train s | eval s |",
             "|---|---:|" + "---:|" * len(roles) + "---:|---:|"]
    for res in results:
        returns = " | ".join(f"{res['mean_return'][r]:.3f}" if r in res["mean_return"] else "-" for r in roles)
        lines.append(f"| {res['row']} | {res['success_rate']:.3f} | {returns} | {res['train_s']} | {res['eval_s']} |")
    return "\n".join(lines)


def cmd_leaderboard(args: Any) -> int:
    from baselines import rows
    from llm_marl.cli import UserError

    try:
        table = rows(args.env, model=args.model, engine=args.engine, steps=args.steps, n_eval=args.n)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if args.dry_run:
        for name, argv in table:
            print(f"{name}: llm-marl {shlex.join(argv)}")
        return 0
    results = run_rows(args.env, args.model, args.engine, args.steps, args.n, args.out_dir, args.env_arg, args.max_new_tokens,
                       log=lambda msg: print(msg, flush=True))
    text = markdown(args.env, results)
    folder = Path(args.out_dir) / args.env
    (folder / "leaderboard.md").write_text(text + "\n")
    (folder / "leaderboard.json").write_text(json.dumps(results, indent=2) + "\n")
    print(text)
    return 0


def add_command(sub: Any) -> None:
    p = sub.add_parser("leaderboard", help="run a paper's comparison rows (train + eval) and tabulate them")
    p.add_argument("--env", required=True, help="environment whose rows to run (see baselines.rows)")
    p.add_argument("--model", default="smollm2-135m", help="model of every row")
    p.add_argument("--engine", default="hf", choices=["hf", "vllm"], help="sampling backend of every row")
    p.add_argument("--steps", type=int, default=150, help="training steps of each train row (the papers' budget: 150)")
    p.add_argument("--n", type=int, default=100, help="test episodes per row")
    p.add_argument("--max-new-tokens", type=int, default=96, help="longest reply, in tokens")
    p.add_argument("--env-arg", action="append", default=[], metavar="KEY=VALUE", help="environment option for every row")
    p.add_argument("--out-dir", default="runs/leaderboard", help="where runs, scores and the table go")
    p.add_argument("--dry-run", action="store_true", help="print the rows' commands without running them")
    p.set_defaults(func=cmd_leaderboard)
