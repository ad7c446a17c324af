"""The environment registry on its own: it imports what it uses, and names resolve to the current versions."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import llm_marl_envs
from llm_marl_envs import registry

ROOT = Path(llm_marl_envs.__file__).resolve().parent.parent


def test_registry_works_in_a_clean_interpreter():
    """`importlib.util` is a submodule: `import importlib` alone does not load it. In a clean
    interpreter (-I -S: no site hooks that happen to import it) the registry must still list the
    environments. The package's own __init__ (which imports PettingZoo) is stubbed out so that
    nothing else loads importlib.util first."""
    program = (
        "import sys, types\n"
        f"root = {str(ROOT)!r}\n"
        "sys.path.insert(0, root)\n"
        "package = types.ModuleType('llm_marl_envs')\n"
        "package.__path__ = [root + '/llm_marl_envs']\n"
        "sys.modules['llm_marl_envs'] = package\n"
        "assert 'importlib.util' not in sys.modules, 'not a clean interpreter'\n"
        "from llm_marl_envs import registry\n"
        "print(','.join(sorted(registry.available())))\n"
    )
    done = subprocess.run([sys.executable, "-I", "-S", "-c", program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ",".join(sorted(registry.ENVS))


@pytest.mark.parametrize("name", sorted(registry.ENVS))
def test_short_names_module_names_and_ids_resolve_to_one_entry(name):
    entry = registry.get(name)
    assert registry.get(entry.module) is entry and registry.get(entry.pz_id) is entry
    assert entry.module.startswith(f"{name}_v") and entry.pz_id.endswith(entry.module.rsplit("_v", 1)[1])
    assert entry.load().raw_env.metadata["name"] == entry.module


@pytest.mark.parametrize("old,current", [("plan_path_v0", "plan_path_v2"), ("plan_path_v1", "llm_marl/PlanPath-v2"),
                                         ("llm_marl/Sokoban-v0", "llm_marl/Sokoban-v2"), ("sokoban_v1", "sokoban_v2"),
                                         ("sudoku_v0", "llm_marl/Sudoku-v1"), ("llm_marl/Math-v0", "math_v2"), ("llm_marl/Math-v1", "math_v2"),
                                         ("mass_v0", "mass_v4"), ("llm_marl/MASS-v1", "mass_v4"), ("llm_marl/MASS-v2", "mass_v4"), ("llm_marl/MASS-v3", "mass_v4"),
                                         ("llm_marl/DeepSearch-v0", "deep_search_v3"), ("deep_search_v1", "llm_marl/DeepSearch-v3"), ("deep_search_v2", "deep_search_v3"),
                                         ("code_v0", "llm_marl/Code-v4"), ("llm_marl/Code-v1", "code_v4"), ("llm_marl/Code-v2", "code_v4"), ("llm_marl/Code-v3", "code_v4")])
def test_an_older_version_names_the_current_one(old, current):
    with pytest.raises(ValueError, match=f"not this release's version.*{current}"):
        registry.get(old)
    with pytest.raises(ValueError, match="unknown environment"):
        registry.get("chess_v0")


def test_an_older_module_name_returns_the_current_version_with_a_warning():
    """`llm_marl_envs.sokoban_v0.env()` keeps working after the v1 and v2 bumps, and says what happened."""
    import llm_marl_envs

    with pytest.warns(FutureWarning, match=r"sokoban_v0 was replaced by llm_marl_envs\.sokoban_v2"):
        module = llm_marl_envs.sokoban_v0
    assert module is llm_marl_envs.sokoban_v2
    env = module.env()
    env.reset(seed=0)
    assert env.unwrapped.metadata["name"] == "sokoban_v2"
    with pytest.raises(AttributeError):
        llm_marl_envs.sokoban_v7
    with pytest.raises(AttributeError):
        llm_marl_envs.sudoku_v0_extra


@pytest.mark.parametrize("old,current", [("plan_path_v0", "plan_path_v2"), ("plan_path_v1", "plan_path_v2"),
                                         ("sokoban_v1", "sokoban_v2"), ("sudoku_v0", "sudoku_v1"), ("math_v0", "math_v2"), ("math_v1", "math_v2"),
                                         ("code_v0", "code_v4"), ("code_v1", "code_v4"), ("code_v2", "code_v4"), ("code_v3", "code_v4")])
def test_every_older_module_name_is_the_current_module(old, current):
    with pytest.warns(FutureWarning, match=rf"{old} was replaced by llm_marl_envs\.{current}"):
        module = getattr(llm_marl_envs, old)
    assert module is getattr(llm_marl_envs, current) and module.raw_env.metadata["name"] == current


def test_an_older_module_name_imports_as_the_current_version_with_a_warning():
    """`import llm_marl_envs.sokoban_v0` failed (no such module) where `llm_marl_envs.sokoban_v0` worked."""
    import sys

    import llm_marl_envs

    try:
        with pytest.warns(FutureWarning, match=r"sokoban_v0 was replaced by llm_marl_envs\.sokoban_v2"):
            import llm_marl_envs.sokoban_v0 as module
        assert module is llm_marl_envs.sokoban_v2 and module.env().unwrapped.metadata["name"] == "sokoban_v2"
        assert module.__spec__.name == module.__name__ == "llm_marl_envs.sokoban_v2"
        with pytest.raises(ModuleNotFoundError):
            import llm_marl_envs.sokoban_v7  # noqa: F401
    finally:  # attribute access warns again in the other tests
        sys.modules.pop("llm_marl_envs.sokoban_v0", None)
        vars(llm_marl_envs).pop("sokoban_v0", None)


def test_an_option_that_takes_none_besides_a_number_accepts_none():
    """Sokoban's max_solution_moves defaults to 15 and documents None as "no limit": the option check
    (`--env-arg max_solution_moves=None`) must let None through, and still refuse other kinds."""
    env = registry.make("sokoban", max_solution_moves=None)
    assert env.unwrapped.config.max_solution_moves is None
    with pytest.raises(ValueError, match="option max_solution_moves takes a whole number"):
        registry.make("sokoban", max_solution_moves="many")
    with pytest.raises(ValueError, match="option height takes a whole number"):
        registry.make("sokoban", height=None)


@pytest.mark.parametrize("name,option,value", [("sudoku", "box_rows", "abc"), ("plan_path", "max_path_length", "abc"),
                                               ("code", "max_turns", 2.5), ("math", "difficulty", "2")])
def test_an_option_that_defaults_to_none_is_checked_for_its_kind(name, option, value):
    """Options annotated int | None that default to None were left to the env: `max_path_length='abc'` ended in
    "'<' not supported between instances of 'str' and 'int'", `box_rows='abc'` in int()'s message without the
    option's name, and `max_turns=2.5` was cut to 2."""
    with pytest.raises(ValueError, match=f"{name} option {option} takes a whole number or None"):
        registry.make_raw(name, **{option: value})
    registry.make_raw(name, **{option: None})


def test_a_sandbox_that_is_no_sandbox_is_refused_when_the_env_is_made():
    """`--env-arg sandbox=5` (train's config) once built the env, which then raised AttributeError from the first
    tool call's step."""
    from llm_marl_envs.sandbox import default_sandbox

    with pytest.raises(ValueError, match="plan_path: sandbox must be an llm_marl_envs.sandbox.Sandbox"):
        registry.make_raw("plan_path", sandbox=5)
    assert registry.make_raw("plan_path", sandbox=default_sandbox()).sandbox is default_sandbox()
