"""PettingZoo completeness (issue 13, item 7): `pettingzoo.make("parallel", ...)` for every env with a
`parallel_env`, `state()` for the board envs (PettingZoo's NotImplementedError for the others), and
`llm-marl play` printing each board once."""

from __future__ import annotations

import json

import pettingzoo
import pytest

import llm_marl_envs  # noqa: F401  (registers the environments with PettingZoo)
from llm_marl.cli import main
from llm_marl_envs.registry import ENVS

PARALLEL = [e for e in ENVS.values() if e.has_parallel]
BOARDS = {"plan_path", "sokoban", "sudoku"}


def test_some_env_is_parallel():
    assert PARALLEL, "no environment declares a parallel_env"


@pytest.mark.parametrize("entry", PARALLEL, ids=lambda e: e.name)
def test_pettingzoo_make_parallel(entry):
    env = pettingzoo.make("parallel", entry.pz_id)
    assert isinstance(env, pettingzoo.ParallelEnv)
    observations, infos = env.reset(seed=0)
    assert set(observations) == set(env.agents) == set(entry.roles)
    observations, rewards, terminations, truncations, infos = env.step({a: "I do not know." for a in env.agents})
    assert set(rewards) <= set(entry.roles)
    env.close()


@pytest.mark.parametrize("entry", [e for e in ENVS.values() if not e.has_parallel], ids=lambda e: e.name)
def test_envs_without_parallel_env_are_not_in_the_parallel_registry(entry):
    assert entry.pz_id not in pettingzoo.parallel_registry and entry.pz_id in pettingzoo.aec_registry


@pytest.mark.parametrize("entry", list(ENVS.values()), ids=lambda e: e.name)
def test_state_is_the_board_or_not_implemented(entry):
    env = pettingzoo.make("aec", entry.pz_id)
    env.reset(seed=0)
    if entry.name not in BOARDS:
        with pytest.raises(NotImplementedError, match="no global state"):
            env.state()
        return
    raw = env.unwrapped
    state = env.state()
    assert isinstance(state, str) and state == raw._render_state() and raw.state_space.contains(state)


def test_a_large_board_is_in_the_state_space():
    """A 300x300 Plan-Path grid renders to 90,000 characters, which its observation held and the state space (65,536
    then) did not."""
    env = pettingzoo.make("aec", ENVS["plan_path"].pz_id, height=300, width=300)
    env.reset(seed=0)
    state = env.state()
    assert len(state) > 90_000 and env.unwrapped.state_space.contains(state)


def test_state_follows_the_board():
    from agents.oracle import make_oracle

    env = pettingzoo.make("aec", ENVS["plan_path"].pz_id)
    env.reset(seed=0, options={"split": "test"})
    before = env.state()
    oracle = make_oracle("plan_path")
    for role in env.agent_iter(4):
        observation, _, terminated, truncated, _ = env.last()
        env.step(None if terminated or truncated else oracle.act(role, observation))
    assert env.unwrapped.success and env.state() != before and "position" in env.state()


def test_parallel_env_state_follows_the_aec_env():
    env = pettingzoo.make("parallel", ENVS["math"].pz_id)
    env.reset(seed=0)
    with pytest.raises(NotImplementedError, match="no global state"):
        env.state()


def test_play_prints_each_board_once(capsys):
    assert main(["play", "--env", "plan_path", "--agent", "random", "--seed", "1", "--env-arg", "max_turns=2"]) == 0
    out = capsys.readouterr().out
    frames = out.strip().split("\n\n")[:-1]
    summary = json.loads(out.strip().splitlines()[-1])
    assert len(frames) == 1 + summary["turns"] * 2  # the start, then one frame per reply
    boards = [f.split("\n--- last reply")[0].split("\n", 1)[1] for f in frames if "(board unchanged)" not in f.splitlines()[0]]
    assert len(boards) == len(set(boards)) and boards  # a board is printed again only when it changed
    unchanged = [f for f in frames if "(board unchanged)" in f.splitlines()[0]]
    assert unchanged and all("--- last reply" in f for f in unchanged)


def test_readme_names_the_parallel_and_board_envs():
    from llm_marl_envs.registry import make_raw
    from tests.test_cli import README

    assert [e.module for e in PARALLEL] == ["math_v2"] and 'pettingzoo.make("parallel", "llm_marl/Math-v2")' in README
    assert {n for n, e in ENVS.items() if type(make_raw(n)).has_global_state} == BOARDS
    assert "(`plan_path_v2`, `sokoban_v2`, `sudoku_v1`) return the current board as text from `state()`" in README
