"""`llm-marl`: list environments, play an episode, train and evaluate.

    llm-marl envs
    llm-marl play --env plan_path --agent oracle --seed 0
    llm-marl play --env plan_path --agent api --base-url http://127.0.0.1:8000/v1 --model NAME
    llm-marl train --algo at-grpo --env plan_path
    llm-marl eval --env plan_path --split test

User errors (unknown environment, bad option) end in one line naming the fix, exit status 2; a closed stdout
pipe (`llm-marl envs | head -1`) ends quietly, exit status 141.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


class UserError(Exception):
    """A mistake the user can fix; printed without a traceback."""


def check_output_file(path: str | Path, flag: str) -> Path:
    """`path` as a file this process can write (its folder exists and is writable), checked before the work
    whose result it keeps; else a UserError naming `flag`."""
    path = Path(path)
    folder = path.parent
    if path.is_dir() or not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        why = ("it is a folder" if path.is_dir() else f"{folder} is not a folder" if not folder.is_dir()
               else "it cannot be written")
        raise UserError(f"{flag} {path}: {why}; pass a file in a writable folder")
    return path


def write_output_file(path: Path, text: str, flag: str) -> None:
    """Write a command's result to `path` (checked by `check_output_file`); a failure is a UserError."""
    try:
        # UTF-8 whatever the locale (a report page says it is); a lone surrogate, which UTF-8 cannot hold, as "?".
        path.write_text(text, encoding="utf-8", errors="replace")
    except OSError as exc:
        raise UserError(f"cannot write {flag} {path} ({exc.strerror or exc})") from None


def seed_arg(text: str) -> int:
    """argparse type of a --seed: a whole number >= 0 (numpy's generators take no other)."""
    try:
        seed = int(text)
    except ValueError:
        seed = -1
    if seed < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0, got {text!r}")
    return seed


_NOT_OPTIONS = {"render_mode": "the command chooses how episodes are shown",
                "sandbox": "a Sandbox object in Python; the commands make their own"}
"""Constructor arguments of every environment that are no option of the command line."""


def parse_env_args(pairs: Sequence[str]) -> dict[str, Any]:
    """`--env-arg height=6 --env-arg mode=planner` -> {"height": 6, "mode": "planner"}."""
    out: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise UserError(f"--env-arg expects KEY=VALUE, got {pair!r}")
        key, raw = pair.split("=", 1)
        if key.strip() in _NOT_OPTIONS:  # else play fails on two render modes, and sandbox=5 in the first tool call
            raise UserError(f"--env-arg {key.strip()} is no environment option ({_NOT_OPTIONS[key.strip()]}): drop it")
        try:
            out[key.strip()] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            out[key.strip()] = raw
    return out


# ---------------------------------------------------------------------------- envs
def cmd_envs(args: argparse.Namespace) -> int:
    from llm_marl_envs import registry

    entries = registry.available()
    if args.json:
        print(json.dumps({n: {"pettingzoo_id": e.pz_id, "module": e.module, "roles": list(e.roles),
                              "options": {k: repr(v) for k, v in e.kwargs().items()}, "paper": e.paper}
                          for n, e in entries.items()}, indent=2))
        return 0
    for name, entry in entries.items():
        print(f"{name}  ({entry.pz_id}, module llm_marl_envs.{entry.module})")
        print(f"  {entry.summary}  [{entry.paper}]")
        print(f"  roles: {', '.join(entry.roles)}")
        opts = ", ".join(f"{k}={v!r}" for k, v in entry.kwargs().items())
        print(f"  options: {opts}")
    return 0


# ---------------------------------------------------------------------------- play
def add_api_arguments(p: argparse.ArgumentParser, what: str) -> None:
    """The OpenAI-compatible endpoint's flags, shared by `play --agent api` and `eval --engine api`."""
    p.add_argument("--base-url", default=None, help=f"with {what}: the OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--api-key", default=None, help=f"with {what}: the endpoint's key (default: $OPENAI_API_KEY; local servers need none)")
    p.add_argument("--api-timeout", type=float, default=60.0, help=f"with {what}: seconds to wait to connect and for each part of an answer")
    p.add_argument("--api-deadline", type=float, default=1800.0,
                   help=f"with {what}: seconds one request may take in all, its retries included (a server that answers "
                        "a byte at a time is never timed out by --api-timeout)")
    p.add_argument("--api-retries", type=int, default=2, help=f"with {what}: retries of a failed or timed-out request")


