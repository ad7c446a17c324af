"""Every llm-marl environment: its module, PettingZoo id, roles and arguments.

The table is the single source: `llm-marl envs` prints it, the README's table is checked against it
(tests/test_readme.py), and `register_all()` adds each entry to PettingZoo's registry under the namespace `llm_marl`
(`pettingzoo.make("aec", "llm_marl/PlanPath-v2")`), and each environment with a `parallel_env` to
the parallel registry too (`pettingzoo.make("parallel", "llm_marl/Math-v2")`).
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import inspect
from dataclasses import dataclass
from typing import Any

NAMESPACE = "llm_marl"


@dataclass(frozen=True)
class EnvEntry:
    name: str
    """Own name, e.g. `plan_path` (CLI `--env`)."""
    module: str
    """Versioned public module, e.g. `plan_path_v2`."""
    pz_id: str
    """PettingZoo registry id, e.g. `llm_marl/PlanPath-v2`."""
    roles: tuple[str, ...]
    summary: str
    paper: str
    variants: tuple[tuple[str, dict[str, Any]], ...] = (("mas", {}), ("planner", {"mode": "planner"}), ("tool", {"mode": "tool"}))
    """Named constructor options: the multi-agent workflow and the papers' single-agent baselines."""
    has_parallel: bool = False
    oracle_success: float = 1.0
    """Fraction of test instances the scripted oracle must solve (checked by the contract tests)."""
    oracle_turns: int | None = 1
    """Turns the oracle needs on every instance (None: any number)."""

    def load(self) -> Any:
        return importlib.import_module(f"llm_marl_envs.{self.module}")

    def kwargs(self) -> dict[str, Any]:
        """Constructor arguments and their defaults."""
        sig = inspect.signature(self.load().raw_env.__init__)
        return {n: p.default for n, p in sig.parameters.items() if n not in ("self", "sandbox", "render_mode")}


ENVS: dict[str, EnvEntry] = {
    e.name: e
    for e in [
        EnvEntry("plan_path", "plan_path_v2", f"{NAMESPACE}/PlanPath-v2", ("tool", "planner"),
                 "grid path planning with walls: the tool's program prints an action list, the planner decides", "AT-GRPO A.1.4, A.3"),
        EnvEntry("sokoban", "sokoban_v2", f"{NAMESPACE}/Sokoban-v2", ("tool", "planner"),
                 "push boxes onto goals: the tool's program searches moves, the planner decides", "AT-GRPO A.1.5"),
        EnvEntry("sudoku", "sudoku_v1", f"{NAMESPACE}/Sudoku-v1", ("tool", "planner"),
                 "fill a Sudoku with a unique solution: the tool's program solves, the planner verifies", "AT-GRPO A.1.3, A.2.2"),
        EnvEntry("code", "code_v4", f"{NAMESPACE}/Code-v4", ("coder", "tester"),
                 "stdin/stdout programming: the coder writes a program, the tester writes test cases", "AT-GRPO A.1.2, A.2.2",
                 variants=(("mas", {}), ("coder", {"mode": "coder"}))),
        EnvEntry("math", "math_v2", f"{NAMESPACE}/Math-v2", ("reasoner", "tool"),
                 "math word problems: the reasoner answers in \\boxed{}, the tool agent's program prints the answer", "AT-GRPO A.1.1, A.2.2",
                 variants=(("mas", {}), ("reasoner", {"mode": "reasoner"}), ("tool", {"mode": "tool"})), has_parallel=True),
        EnvEntry("deep_search", "deep_search_v3", f"{NAMESPACE}/DeepSearch-v3", ("planner", *(f"worker_{i}" for i in range(5))),
                 "multi-hop questions: the planner delegates search subtasks to workers that search and fetch over MCP", "MATPO; SHARP",
                 variants=(("mas", {}), ("single", {"mode": "single"})), oracle_success=0.95, oracle_turns=None),
        EnvEntry("mass", "mass_v4", f"{NAMESPACE}/MASS-v4", ("rewriter", "reranker", "answerer"),
                 "multi-hop questions: rewriter -> retrieval -> reranker -> answerer, shared answer-F1 reward", "MHGPO; MMOA-RAG",
                 variants=(("mas", {}), ("single", {"mode": "single"})), oracle_success=0.95, oracle_turns=None),
    ]
}


