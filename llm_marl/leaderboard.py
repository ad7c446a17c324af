"""`llm-marl leaderboard`: run a paper's comparison rows (`baselines.rows`) over seeds and tabulate them.

    llm-marl leaderboard --env mass --model tiny-random --steps 1 --n 4
    llm-marl leaderboard --env plan_path --seeds 0,1,2 --warm-start-demos 32 --steps 16 --n 32

Per seed, each train row trains (`--seed`), then evaluates its adapters on the test split with the
environment options its run resolved (so the single-agent GRPO row is scored on the single-agent
variant it trained on); prompt-only rows evaluate the policy as it starts. With `--warm-start-demos N`
every row of a seed starts from the same kind of warm start: `llm-marl sft` on N oracle episodes of
the variant the row plays (single agent or workflow), so a prompt-only row is the warm-started policy
without RL and a trained row adds RL on top; every trained row has the same budget (`--steps` x
`--envs-per-step`). All rows are scored on the same test instances. The table gives mean ± std over
seeds of the success rate, the final team reward and each role's mean step reward (the README's
"Scores"); it is printed as markdown and written to `<out-dir>/<env>/leaderboard.md`,
`leaderboard.json` and a bar chart `leaderboard.png`. `--dry-run` prints the commands only.

A row's scores are kept in `<out-dir>/<env>/seed<S>/<row>.result.json` once it is evaluated, so the same
command run again after a kill skips finished rows and warm starts and resumes a row's training from
its last checkpoint (the table's "train s" then says "resumed": it covers the last part only).
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import re
import shlex
import shutil
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def run_rows(env: str, model: str, engine: str, steps: int, n: int, out_dir: str | Path, env_args: Sequence[str] = (),
             max_new_tokens: int = 96, seeds: Sequence[int] = (0,), demos: int = 0, sft_args: Sequence[str] = (),
             train_args: Sequence[str] = (), log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Train and evaluate every row of `env` for each seed; returns one result per row (with its seeds)."""
    from baselines import row_mode, rows
    from llm_marl.cli import UserError, main
    from llm_marl.interrupts import Terminated

    user = [*(f"--env-arg={a}" for a in env_args), "--max-new-tokens", str(max_new_tokens)]
    table = rows(env, model=model, engine=engine, steps=steps, n_eval=n)
    results = {name: {"row": name, "command": "llm-marl " + shlex.join(argv), "seeds": []} for name, argv in table}

    def call(argv: list[str], what: str) -> None:
        log(f"[{what}] llm-marl {shlex.join(argv)}")
        code = main(argv)
        if code in (130, 143):  # Ctrl-C or SIGTERM, which the command has said: stop the whole table
            log("the leaderboard stopped; run the same command again to continue (finished rows are reused)")
            raise Terminated() if code == 143 else KeyboardInterrupt()
        if code == 141:  # its stdout, the table's too, is a pipe whose reader closed it: main stops quietly with 141
            raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))
        if code != 0:
            raise UserError(f"{what} failed; its command: llm-marl {shlex.join(argv)}")

    # What a seed folder's results depend on: reusing them under other settings would mix two tables.
    spec = {"model": model, "engine": engine, "steps": steps, "n": n, "env_args": list(env_args), "max_new_tokens": max_new_tokens,
            "warm_start_demos": demos, "sft_args": list(sft_args), "train_args": list(train_args)}
    for seed in seeds:
        base = Path(out_dir) / env / f"seed{seed}"
        base.mkdir(parents=True, exist_ok=True)
        spec_file = base / "settings.json"
        if spec_file.is_file() and json.loads(spec_file.read_text()) != spec:
            raise UserError(f"{base} holds rows run with other settings ({spec_file}); run again with those settings "
                            "to finish them, or choose another --out-dir")
        spec_file.write_text(json.dumps(spec, indent=1) + "\n")
        warm: dict[str | None, Path] = {}
        for name, argv in table:
            key, mode = slug(name), row_mode(env, argv)
            if demos and mode not in warm:
                warm[mode] = base / f"sft-{mode or 'workflow'}"
                if (warm[mode] / "summary.json").is_file():
                    log(f"[seed {seed}: warm start {mode or 'workflow'}] done before, reusing {warm[mode]}")
                else:
                    shutil.rmtree(warm[mode], ignore_errors=True)  # a warm start cut short is redone (minutes)
                    call(["sft", "--env", env, *(f"--env-arg={a}" for a in env_args), *([f"--env-arg=mode={mode!r}"] if mode else []),
                          "--model", model, "--demos", str(demos), "--seed", str(seed), "--out-dir", str(base),
                          "--run-name", warm[mode].name, *sft_args], f"seed {seed}: warm start {mode or 'workflow'}")
            # A row's scores are kept once it is evaluated: a killed leaderboard, run again with the same
            # command, skips the rows it finished and resumes a row's training from its last checkpoint.
            done = base / f"{key}.result.json"
            if done.is_file():
                log(f"[seed {seed}: {name}] done before, reusing {done}")
                entry = json.loads(done.read_text())
                if "format_error_rate" not in entry and (scores := base / f"{key}.eval.json").is_file():  # kept before the column
                    entry["format_error_rate"] = json.loads(scores.read_text())["format_error_rate"]
                results[name]["seeds"].append(entry)
                continue
            init = ["--init-adapters", str(warm[mode])] if demos else []
            train = {"train_s": 0.0, "resumed": False}
            if argv[0] == "train":
                run_dir, timing = base / key, base / f"{key}.train.json"
                if not (run_dir / "summary.json").is_file():
                    t0, resumed = time.perf_counter(), run_dir.exists()
                    if resumed:
                        call(["train", "--resume", str(run_dir), "--no-progress"], f"seed {seed}: {name}, resuming")
                    else:
                        call([*argv, *user, *init, *train_args, "--seed", str(seed), "--out-dir", str(base), "--run-name", key,
                              "--no-progress"], f"seed {seed}: {name}")
                    timing.write_text(json.dumps({"train_s": round(time.perf_counter() - t0, 1), "resumed": resumed}) + "\n")
                # The wall time of a training run in one piece; a resumed one's covers only its last part.
                train = json.loads(timing.read_text()) if timing.is_file() else {"train_s": None, "resumed": True}
                saved = json.loads((run_dir / "config.json").read_text())
                evaluation = ["eval", "--env", env, "--model", model, "--engine", engine, "--n", str(n), "--split", "test",
                              "--adapters", str(run_dir / "adapters"), "--policy", saved["model"]["policy"],
                              "--max-new-tokens", str(max_new_tokens),
                              *(f"--env-arg={k}={v!r}" for k, v in saved["resolved_env_args"].items())]
            else:
                evaluation = [*argv, *user, *(["--adapters", str(warm[mode] / "adapters")] if demos else [])]
            t1 = time.perf_counter()
            scores = base / f"{key}.eval.json"
            call([*evaluation, "--out", str(scores)], f"seed {seed}: {name}, evaluation")
            result = json.loads(scores.read_text())
            entry = {"seed": seed, "success_rate": result["success_rate"], "final_team_reward": result["final_team_reward"],
                     "mean_reward": result["mean_reward"], "mean_return": result["mean_return"], "episodes": result["episodes"],
                     "format_error_rate": result["format_error_rate"],
                     **train, "eval_s": round(time.perf_counter() - t1, 1)}
            done.write_text(json.dumps(entry) + "\n")
            results[name]["seeds"].append(entry)
    return [aggregate(r) for r in results.values()]


