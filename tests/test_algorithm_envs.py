"""Which algorithm runs on which environment: every pair either starts or stops with an error naming
the fix, and the README's table says the same."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from llm_marl.algorithms import ALGORITHMS, get
from llm_marl_envs.registry import ENVS, make_raw

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def supported(algo_id: str, env: str) -> str | None:
    """None when `algo_id` runs on `env` with its defaults, else the error a user would see."""
    algorithm = get(algo_id)
    config = algorithm.config_cls()
    try:
        algorithm.check_env(make_raw(env, **algorithm.env_kwargs(config, env)), config)
    except ValueError as exc:
        return str(exc)
    return None


def readme_matrix() -> dict[tuple[str, str], bool]:
    block = README.split("<!-- algorithm-env matrix -->", 2)[1]
    rows = [line for line in block.strip().splitlines() if line.startswith("| `")]
    envs = [e.strip(" `") for e in block.strip().splitlines()[0].strip("|").split("|")[1:]]
    out = {}
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        for env, cell in zip(envs, cells[1:]):
            out[(cells[0].strip("`"), env)] = cell == "yes"
    return out


@pytest.mark.parametrize("algo_id", list(ALGORITHMS))
def test_each_pair_starts_or_names_the_fix(algo_id):
    matrix = readme_matrix()
    for env in ENVS:
        error = supported(algo_id, env)
        assert matrix[(algo_id, env)] == (error is None), (algo_id, env, error)
        if error is not None:
            assert re.search(r"use |pass --", error, re.I), error  # the message says what to do instead
