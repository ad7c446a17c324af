"""`llm-marl`: list environments, play an episode, train and evaluate.

    llm-marl envs
    llm-marl play --env plan_path --agent oracle --seed 0
    llm-marl train --algo at-grpo --env plan_path
    llm-marl eval --env plan_path --split test

User errors (unknown environment, bad option) end in one line naming the fix, exit status 2.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections.abc import Sequence
from typing import Any


class UserError(Exception):
    """A mistake the user can fix; printed without a traceback."""


def parse_env_args(pairs: Sequence[str]) -> dict[str, Any]:
    """`--env-arg height=6 --env-arg mode=planner` -> {"height": 6, "mode": "planner"}."""
    out: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise UserError(f"--env-arg expects KEY=VALUE, got {pair!r}")
        key, raw = pair.split("=", 1)
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
def make_agent(kind: str, env_name: str, seed: int) -> Any:
    # The CLI is the application layer: it may use agents/ (the trainer modules never do).
    if kind == "oracle":
        from agents.oracle import make_oracle

        return make_oracle(env_name)
    if kind == "random":
        from agents.random_agent import RandomAgent

        return RandomAgent(env_name, seed)
    if kind == "garbage":
        from agents.garbage import GarbageAgent

        return GarbageAgent(seed)
    raise UserError(f"unknown agent {kind!r}; use oracle, random or garbage")


def cmd_play(args: argparse.Namespace) -> int:
    from agents import run_episode
    from llm_marl_envs import registry

    entry = _env_entry(args.env)
    kwargs = parse_env_args(args.env_arg)
    try:
        env = registry.make(entry.name, render_mode="ansi", **kwargs)
    except (TypeError, ValueError) as exc:
        raise UserError(f"cannot build {entry.name}: {exc}") from None
    agent = make_agent(args.agent, entry.name, args.seed)
    result = run_episode(env, agent, seed=args.seed, split=args.split, render=not args.quiet)
    for frame in result.renders:
        print(frame)
        print()
    summary = {"env": entry.name, "agent": args.agent, "seed": args.seed, "split": args.split,
               "success": result.success, "turns": result.turns, "returns": result.returns,
               "parse_errors": result.parse_errors}
    print(json.dumps(summary))
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
def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="llm-marl", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("envs", help="list environments, their roles and options")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_envs)

    p = sub.add_parser("play", help="play and render one episode with a scripted agent")
    p.add_argument("--env", required=True, help="environment name (see `llm-marl envs`)")
    p.add_argument("--agent", default="oracle", help="oracle | random | garbage")
    p.add_argument("--seed", type=int, default=0, help="instance seed")
    p.add_argument("--split", default="test", choices=["train", "val", "test"])
    p.add_argument("--env-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="environment option, e.g. --env-arg mode=planner --env-arg height=6")
    p.add_argument("--quiet", action="store_true", help="print only the JSON summary")
    p.set_defaults(func=cmd_play)

    from llm_marl import train_cli

    train_cli.add_commands(sub, list(argv))
    from llm_marl import leaderboard

    leaderboard.add_command(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from llm_marl.threads import prepare_openmp

    prepare_openmp()  # before anything loads torch
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"llm-marl: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