def _mean_std(values: list[float]) -> dict[str, float]:
    return {"mean": statistics.fmean(values), "std": statistics.stdev(values) if len(values) > 1 else 0.0}


def aggregate(result: dict[str, Any]) -> dict[str, Any]:
    """Mean and sample std over seeds of each score."""
    per_seed = result["seeds"]
    roles = sorted({role for s in per_seed for role in s["mean_reward"]})
    return {**result,
            "success_rate": _mean_std([s["success_rate"] for s in per_seed]),
            "final_team_reward": _mean_std([s["final_team_reward"] for s in per_seed]),
            # The share of a role's replies that missed the answer format, averaged over roles: why a row scores 0.
            "format_errors": (_mean_std([statistics.fmean(s["format_error_rate"].values()) for s in per_seed])
                              if all(s.get("format_error_rate") for s in per_seed) else None),
            "mean_reward": {role: _mean_std([s["mean_reward"][role] for s in per_seed if role in s["mean_reward"]]) for role in roles},
            "episodes": per_seed[0]["episodes"], "resumed": any(s.get("resumed") for s in per_seed),
            "train_s": round(statistics.fmean(times), 1) if (times := [s["train_s"] for s in per_seed if s.get("train_s") is not None]) else None}


def markdown(env: str, results: list[dict[str, Any]]) -> str:
    roles = sorted({r for res in results for r in res["mean_reward"]})
    show = lambda m: f"{m['mean']:.3f} ± {m['std']:.3f}"  # noqa: E731
    seeds = len(results[0]["seeds"]) if results else 0
    lines = [f"| {env} row ({seeds} seed{'s' * (seeds != 1)}) | success | final team reward | "
             + " | ".join(f"reward {r}" for r in roles) + " | format errors | train s |",
             "|---|---:|---:|" + "---:|" * len(roles) + "---:|---:|"]
    for res in results:
        rewards = " | ".join(show(res["mean_reward"][r]) if r in res["mean_reward"] else "-" for r in roles)
        errors = "-" if res.get("format_errors") is None else show(res["format_errors"])
        train_s = "-" if res["train_s"] is None else f"{res['train_s']}{' (resumed)' if res.get('resumed') else ''}"
        lines.append(f"| {res['row']} | {show(res['success_rate'])} | {show(res['final_team_reward'])} | {rewards} | {errors} "
                     f"| {train_s} |")
    return "\n".join(lines)


