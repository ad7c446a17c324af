"""The papers' comparison rows as runnable `llm-marl` command lines.

    from baselines import rows
    for name, argv in rows("plan_path", model="Qwen/Qwen3-1.7B"):
        print("llm-marl", *argv)

AT-GRPO Table 1/2 compare, per task: a single agent (prompt only), a single agent trained with
GRPO, the multi-agent workflow prompt only, and the workflow trained with AT-GRPO with a shared or
a per-role policy. Each row here is the CLI invocation that produces it (train rows are followed by
`llm-marl eval --adapters <run>/adapters` on the test split); `llm-marl leaderboard --env ENV`
(`llm_marl.leaderboard`) runs them and tabulates the scores.

The search environments carry their own papers' rows: MASS (MHGPO Table 1: the prompted system
and MHGPO with IS / FoF / RR sampling; the MAPPO row needs a critic, which llm-marl does not
implement) and deep search (SHARP Table 1: a single searching agent, prompted and with GRPO, the
prompted planner-worker system, MATPO and SHARP).
"""

from __future__ import annotations

SINGLE_AGENT_VARIANT = {"plan_path": "planner", "sokoban": "planner", "sudoku": "planner", "code": "coder",
                        "math": "reasoner"}


SEARCH_ENVS = ("deep_search", "mass")


def rows(env: str, model: str = "smollm2-135m", engine: str = "hf", steps: int = 150, n_eval: int = 100) -> list[tuple[str, list[str]]]:
    """(row name, argv) for the comparison rows of `env` (AT-GRPO tasks, or the search papers' tables)."""
    if env not in SINGLE_AGENT_VARIANT and env not in SEARCH_ENVS:
        raise ValueError(f"no baseline rows for {env!r}; available: {', '.join([*SINGLE_AGENT_VARIANT, *SEARCH_ENVS])}")
    common = ["--model", model, "--engine", engine]
    train = ["train", "--env", env, *common, "--steps", str(steps)]
    evaluate = ["eval", "--env", env, "--model", model, "--engine", engine, "--n", str(n_eval), "--split", "test"]
    if env == "mass":
        return [("MAS, prompt only", evaluate),
                *[(f"MAS + MHGPO-{label}", [*train, "--algo", "mhgpo", "--sampling", s])
                  for s, label in (("is", "IS"), ("fof", "FoF"), ("rr", "RR"))]]
    if env == "deep_search":
        single = "--env-arg=mode='single'"
        return [("single agent", [*evaluate, single]),
                ("single agent + GRPO", [*train, "--algo", "grpo"]),
                ("planner-worker, prompt only", evaluate),
                ("planner-worker + MATPO", [*train, "--algo", "matpo"]),
                ("planner-worker + SHARP", [*train, "--algo", "sharp"])]
    single = f"--env-arg=mode={SINGLE_AGENT_VARIANT[env]!r}"
    return [
        ("single agent", [*evaluate, single]),
        ("single agent + GRPO", [*train, "--algo", "grpo"]),
        ("MAS, prompt only", evaluate),
        ("MAS + AT-GRPO, shared policy", [*train, "--algo", "at-grpo", "--policy", "shared"]),
        ("MAS + AT-GRPO, per-role policies", [*train, "--algo", "at-grpo", "--policy", "per-role"]),
    ]


def row_mode(env: str, argv: list[str]) -> str | None:
    """The environment variant a row plays (`mode`), None for the multi-agent workflow: its warm start
    learns from that variant's demonstrations."""
    for arg in argv:
        if arg.startswith("--env-arg=mode="):
            return arg.split("=", 2)[2].strip("'\"")
    if "--algo" in argv and argv[argv.index("--algo") + 1] == "grpo":
        return SINGLE_AGENT_VARIANT.get(env, "single")
    return None