def make_api_engine(args: argparse.Namespace, what: str) -> Any:
    """The `api` engine of the command line, or a UserError naming the missing flag."""
    from llm_marl.engines.api import APIEngine, APIError

    if not args.base_url or not args.model:
        raise UserError(f"{what} needs --base-url (an OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1) "
                        "and --model (the model name it serves)")
    try:
        return APIEngine(base_url=args.base_url, model=args.model, api_key=args.api_key, timeout_s=args.api_timeout,
                         max_retries=args.api_retries, thinking=args.thinking, deadline_s=args.api_deadline)
    except (ValueError, APIError) as exc:
        raise UserError(str(exc)) from None


def make_agent(kind: str, env_name: str, seed: int, args: argparse.Namespace | None = None,
               env_kwargs: dict[str, Any] | None = None) -> Any:
    # The CLI is the application layer: it may use agents/ (the trainer modules never do).
    if kind == "api":
        from agents.llm import LLMAgent

        from llm_marl.engines import SamplingParams

        try:
            sampling = SamplingParams(temperature=args.temperature, max_new_tokens=args.max_new_tokens)
        except ValueError as exc:
            raise UserError(str(exc)) from None
        # an OpenAICompatibleAgent, with the CLI's one-line errors
        return LLMAgent(make_api_engine(args, "--agent api"), sampling=sampling)
    if kind == "oracle":
        from agents.oracle import make_oracle

        try:
            return make_oracle(env_name, env_kwargs)  # with the env's options it must share (mass's corpus_seed)
        except ValueError as exc:  # an oracle that cannot play this configuration (a search env's dataset)
            raise UserError(str(exc)) from None
    if kind == "random":
        from agents.random_agent import RandomAgent

        return RandomAgent(env_name, seed)
    if kind == "garbage":
        from agents.garbage import GarbageAgent

        return GarbageAgent(seed)
    raise UserError(f"unknown agent {kind!r}; use oracle, random, garbage or api")


def boards_once(frames: Sequence[str]) -> list[str]:
    """The rendered frames of an episode with each board printed once: a frame whose board did not
    change since the previous frame keeps its header line and the reply, not the board again."""
    out, last = [], None
    for frame in frames:
        head, sep, tail = frame.partition("\n--- last reply")
        header, _, board = head.partition("\n")
        out.append(frame if board != last else f"{header} (board unchanged){sep}{tail}")
        last = board
    return out


def cmd_play(args: argparse.Namespace) -> int:
    from agents import run_episode
    from llm_marl.evaluate import ALL, episode_tasks
    from llm_marl_envs import registry

    entry = _env_entry(args.env)
    kwargs = parse_env_args(args.env_arg)
    try:
        env = registry.make(entry.name, render_mode="ansi", **kwargs)
    except (TypeError, ValueError) as exc:
        raise UserError(f"cannot build {entry.name}: {exc}") from None
    episodes = [(args.seed, args.split, None)]  # (seed, split, dataset row or None)
    if args.split == ALL:
        try:  # every row of the dataset once, the episodes `eval --split all` plays (its rules and its errors)
            episodes = [(t.seed, t.options["split"], t.options["instance"])
                        for t in episode_tasks(entry.name, None, ALL, args.seed, kwargs, asked=None)]
        except ValueError as exc:
            raise UserError(str(exc)) from None
    elif (rows := env.unwrapped.dataset_instances(args.split)) is not None and not rows:
        # The episode's reset would raise it as a traceback: a dataset's rows need not fill every split.
        raise UserError(f"{entry.name}'s dataset has {len(env.unwrapped.dataset_instances())} rows, none of them in the "
                        f"{args.split!r} split: use --split all (every row once), another split, or a larger dataset")
    agent = make_agent(args.agent, entry.name, args.seed, args, kwargs)
    from llm_marl.engines.api import APIError

    successes = 0
    try:
        for row, (seed, split, instance) in enumerate(episodes):
            result = run_episode(env, agent, seed=seed, split=split, instance=instance, render=not args.quiet)
            for frame in boards_once(result.renders):
                print(frame)
                print()
            summary = {"env": entry.name, "agent": args.agent, "seed": seed, "split": split,
                       **({"row": row} if instance is not None else {}), "success": result.success, "turns": result.turns,
                       "returns": result.returns, "parse_errors": result.parse_errors}
            print(json.dumps(summary), flush=True)
            successes += result.success
    except (ValueError, APIError) as exc:  # ValueError: a configuration without instances (reset says so), as in eval
        raise UserError(str(exc)) from None
    finally:
        if args.agent == "api":
            agent.engine.close()
    if args.split == ALL:
        print(json.dumps({"env": entry.name, "agent": args.agent, "split": ALL, "episodes": len(episodes), "successes": successes}))
    return 0