def did_you_mean(name: str, choices: Any) -> str:
    """' (did you mean 'x'?)' for the choice closest to a mistyped `name`, or '' when none is close."""
    close = difflib.get_close_matches(name.strip(), [str(c) for c in choices], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def get(name: str) -> EnvEntry:
    key = name.strip()
    for entry in ENVS.values():
        if key in (entry.name, entry.module, entry.pz_id):
            return entry
    for entry in ENVS.values():
        # Another version of a known environment: only the current one ships (PettingZoo's rule).
        if key.rsplit("_v", 1)[0] == entry.name or key.rsplit("-v", 1)[0] == entry.pz_id.rsplit("-v", 1)[0]:
            raise ValueError(f"{name!r} is not this release's version of {entry.name}: use {entry.name!r}, "
                             f"{entry.module!r} or {entry.pz_id!r} (what changed: the Version History in its docstring)")
    raise ValueError(f"unknown environment {name!r}{did_you_mean(key, ENVS)}; available: {', '.join(ENVS)} "
                     "(see `llm-marl envs`)")


def replacement(module: str) -> EnvEntry | None:
    """The entry whose current module replaced an older version's module name (`sokoban_v0` -> sokoban_v2)."""
    name, sep, version = module.rpartition("_v")
    for entry in ENVS.values():
        if sep and name == entry.name and version.isdigit() and int(version) < int(entry.module.rpartition("_v")[2]):
            return entry
    return None


def available() -> dict[str, EnvEntry]:
    """Entries whose module is present in this installation."""
    return {n: e for n, e in ENVS.items() if importlib.util.find_spec(f"llm_marl_envs.{e.module}") is not None}


_KINDS = {bool: ("true or false", (bool,)), int: ("a whole number", (int,)), float: ("a number", (int, float)),
          str: ("text", (str,))}
_OPTIONAL_KINDS = {"int | None": int, "float | None": float}
"""The annotations of options that default to None and otherwise take one kind of value (Sudoku's box_rows, Code's
time_limit_s)."""


def check_kwargs(name: str, kwargs: dict[str, Any]) -> None:
    """ValueError naming the options when one is unknown, and the option and the value expected when an
    option's value is of the wrong kind (e.g. `height='abc'` for an integer option); options without a
    typed default (or an `int | None` or `float | None` annotation) are left to the env."""
    entry = get(name)
    defaults = entry.kwargs()
    unknown = sorted(set(kwargs) - set(defaults) - {"sandbox", "render_mode"})
    if unknown:
        hint = did_you_mean(unknown[0], defaults) if len(unknown) == 1 else ""
        raise ValueError(f"{entry.name} has no option {', '.join(map(repr, unknown))}{hint}; its options: {', '.join(defaults)} "
                         "(`llm-marl envs` lists them with their defaults)")
    sandbox = kwargs.get("sandbox")
    if sandbox is not None and not callable(getattr(sandbox, "run", None)):  # else the first tool call raises
        raise ValueError(f"{entry.name}: sandbox must be an llm_marl_envs.sandbox.Sandbox (or None: the shared one), "
                         f"got {sandbox!r}")
    params = inspect.signature(entry.load().raw_env.__init__).parameters
    for key, value in kwargs.items():
        default, annotation = defaults.get(key), str(params[key].annotation)
        kind = type(default) if type(default) in _KINDS else _OPTIONAL_KINDS.get(annotation)
        if kind is None:
            continue
        if value is None and "None" in annotation:
            continue  # an option typed `int | None` (sokoban's max_solution_moves: None = no limit)
        what, accepted = _KINDS[kind]
        if not isinstance(value, accepted) or (isinstance(value, bool) and kind is not bool):
            raise ValueError(f"{entry.name} option {key} takes {what}{' or None' if 'None' in annotation else ''} "
                             f"(default {default!r}), got {value!r}" + (f": e.g. {key}={default!r}" if default is not None else ""))


def make(name: str, **kwargs: Any) -> Any:
    """The wrapped AEC env for `name` (own name, module name or PettingZoo id)."""
    check_kwargs(name, kwargs)
    return get(name).load().env(**kwargs)


def make_raw(name: str, **kwargs: Any) -> Any:
    check_kwargs(name, kwargs)
    return get(name).load().raw_env(**kwargs)


def register_all() -> None:
    from pettingzoo import aec_registry, parallel_registry, register

    for entry in available().values():
        if entry.pz_id not in aec_registry:
            register("aec", entry.pz_id, f"llm_marl_envs.{entry.module}:env")
        if entry.has_parallel and entry.pz_id not in parallel_registry:
            register("parallel", entry.pz_id, f"llm_marl_envs.{entry.module}:parallel_env")