def bar_chart(env: str, results: list[dict[str, Any]], path: str | Path) -> Path:
    """Success rate and final team reward per row, mean with a bar of ± one std over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["row"] for r in results]
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(names)), 4), constrained_layout=True)
    width = 0.38
    for i, (key, label) in enumerate((("success_rate", "success"), ("final_team_reward", "final team reward"))):
        xs = [j + (i - 0.5) * width for j in range(len(names))]
        ax.bar(xs, [r[key]["mean"] for r in results], width, yerr=[r[key]["std"] for r in results], capsize=3, label=label)
    ax.set_xticks(range(len(names)), names, rotation=15, ha="right", fontsize=8)
    ax.set(ylim=(0, 1.05), ylabel="held-out test, greedy", title=f"{env}: mean ± std over {len(results[0]['seeds'])} seed(s)")
    ax.legend(fontsize=8)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)


_SET_BY_ROWS = {"--train-arg": ("--env", "--algo", "--policy", "--model", "--engine", "--steps", "--seed", "--out-dir",
                                "--run-name", "--init-adapters", "--resume", "--config"),
                "--sft-arg": ("--env", "--model", "--demos", "--seed", "--out-dir", "--run-name", "--config")}
"""The flags each row's train or sft command is given by the leaderboard (what tells the rows apart, its own flags, where
its results go): an extra argument naming one would override or be overridden by the row's, and the table's names lie."""


def _subcommands(argv: Sequence[str]) -> dict[str, argparse.ArgumentParser]:
    """The train, sft and eval parsers as `llm-marl <argv>` builds them (train's flags depend on its --algo)."""
    from llm_marl.train_cli import add_commands

    sub = argparse.ArgumentParser().add_subparsers()
    add_commands(sub, argv)
    return sub.choices


def _flag_action(parser: argparse.ArgumentParser, option: str, arg: str) -> argparse.Action | None:
    """The option of `parser` that `arg` names as argparse reads it (a long option may be cut to any unique prefix:
    --alg=grpo is --algo), or None for a value."""
    from llm_marl.cli import UserError

    flag = arg.split("=", 1)[0]
    actions = parser._option_string_actions  # argparse's own table of option strings, the one its matching reads
    if flag in actions or not flag.startswith("--"):
        return actions.get(flag)
    matches = {o: a for o, a in actions.items() if o.startswith(flag)} if parser.allow_abbrev else {}
    if len({id(a) for a in matches.values()}) > 1:  # the row's command would stop on it, after the rows before it ran
        raise UserError(f"{option}={arg}: {flag} could be {', '.join(sorted(matches))}; write the flag in full")
    return next(iter(matches.values()), None)


def check_extra_args(args: Any, table: Sequence[tuple[str, Sequence[str]]]) -> None:
    """A UserError, before any row runs, for an --env-arg, --train-arg or --sft-arg that would make a row other than its name."""
    from llm_marl.cli import UserError, parse_env_args

    if "mode" in parse_env_args(args.env_arg):  # a malformed KEY=VALUE is refused here too
        raise UserError("--env-arg mode: every row plays its own variant (the single-agent rows one, the others the "
                        "workflow), which it would replace; drop it")
    # Train's flags depend on its --algo: each train row's own parser; sft's are the same for every row.
    trained = list(dict.fromkeys(tuple(argv) for _, argv in table if argv[0] == "train")) or [("train",)]  # in the rows' order
    commands = [_subcommands(argv) for argv in trained]
    parsers = {"--train-arg": [c["train"] for c in commands], "--sft-arg": [commands[0]["sft"]]}
    for option, flags in _SET_BY_ROWS.items():
        for parser in parsers[option]:
            before = None  # the option an argument's value follows, when it is the next argument
            for arg in getattr(args, option[2:].replace("-", "_")):
                action = _flag_action(parser, option, arg)
                if action is None:  # a value: of the option before it, when that one was given without "="
                    named, value = before, arg
                else:
                    named, value = action, arg.split("=", 1)[1] if "=" in arg else ""
                if named is not None and "--env-arg" in named.option_strings and value.startswith("mode="):
                    raise UserError(f"{option}={arg}: the leaderboard sets --env-arg mode of every row itself (each row "
                                    "plays its own variant); drop it")
                if action is not None and (flag := next((f for f in flags if f in action.option_strings), None)):
                    raise UserError(f"{option}={arg}: the leaderboard sets {flag} of every row itself (what tells the rows "
                                    "apart, its own flags, or where the results go); drop it")
                before = action if action is not None and "=" not in arg else None


def cmd_leaderboard(args: Any) -> int:
    from baselines import rows
    from llm_marl.cli import UserError, _env_entry, seed_arg
    from llm_marl.config import check_at_least

    # Any name the other commands take (its module, its PettingZoo id), and their error for a mistyped one.
    args.env = _env_entry(args.env).name
    try:
        # Checked here, not by the first row to run after hours of others.
        check_at_least(("--steps", args.steps, 1), ("--n", args.n, 1), ("--max-new-tokens", args.max_new_tokens, 1),
                       ("--warm-start-demos", args.warm_start_demos, 0))
        table = rows(args.env, model=args.model, engine=args.engine, steps=args.steps, n_eval=args.n)
        check_extra_args(args, table)
        seeds = [seed_arg(s.strip()) for s in args.seeds.split(",") if s.strip()]
    except ValueError as exc:
        raise UserError(str(exc)) from None
    except argparse.ArgumentTypeError as exc:
        raise UserError(f"--seeds takes whole numbers >= 0 like 0,1,2: {exc}") from None
    if not seeds:
        raise UserError("--seeds needs at least one seed, e.g. --seeds 0,1,2")
    if len(set(seeds)) < len(seeds):  # a seed's rows run once: given twice, they would count as two seeds in mean ± std
        twice = sorted({s for s in seeds if seeds.count(s) > 1})
        raise UserError(f"--seeds names seed {', '.join(map(str, twice))} more than once; give distinct seeds, e.g. 0,1,2")
    if args.dry_run:
        for name, argv in table:
            print(f"{name}: llm-marl {shlex.join(argv)}")
        return 0
    if args.engine == "vllm":
        from llm_marl.train_cli import require_vllm

        try:
            require_vllm()  # here, not in the first row to sample, after the warm starts before it
        except ValueError as exc:
            raise UserError(str(exc)) from None
    results = run_rows(args.env, args.model, args.engine, args.steps, args.n, args.out_dir, args.env_arg, args.max_new_tokens,
                       seeds=seeds, demos=args.warm_start_demos, sft_args=args.sft_arg, train_args=args.train_arg,
                       log=lambda msg: print(msg, flush=True))
    text = markdown(args.env, results)
    folder = Path(args.out_dir) / args.env
    (folder / "leaderboard.md").write_text(text + "\n")
    (folder / "leaderboard.json").write_text(json.dumps(results, indent=2) + "\n")
    bar_chart(args.env, results, folder / "leaderboard.png")
    print(text)
    return 0


def add_command(sub: Any) -> None:
    p = sub.add_parser("leaderboard", help="run a paper's comparison rows (warm start, train, eval) over seeds and tabulate them")
    p.add_argument("--env", required=True, help="environment whose rows to run (see baselines.rows)")
    p.add_argument("--model", default="smollm2-135m", help="model of every row")
    p.add_argument("--engine", default="hf", choices=["hf", "vllm"], help="sampling backend of every row")
    p.add_argument("--steps", type=int, default=150, help="training steps of each train row (the papers' budget: 150)")
    p.add_argument("--n", type=int, default=100, help="test episodes per row (the same instances for every row and seed)")
    p.add_argument("--seeds", default="0", help="comma-separated run seeds, e.g. 0,1,2: mean ± std over them")
    p.add_argument("--warm-start-demos", type=int, default=0,
                   help="start every row from `llm-marl sft` on this many oracle episodes of its variant (0 = the base model)")
    p.add_argument("--sft-arg", action="append", default=[], metavar="ARG", help="extra `llm-marl sft` argument, e.g. --sft-arg=--epochs=1")
    p.add_argument("--train-arg", action="append", default=[], metavar="ARG",
                   help="extra argument of every train row, e.g. --train-arg=--lr=2e-4 (the same budget for all)")
    p.add_argument("--max-new-tokens", type=int, default=96, help="longest reply, in tokens")
    p.add_argument("--env-arg", action="append", default=[], metavar="KEY=VALUE", help="environment option for every row")
    p.add_argument("--out-dir", default="runs/leaderboard", help="where runs, scores and the table go")
    p.add_argument("--dry-run", action="store_true", help="print the rows' commands without running them")
    p.set_defaults(func=cmd_leaderboard)