def _env_entry(name: str) -> Any:
    from llm_marl_envs import registry

    try:
        entry = registry.get(name)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if entry.name not in registry.available():
        raise UserError(f"environment {entry.name!r} is not installed in this version")
    return entry


# ---------------------------------------------------------------------------- main
class _VersionAction(argparse.Action):
    """`--version`, with the git commit read only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any):
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        from llm_marl.provenance import version_line

        print(version_line())
        parser.exit()


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="llm-marl", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action=_VersionAction, help="print llm-marl's version (and git commit) and exit")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("envs", help="list environments, their roles and options")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_envs)

    p = sub.add_parser("play", help="play and render one episode (--split all: every row of a dataset) with a scripted agent "
                       "or a served model")
    p.add_argument("--env", required=True, help="environment name (see `llm-marl envs`)")
    p.add_argument("--agent", default="oracle", help="oracle | random | garbage | api (a served model: --base-url, --model)")
    p.add_argument("--model", default=None, help="with --agent api: the model name the server serves")
    p.add_argument("--seed", type=seed_arg, default=0, help="instance seed")
    p.add_argument("--split", default="test", choices=["train", "val", "test", "all"],
                   help="split the instance is drawn from; all: every row of the dataset once, one episode each "
                   "(environments given a dataset file, folder or Hub id), then a line of totals")
    p.add_argument("--env-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="environment option, e.g. --env-arg mode=planner --env-arg height=6")
    p.add_argument("--quiet", action="store_true", help="print only the JSON summary")
    add_api_arguments(p, "--agent api")
    p.add_argument("--thinking", action=argparse.BooleanOptionalAction, default=None,
                   help="with --agent api: ask the server to let a thinking model (Qwen3) reason before each reply, or not "
                        "(its chat template's enable_thinking); default: the server's")
    p.add_argument("--temperature", type=float, default=0.0, help="with --agent api: sampling temperature (0: greedy)")
    p.add_argument("--max-new-tokens", type=int, default=256, help="with --agent api: longest reply, in tokens")
    p.set_defaults(func=cmd_play)

    from llm_marl import train_cli

    train_cli.add_commands(sub, list(argv))
    from llm_marl import leaderboard

    leaderboard.add_command(sub)
    from llm_marl import report

    report.add_command(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        try:
            return _run(argv)
        finally:
            sys.stdout.flush()  # a closed pipe is found here (after --version too), not at the interpreter's exit
    except BrokenPipeError:
        # stdout is a pipe its reader closed (`llm-marl envs | head -1`): stop quietly, as Unix tools do (128 + SIGPIPE);
        # stdout goes to devnull, so the rest of its buffer is not written at exit, with another BrokenPipeError.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def _run(argv: Sequence[str] | None) -> int:
    from llm_marl.threads import prepare_openmp

    prepare_openmp()  # before anything loads torch
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    from llm_marl.interrupts import sigterm_interrupts, stopped_by

    try:
        with sigterm_interrupts():
            return int(args.func(args) or 0)
    except UserError as exc:
        print(f"llm-marl: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM outside training (which says more and returns)
        what, code = stopped_by(exc)
        print(f"llm-marl: {what}", file=sys.stderr)
        return code


if __name__ == "__main__":
    from llm_marl.cli import main as _main  # `python -m llm_marl.cli`: one UserError class, the package's

    sys.exit(_main())
